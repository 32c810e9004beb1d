"""The connection supervisor: one long-lived owner task per MCP server connection.

Why an owner task: the SDK's transports and ``ClientSession`` are async context managers holding anyio task
groups, which must be entered and left by the same task. If the first caller opened them, a later ``close()``
from another task (a web handler, a cancelled scope) would fail with "exit cancel scope in a different task",
and a cancelled caller would tear the connection down for everyone. So each connection is opened, held and
closed by a task of its own (a *generation*); callers only send requests on its session, which any task may do.

A generation ends when the kernel closes it, when its stdio process exits, or when a call finds the connection
closed; the next use then starts a new generation. Concurrent first uses share one generation, so they open
exactly one connection.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from kavalai.adapters.base import ToolRegistry
from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._convert import build_models, raise_tool_error, result_value
from kavalai.adapters.mcp._errors import describe_failure, scrub
from kavalai.adapters.mcp._state import McpServerState, McpStatus
from kavalai.adapters.mcp._stdio import StdioProcess, open_stdio
from kavalai.adapters.mcp._transports import open_http
from kavalai.errors import InvalidToolURIError, ServerConnectionError, ToolExecutionError
from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._uri import ToolURI

__all__ = ["McpConnection"]

logger = logging.getLogger("kavalai.mcp")

_CLIENT_INFO: Final = mcp_types.Implementation(name="kavalai", version="0.1.0")
_CLOSE_WAIT: Final = 15.0  # bound on waiting for a generation to shut down (stdio needs at most ~6 s)
_EXIT_WAIT: Final = 0.5  # how long a failed call waits for a dying server's exit code and stderr
_MAX_PAGES: Final = 1000  # a tools/list paginator that never ends cannot hang discovery
_MAX_ATTEMPTS: Final = 3  # generations one use may start when each dies right after connecting


@dataclass(eq=False)
class _Generation:
    """One attempt at a connection, from spawn to shutdown, owned by one task."""

    number: int
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    refresh: anyio.Event = field(default_factory=anyio.Event)
    session: ClientSession | None = None
    process: StdioProcess | None = None
    scope: anyio.CancelScope | None = None
    error: ServerConnectionError | None = None
    closing: bool = False
    task: asyncio.Task[None] | None = None


class McpConnection:
    """Connects one MCP server on demand, publishes its tools into the kernel's registry, runs its calls."""

    def __init__(self, config: McpServer, registry: ToolRegistry) -> None:
        self.config = config
        self._registry = registry
        self._gen: _Generation | None = None
        self._generations = 0
        self._connects = 0
        self._status: McpStatus = "registered"
        self._error: str | None = None
        self._tools: dict[str, ToolDefinition] = {}

    # ------------------------------------------------------------------------------------------------ state

    @property
    def name(self) -> str:
        """The server's registered name."""
        return self.config.name

    @property
    def connected(self) -> bool:
        """Whether a live session is open now."""
        gen = self._gen
        return gen is not None and gen.session is not None and not gen.stop.is_set()

    def state(self) -> McpServerState:
        """A snapshot of the connection."""
        gen = self._gen
        process = gen.process if gen is not None and self.connected else None
        return McpServerState(
            name=self.name,
            status=self._status,
            transport=self.config.kind,
            tools=tuple(sorted(self._tools)),
            error=self._error,
            pid=process.pid if process is not None else None,
            connects=self._connects,
        )

    def tool(self, uri: str) -> ToolDefinition | None:
        """The published definition at ``uri``, if this server offers it."""
        return self._tools.get(uri)

    # ------------------------------------------------------------------------------------------- connecting

    async def connect(self) -> None:
        """Connect unless connected; raise :class:`ServerConnectionError` naming the server and why not."""
        await self._session()

    async def _session(self) -> ClientSession:
        gen = self._gen
        if gen is not None and gen.session is not None and not gen.stop.is_set():
            return gen.session  # the common case, without a checkpoint
        for _ in range(_MAX_ATTEMPTS):
            gen = await self._live_generation()
            await gen.ready.wait()
            if gen.session is not None and not gen.stop.is_set():
                return gen.session
            if gen.error is not None:
                raise ServerConnectionError(
                    gen.error.message,
                    server=self.name,
                    exit_code=gen.error.exit_code,
                    stderr_tail=gen.error.stderr_tail,
                ) from gen.error.__cause__
            if gen.closing:
                raise ServerConnectionError(f"MCP server {self.name!r} was closed while connecting.", server=self.name)
        raise ServerConnectionError(
            f"MCP server {self.name!r} closed its connection right after connecting, {_MAX_ATTEMPTS} times. "
            f"{self._error or ''}".strip(),
            server=self.name,
        )

    async def _live_generation(self) -> _Generation:
        """The generation to use: the current one, or a new one once a stopping one has finished."""
        gen = self._gen
        if gen is not None and gen.stop.is_set() and not gen.done.is_set():
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
                await gen.done.wait()
            if not gen.done.is_set():  # pragma: no cover - only a transport that ignores cancellation
                raise ServerConnectionError(
                    f"MCP server {self.name!r} did not shut down in time to reconnect.", server=self.name
                )
            gen = self._gen  # another task may have started the next generation meanwhile
        if gen is None or gen.done.is_set():
            gen = self._start()
        return gen

    def _start(self) -> _Generation:
        self._generations += 1
        gen = _Generation(number=self._generations)
        self._gen = gen
        self._status = "connecting"
        gen.task = _spawn(self._own(gen), name=f"kavalai-mcp-{self.name}-{gen.number}")
        return gen

    async def _own(self, gen: _Generation) -> None:
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as scope:
                gen.scope = scope
                async with AsyncExitStack() as stack:
                    session = await self._open(stack, gen)
                    await session.initialize()
                    self._publish(await _list_tools(session))
                    scope.deadline = math.inf
                    gen.session = session
                    self._connects += 1
                    self._status, self._error = "connected", None
                    gen.ready.set()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._refresh_loop, gen, session)
                        await gen.stop.wait()
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and gen.session is None and not gen.closing:
                gen.error = self._failure(None, gen, timed_out=True)
        except Exception as exc:
            gen.error = self._failure(exc, gen)
        finally:
            self._finish(gen)

    async def _open(self, stack: AsyncExitStack, gen: _Generation) -> ClientSession:
        if self.config.kind == "stdio":
            streams, process = await stack.enter_async_context(open_stdio(self.config, on_exit=gen.stop.set))
            gen.process = process
        else:
            streams = await stack.enter_async_context(open_http(self.config))
        session = ClientSession(*streams, message_handler=_MessageHandler(gen), client_info=_CLIENT_INFO)
        return await stack.enter_async_context(session)

    def _failure(self, exc: Exception | None, gen: _Generation, *, timed_out: bool = False) -> ServerConnectionError:
        process = gen.process
        error = describe_failure(
            self.config,
            exc,
            phase="while connecting",
            timed_out=timed_out,
            exit_code=process.returncode if process is not None else None,
            stderr_tail=process.stderr_tail() if process is not None else None,
        )
        if exc is not None:
            error.__cause__ = exc
        return error

    def _finish(self, gen: _Generation) -> None:
        connected = gen.session is not None
        gen.session = None
        gen.stop.set()
        gen.ready.set()
        gen.done.set()
        if self._gen is not gen:
            return
        if gen.closing:
            self._status, self._error = "closed", None
        elif gen.error is not None:
            self._status, self._error = "failed", gen.error.message
        elif connected and gen.process is not None and gen.process.returncode is not None:
            self._status, self._error = "failed", self._exit_message(gen.process, "while connected")
        elif connected:
            self._status, self._error = "failed", f"The connection to MCP server {self.name!r} was lost."

    def _exit_message(self, process: StdioProcess, when: str) -> str:
        return describe_failure(
            self.config,
            None,
            phase=when,
            exit_code=process.returncode,
            stderr_tail=process.stderr_tail(),
        ).message

    # ------------------------------------------------------------------------------------------------ tools

    async def _refresh_loop(self, gen: _Generation, session: ClientSession) -> None:
        while True:
            await gen.refresh.wait()
            gen.refresh = anyio.Event()
            try:
                self._publish(await _list_tools(session))
            except Exception as exc:  # keep the old tools; the connection itself reports real failures
                logger.warning("MCP server %r: refreshing the tool list failed: %s", self.name, scrub(self.config, exc))

    def _publish(self, tools: list[mcp_types.Tool]) -> None:
        fresh: dict[str, ToolDefinition] = {}
        for tool in tools:
            definition = self._definition(tool)
            if definition is not None:
                fresh[definition.name] = definition
        for uri in set(self._tools) - set(fresh):
            self._registry.remove_tool(uri)
        for definition in fresh.values():
            self._registry.add_tool(definition, replace=True)
        self._tools = fresh

    def _definition(self, tool: mcp_types.Tool) -> ToolDefinition | None:
        try:
            uri = ToolURI.build("mcp", self.name, tool.name)
        except InvalidToolURIError as exc:
            logger.warning("MCP server %r: skipping tool %r: %s", self.name, tool.name, exc)
            return None
        models = build_models(self.name, tool)
        name, uri_text, structured = tool.name, str(uri), models.structured

        async def invoke(args: BaseModel) -> Any:
            return await self.call(name, uri_text, args, structured=structured)

        return ToolDefinition(
            uri=uri,
            description=tool.description or tool.title or "",
            input_model=models.input_model,
            output_model=models.output_model,
            invoke=invoke,
            wrapped=models.wrapped,
            timeout=self.config.timeout,
            input_schema=tool.input_schema,
            output_schema=models.output_schema,
            metadata={"server": self.name, "tool": tool.name, "transport": self.config.kind},
        )

    def unpublish(self) -> None:
        """Withdraw this server's tools from the registry."""
        for uri in self._tools:
            self._registry.remove_tool(uri)
        self._tools = {}

    # ---------------------------------------------------------------------------------------------- calling

    async def call(self, tool: str, uri: str, args: BaseModel, *, structured: bool) -> Any:
        """Run ``tools/call`` and return the raw value for the output model."""
        session = await self._session()
        gen = self._gen
        arguments = args.model_dump(by_alias=True, exclude_unset=True, mode="json")
        request = mcp_types.CallToolRequest(params=mcp_types.CallToolRequestParams(name=tool, arguments=arguments))
        try:
            result = await session.send_request(request, mcp_types.CallToolResult)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED and gen is not None:
                if gen.closing:
                    raise ServerConnectionError(
                        f"MCP server {self.name!r} was closed during a call to {uri}.", uri=uri, server=self.name
                    ) from exc
                raise await self._lost(gen, uri) from exc
            raise ToolExecutionError(
                f"Tool {uri} failed: the server answered error {exc.code}: {scrub(self.config, exc.message)}",
                uri=uri,
            ) from exc
        if result.is_error:
            raise_tool_error(uri, result)
        return result_value(result, structured=structured)

    async def _lost(self, gen: _Generation, uri: str) -> ServerConnectionError:
        gen.stop.set()
        process = gen.process
        if process is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_EXIT_WAIT):
                await process.exited.wait()
                await process.stderr_closed.wait()
        error = describe_failure(
            self.config,
            None,
            phase=f"during a call to {uri}",
            exit_code=process.returncode if process is not None else None,
            stderr_tail=process.stderr_tail() if process is not None else None,
        )
        error.uri = uri
        if self._gen is gen:  # say so now, not only once the generation has finished shutting down
            self._status, self._error = "failed", error.message
        return error

    # ---------------------------------------------------------------------------------------------- closing

    async def aclose(self) -> None:
        """Close the connection (its process, session and task) and withdraw its tools. Idempotent."""
        gen = self._gen
        if gen is not None and not gen.done.is_set():
            gen.closing = True
            if gen.session is None and gen.scope is not None:
                gen.scope.cancel()  # still connecting: interrupt it
            gen.stop.set()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
                await gen.done.wait()
            if not gen.done.is_set():  # pragma: no cover - only a transport that ignores cancellation
                logger.warning("MCP server %r did not shut down within %s s", self.name, _CLOSE_WAIT)
        self.unpublish()
        if self._status != "registered":
            self._status = "closed"


class _MessageHandler:
    """Receives the server's notifications; a changed tool list wakes the generation's refresher."""

    def __init__(self, gen: _Generation) -> None:
        self._gen = gen

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._gen.refresh.set()
        elif isinstance(message, Exception):
            logger.debug("MCP transport reported %s", type(message).__name__)


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _spawn(coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
    """Start the owner task on the running asyncio loop; it belongs to no caller's task group."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        coro.close()
        raise RuntimeError("MCP connections need an asyncio event loop (anyio's asyncio backend).") from None
    return loop.create_task(coro, name=name)
