"""The kernel's ``mcp://`` methods. The MCP adapter (and the ``mcp`` SDK) is imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from kavalai.adapters.base import ToolAdapter
    from kavalai.adapters.mcp import McpServer, McpServerState
    from kavalai.adapters.mcp._adapter import McpAdapter

    A = TypeVar("A", bound=ToolAdapter)

__all__ = ["McpKernelMixin"]


class McpKernelMixin:
    """``register_mcp_server``, ``connect_mcp_servers`` and the MCP server states of :class:`FunctionKernel`."""

    if TYPE_CHECKING:

        def _adapter_for(self, cls: type[A]) -> A: ...

    def _mcp(self) -> McpAdapter:
        from kavalai.adapters.mcp._adapter import McpAdapter

        return self._adapter_for(McpAdapter)

    def register_mcp_server(self, server: McpServer) -> None:
        """Record an MCP server's configuration. Nothing starts until :meth:`connect_mcp_servers`, a tool
        listing or a call needs it.

        Raises:
            ToolRegistrationError: a server of the same name is already registered.
        """
        self._mcp().register_server(server)

    async def connect_mcp_servers(self) -> None:
        """Start (or connect to) every registered MCP server that is not connected yet, concurrently, and
        discover its tools. Servers that connect stay usable even when another fails; the failures are then
        raised as one :class:`~kavalai.errors.ServerConnectionError` naming each server and why."""
        await self._mcp().connect()

    async def close_mcp_servers(self) -> None:
        """Close every MCP server (sessions, processes, tasks) and withdraw their tools, leaving the rest of the
        kernel open. Idempotent; a server connects again on next use."""
        await self._mcp().aclose()

    def mcp_server_states(self) -> list[McpServerState]:
        """The state of every registered MCP server (connected, failed and why, closed, ...), in registration
        order. Cheap and synchronous: it connects nothing."""
        return self._mcp().states()

    def get_mcp_server_state(self, name: str) -> McpServerState:
        """The state of the MCP server registered as ``name``.

        Raises:
            ToolNotFoundError: no MCP server of that name is registered.
        """
        return self._mcp().state(name)
