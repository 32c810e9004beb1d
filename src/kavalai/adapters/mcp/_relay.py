"""Passing what MCP servers send on to someone further up: ``kavalai serve``'s host sessions.

A gateway fronting MCP servers must hand their log messages and change notices to its host, and put their
requests (sampling, elicitation, roots) to the host that made the call. It gives the adapter an :class:`McpRelay`
(:meth:`kavalai.adapters.mcp.McpAdapter.relay_to`); every connection of the adapter shares one :class:`RelaySlot`,
read when a message arrives, so a relay set after a server connected still gets its log messages and changes. A
server is told the client can sample, elicit and list roots only by a session opened while a relay is set.

The server's own handlers on its :class:`~kavalai.McpServer` still run (``log_handler``, ``on_change``); its
``sampling_approval``, ``sampling_max_tokens`` and ``sampling_max_requests`` bound a relayed sampling request too.
"""

from __future__ import annotations

from typing import Any, Protocol

import mcp_types

from kavalai.adapters.mcp._catalog import McpChange, McpLogMessage

__all__ = ["McpRelay", "RelaySlot"]


class McpRelay(Protocol):
    """Who receives what servers send. The requests answer with the SDK's result, or an ``ErrorData`` (the
    server is told why, e.g. that the host cannot sample)."""

    async def log(self, message: McpLogMessage) -> None:
        """A server's log message (its secrets masked)."""

    async def changed(self, change: McpChange) -> None:
        """A server's list changed, or a subscribed resource did."""

    async def sample(
        self, server: str, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """A server's sampling request, made during a call (already approved and capped)."""

    async def elicit(self, server: str, params: Any) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """A server's elicitation (form or URL mode), made during a call."""

    async def list_roots(self, server: str) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        """A server's ``roots/list`` request."""


class RelaySlot:
    """The relay in effect (``None``: none), shared by every connection of an adapter."""

    __slots__ = ("relay",)

    def __init__(self) -> None:
        self.relay: McpRelay | None = None
