"""The ``mcp://`` adapter: registered servers, connecting them (all at once or on demand), state and closing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import anyio
from mcp.shared.dispatcher import ProgressFnT

from kavalai.adapters.base import ToolAdapter, ToolRegistry
from kavalai.adapters.mcp import _features as features
from kavalai.adapters.mcp._catalog import (
    McpCompletion,
    McpPrompt,
    McpPromptResult,
    McpResource,
    McpResourceTemplate,
)
from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._connection import McpConnection
from kavalai.adapters.mcp._content import McpResourceContent
from kavalai.adapters.mcp._identities import connection_for
from kavalai.adapters.mcp._relay import McpRelay, RelaySlot
from kavalai.adapters.mcp._state import McpServerState
from kavalai.errors import ConfigurationError, ServerConnectionError, ToolNotFoundError, ToolRegistrationError
from kavalai.kernel import ToolDefinition, ToolURI

__all__ = ["McpAdapter"]


class McpAdapter(ToolAdapter):
    """Hosts the tools of MCP servers as ``mcp://<server>.<tool>``.

    Registering a server records its configuration only. :meth:`connect` connects every server that is not
    connected, concurrently; a tool listing or call connects its server on demand.
    """

    scheme: ClassVar[str] = "mcp"

    def __init__(self, registry: ToolRegistry) -> None:
        super().__init__(registry)
        self._connections: dict[str, McpConnection] = {}
        self._relay = RelaySlot()  # shared by every connection (_relay.py)

    def register_server(self, server: McpServer) -> None:
        """Record ``server``; a second server of the same name is an error."""
        if not isinstance(server, McpServer):
            raise ToolRegistrationError(
                f"register_mcp_server takes an McpServer, not {type(server).__name__}: "
                "McpServer(name=..., command=..., args=[...]) or McpServer(name=..., url=...)."
            )
        if server.name in self._connections:
            raise ToolRegistrationError(
                f"MCP server {server.name!r} is already registered; give each server its own name."
            )
        connection = connection_for(server, self.registry)  # per identity with OAuth
        connection.relay = self._relay
        self._connections[server.name] = connection

    def relay_to(self, relay: McpRelay | None) -> None:
        """Pass what every server sends on to ``relay`` (``None``: stop): log messages and changes at once, and the
        requests (sampling, elicitation, roots) of the sessions opened from now on."""
        self._relay.relay = relay

    async def set_log_level(self, server: str, level: str) -> None:
        """Ask ``server`` to send log messages from ``level`` on (``logging/setLevel``; a server that does not log
        is not asked)."""
        await self.connection(server).set_log_level(level)

    async def connect(self) -> None:
        """Connect every registered server that is not connected yet, concurrently.

        Raises:
            ServerConnectionError: one or more servers failed; the message names each and why. The others
                stay connected.
            ConfigurationError: a server's setting does not fit what it lists (``tools_on_doubt`` naming no tool
                of it); the first such, after every server was tried.
        """
        pending = [c for c in self._connections.values() if not c.connected]
        if not pending:
            return
        failures: list[ServerConnectionError] = []
        settings: list[ConfigurationError] = []

        async def connect_one(connection: McpConnection) -> None:
            try:
                await connection.connect()
            except ServerConnectionError as exc:
                failures.append(exc)
            except ConfigurationError as exc:
                settings.append(exc)

        async with anyio.create_task_group() as tg:
            for connection in pending:
                tg.start_soon(connect_one, connection)
        if settings:
            raise settings[0]
        if len(failures) == 1:
            raise failures[0]
        if failures:
            names = ", ".join(repr(f.server) for f in failures)
            details = "\n".join(f"- {f.message}" for f in failures)
            raise ServerConnectionError(f"{len(failures)} MCP servers failed to connect ({names}):\n{details}")

    async def resolve(self, uri: ToolURI) -> ToolDefinition | None:
        """Connect the server of ``uri`` if needed and return the tool, or ``None`` if the server lacks it."""
        connection = self._connections.get(uri.server or "")
        if connection is None:
            return None
        if not connection.connected:
            try:
                await connection.connect()
            except ServerConnectionError as exc:
                exc.uri = str(uri)
                raise
        return connection.tool(str(uri))

    def missing_hint(self, uri: ToolURI) -> str | None:
        """Why ``uri`` is unknown: no such server, or the server's tools (or failure)."""
        connection = self._connections.get(uri.server or "")
        if connection is None:
            known = ", ".join(repr(name) for name in self._connections) or "none"
            return f"No MCP server named {uri.server!r} is registered (registered: {known})."
        state = connection.state()
        if state.status == "failed":
            return f"Its server failed: {state.error}"
        if state.tools:
            names = ", ".join(name.split(".", 1)[1] for name in state.tools)
            return f"MCP server {uri.server!r} offers: {names}."
        if state.status == "connected":
            return f"MCP server {uri.server!r} offers no tools."
        return None

    def server_names(self) -> list[str]:
        """The names of the registered servers, in registration order."""
        return list(self._connections)

    def states(self) -> list[McpServerState]:
        """The state of every registered server, in registration order."""
        return [connection.state() for connection in self._connections.values()]

    def state(self, name: str) -> McpServerState:
        """The state of the server ``name``.

        Raises:
            ToolNotFoundError: no server of that name is registered.
        """
        return self.connection(name).state()

    def connection(self, name: str) -> McpConnection:
        """The connection of the server ``name`` (connected on its first request).

        Raises:
            ToolNotFoundError: no server of that name is registered.
        """
        connection = self._connections.get(name)
        if connection is None:
            known = ", ".join(repr(n) for n in self._connections) or "none"
            raise ToolNotFoundError(f"No MCP server named {name!r} is registered (registered: {known}).")
        return connection

    # What a server offers besides tools (see kavalai.adapters.mcp._features); each connects its server if needed.

    async def list_resources(self, server: str) -> list[McpResource]:
        """The resources ``server`` lists."""
        return await features.list_resources(self.connection(server).request)

    async def list_resource_templates(self, server: str) -> list[McpResourceTemplate]:
        """The resource templates ``server`` lists."""
        return await features.list_resource_templates(self.connection(server).request)

    async def read_resource(
        self, server: str, uri: str, *, progress: ProgressFnT | None = None
    ) -> list[McpResourceContent]:
        """The contents of resource ``uri`` of ``server``; ``progress(progress, total, message)``, when given, is
        called with the server's progress notifications for the read (the server is asked for them)."""
        return await features.read_resource(self.connection(server).request, uri, progress)

    async def subscribe_resource(self, server: str, uri: str, *, subscribe: bool = True) -> None:
        """Subscribe to (or unsubscribe from) changes of resource ``uri`` of ``server``."""
        await self.connection(server).subscribe(uri, subscribe=subscribe)

    async def list_prompts(self, server: str) -> list[McpPrompt]:
        """The prompts ``server`` lists."""
        return await features.list_prompts(self.connection(server).request)

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, Any] | None, *, progress: ProgressFnT | None = None
    ) -> McpPromptResult:
        """The prompt ``name`` of ``server`` rendered with ``arguments``; ``progress``: as for
        :meth:`read_resource`."""
        return await features.get_prompt(self.connection(server).request, name, arguments, progress)

    async def complete(
        self,
        server: str,
        ref: McpPrompt | McpResourceTemplate | str,
        argument: str,
        value: str,
        context: Mapping[str, str] | None,
    ) -> McpCompletion:
        """Completions for ``argument`` of a prompt or resource template of ``server``."""
        return await features.complete(self.connection(server).request, ref, argument, value, context)

    async def aclose(self) -> None:
        """Close every connection concurrently (processes, sessions, tasks). Idempotent."""
        async with anyio.create_task_group() as tg:
            for connection in self._connections.values():
                tg.start_soon(connection.aclose)
