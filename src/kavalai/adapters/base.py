"""The small contract every tool kind implements.

An adapter owns the tools of one URI scheme. The kernel keeps one registry of :class:`ToolDefinition` objects
for all schemes (so a call is one dictionary look-up); an adapter adds its tools to that registry, removes them
when they go away, and is asked for a tool the registry does not hold (so MCP servers can connect on demand).

The kernel never imports an adapter's dependencies: ``aiohttp`` and ``mcp`` are imported by the REST and MCP
adapters when the first server of their kind is registered.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._uri import ToolURI

__all__ = ["ToolAdapter", "ToolRegistry"]


class ToolRegistry(Protocol):
    """The kernel's side of the contract: where adapters publish their tools."""

    def add_tool(self, definition: ToolDefinition, *, replace: bool = False) -> None:
        """Publish ``definition``; a URI that is already taken is an error unless ``replace`` is true."""

    def remove_tool(self, uri: str) -> None:
        """Withdraw the tool at ``uri`` (no error if there is none)."""


class ToolAdapter:
    """Base class of the adapters: list the tools, run one (through :attr:`ToolDefinition.invoke`), close.

    Subclasses set :attr:`scheme` and override what they need; every method has a do-nothing default.
    """

    scheme: ClassVar[str]

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def connect(self) -> None:
        """Bring every configured source online and publish its tools.

        Sources that connect stay connected even when another fails; failures are raised afterwards as one
        :class:`~kavalai.errors.ServerConnectionError` that names each failed source and why.
        """

    async def resolve(self, uri: ToolURI) -> ToolDefinition | None:
        """Return the tool at ``uri`` when the registry does not hold it yet, connecting its source if needed.

        Returns ``None`` when this adapter has no such tool.
        """
        return None

    def missing_hint(self, uri: ToolURI) -> str | None:
        """A sentence that explains why ``uri`` is not (yet) available, for the not-found error; or ``None``."""
        return None

    async def aclose(self) -> None:
        """Release everything the adapter holds (sessions, processes, tasks). Idempotent; it may reconnect later."""
