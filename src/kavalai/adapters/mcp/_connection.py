"""The connection supervisor: one long-lived owner task per MCP server connection.

Why an owner task: the SDK's transports and ``ClientSession`` are async context managers holding anyio task
groups, which must be entered and left by the same task. If the first caller opened them, a later ``close()``
from another task (a web handler, a cancelled scope) would fail with "exit cancel scope in a different task",
and a cancelled caller would tear the connection down for everyone. So each connection is opened, held and
closed by a task of its own (a *generation*); callers only send requests on its session, which any task may do.

A generation ends when the kernel closes it, when its transport ends (a stdio process exits, an SSE event stream
closes), when an HTTP server answers 404 for its session (restarted, or the session timed out; a call refused so is
sent once more on a new session, as the MCP specification asks), or when a call finds the connection closed; the
next use then starts a new generation. Concurrent first uses share one generation, so they open exactly one
connection.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, nullcontext
from typing import Any, Final, Literal, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types
from mcp.client import CacheConfig, Client, InputRequiredRoundsExceededError, advertise
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from kavalai.adapters._doubt import DoubtKeyError, check_doubt_keys, doubt_metadata
from kavalai.adapters.base import ToolRegistry
from kavalai.adapters.mcp import _client_side as client_side
from kavalai.adapters.mcp import _era as era
from kavalai.adapters.mcp import _features as features
from kavalai.adapters.mcp._answering import CALLER, current_answerer
from kavalai.adapters.mcp._asked import asked_meta
from kavalai.adapters.mcp._catalog import ElicitationHandler
from kavalai.adapters.mcp._config import McpServer, McpTransport
from kavalai.adapters.mcp._convert import (
    build_models,
    content_output_schema,
    raise_tool_error,
    result_value,
    unwrapped,
)
from kavalai.adapters.mcp._errors import (
    answer_unreadable,
    call_error,
    describe_failure,
    request_error,
    root_cause,
    scrub,
)
from kavalai.adapters.mcp._escalation import server_task_created
from kavalai.adapters.mcp._generation import Ending, Generation, Phase
from kavalai.adapters.mcp._healing import Backoff, CrashLoop, Healing, tool_prints
from kavalai.adapters.mcp._idempotency import meta_of
from kavalai.adapters.mcp._incoming import MessageHandler, ServerLog
from kavalai.adapters.mcp._listening import ChangeStream
from kavalai.adapters.mcp._listing import ListingTotals
from kavalai.adapters.mcp._loops import elsewhere, run_on
from kavalai.adapters.mcp._nested import relayed_progress
from kavalai.adapters.mcp._probe_spans import ProbeSpans
from kavalai.adapters.mcp._relay import RelaySlot
from kavalai.adapters.mcp._session_streams import SessionStreams
from kavalai.adapters.mcp._state import McpServerState, McpStatus
from kavalai.adapters.mcp._tasks import EXTENSION as TASKS_EXTENSION
from kavalai.adapters.mcp._tasks import (
    TaskCreated,
    call_as_legacy_task,
    drive_task,
    offers_tasks,
    send_call,
)
from kavalai.adapters.mcp._transports import open_transport
from kavalai.adapters.mcp._watch import Hearing
from kavalai.adapters.mcp._wire import keep
from kavalai.errors import (
    ConfigurationError,
    FunctionKernelException,
    InvalidToolURIError,
    OutboundRefusedError,
    ServerConnectionError,
    ToolTimeoutError,
)
from kavalai.kernel import LazyTool, ToolCall, ToolDefinition, ToolURI, current_call
from kavalai.secrets import get_logger
from kavalai.tracing import mcp_client_span, tracing_configured

__all__ = ["McpConnection"]

T = TypeVar("T")

logger = get_logger("kavalai.mcp")

_CLIENT_INFO: Final = mcp_types.Implementation(name="kavalai", version="0.1.0")
_CLOSE_WAIT: Final = 15.0  # bound on waiting for a generation to shut down (stdio needs at most ~6 s)
_EXIT_WAIT: Final = 0.5  # how long a failed call waits for the lost connection to wind up (exit code, stderr, cause)
_MAX_PAGES: Final = 1000  # a tools/list paginator that never ends cannot hang discovery
_MAX_ATTEMPTS: Final = 3  # generations one use may start when each dies right after connecting
_CALL_ATTEMPTS: Final = 2  # a call refused because the HTTP server forgot the session is sent once more
_STRAYS_LOGGED: Final = 3  # stray messages logged one by one; after these, only at counts that are powers of ten


_LISTED: Final = frozenset({"title", "annotations", "icons", "meta"})  # a tool's fields kept for a gateway's listing
_CONTENT_SCHEMA: Final = content_output_schema()  # shared by the descriptions of tools without an outputSchema


class McpConnection:
    """Connects one MCP server on demand, publishes its tools into the kernel's registry, runs its calls."""

    def __init__(self, config: McpServer, registry: ToolRegistry) -> None:
        self.config = config
        self._registry = registry
        self._gen: Generation | None = None
        self._generations = 0
        self._connects = 0
        self._status = McpStatus.REGISTERED
        self._error: str | None = None
        self._detected: McpTransport | None = None  # the transport a url turned out to speak, once known
        self._tools: dict[str, LazyTool] = {}  # what this server published (the registry holds the tools)
        self._protocol_version: str | None = None  # negotiated at the last connect
        self._server_info_name: str | None = None  # the serverInfo.name of the last connect
        self._stale_at = math.inf  # when the tool listing's ttlMs runs out (inf: no hint, kept until changed)
        self._healing = Healing(config)  # what the caller set up, restored after a reconnect (_healing.py)
        self._revival: asyncio.Task[None] | None = None  # reconnects a lost connection that has subscriptions
        self._crashes = CrashLoop(config.crash_limit, config.crash_window)  # not started again for a while
        self._hearing = Hearing(config, self._healing)  # its sessions' event streams (_watch.py)
        self._task_only: set[str] = set()  # tools that run only as tasks (2025-11-25 `taskSupport: "required"`)
        self._in_flight: list[ElicitationHandler] = []  # answerers of the calls in flight (elicitation="caller")
        self._relayed_calls: list[ToolCall] = []  # the kernel's calls in flight while a relay is set
        self.relay = RelaySlot()  # the adapter's, shared by its connections (_relay.py)
        self._strays = 0  # messages that answered no request (dropped), over all generations
        self._error_before: str | None = None  # why the last generation ended (named by a crash-loop refusal)

    # ------------------------------------------------------------------------------------------------ state

    @property
    def name(self) -> str:
        """The server's registered name."""
        return self.config.name

    @property
    def connected(self) -> bool:
        """Whether a live session is open now."""
        gen = self._gen
        return gen is not None and gen.live

    def state(self) -> McpServerState:
        """A snapshot of the connection."""
        gen = self._gen
        process = gen.process if gen is not None and self.connected else None
        return McpServerState(
            name=self.name,
            status=self._status,
            transport=self.transport,
            tools=tuple(sorted(self._tools)),
            error=self._error,
            pid=process.server_pid if process is not None else None,
            connects=self._connects,
            protocol_version=self._protocol_version,
            stray_messages=self._strays,
            server_info_name=self._server_info_name,
            restored=self._healing.restored,
            lost=self._healing.lost,
            subscriptions=tuple(sorted(self._healing.subscribed)),
        )

    @property
    def transport(self) -> McpTransport:
        """The transport in use: for a ``url`` left to auto-detection, the one found (once found)."""
        return self._detected if self.config.transport is None and self._detected is not None else self.config.kind

    def tool(self, uri: str) -> ToolDefinition | None:  # built on first use (see _publish)
        """The published definition at ``uri``, if this server offers it."""
        return self._registry.get(uri) if uri in self._tools else None

    # ------------------------------------------------------------------------------------------- connecting

    async def connect(self) -> None:
        """Connect unless connected; raise :class:`ServerConnectionError` naming the server and why not."""
        loop = elsewhere(self._gen.task if self._gen is not None else None)
        if loop is not None:  # the session lives on another event loop (_loops.py)
            await run_on(loop, self.connect())
            return
        await self._session()

    async def _session(self) -> tuple[Generation, ClientSession]:
        gen = self._gen
        if gen is not None and gen.session is not None and gen.phase is Phase.CONNECTED:
            return gen, gen.session  # the common case, without a checkpoint
        for _ in range(_MAX_ATTEMPTS):
            gen = await self._live_generation()
            await gen.wait_ready()
            if gen.session is not None and gen.phase is Phase.CONNECTED:
                return gen, gen.session
            if isinstance(gen.error, OutboundRefusedError) and not gen.was_connected:  # the gate's own error
                raise OutboundRefusedError(
                    gen.error.message, server=self.name, url=gen.error.url, field=gen.error.field
                ) from None
            setting = root_cause(gen.cause) if gen.cause is not None else None
            if isinstance(setting, DoubtKeyError) and not gen.was_connected:  # the user's setting, not the server
                raise ConfigurationError(setting.message) from None
            if gen.error is not None and not gen.was_connected:
                raise ServerConnectionError(
                    gen.error.message,
                    server=self.name,
                    exit_code=gen.error.exit_code,
                    stderr_tail=gen.error.stderr_tail,
                ) from gen.cause
            if gen.closing:
                raise ServerConnectionError(f"MCP server {self.name!r} was closed while connecting.", server=self.name)
        raise ServerConnectionError(
            f"MCP server {self.name!r} closed its connection right after connecting, {_MAX_ATTEMPTS} times. "
            f"{self._error or ''}".strip(),
            server=self.name,
        )

    async def _live_generation(self) -> Generation:
        """The generation to use: the current one, or a new one once a stopping one has finished."""
        gen = self._gen
        if gen is not None and gen.stopping and not gen.is_done():
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
                await gen.wait_done()
            if not gen.is_done():  # pragma: no cover - only a transport that ignores cancellation
                raise ServerConnectionError(
                    f"MCP server {self.name!r} did not shut down in time to reconnect.", server=self.name
                )
            gen = self._gen  # another task may have started the next generation meanwhile
        if gen is None or gen.is_done():
            refusal = self._crashes.refusal(self.name)
            if refusal is not None:
                self._report(McpStatus.FAILED, refusal)
                raise ServerConnectionError(f"{refusal}. {self._error_before or ''}".strip(), server=self.name)
            gen = self._start()
        return gen

    def _start(self) -> Generation:
        self._generations += 1
        gen = Generation(number=self._generations)
        self._gen = gen
        self._report(McpStatus.CONNECTING)
        gen.task = _spawn(self._own(gen), name=f"kavalai-mcp-{self.name}-{gen.number}")
        return gen

    async def _own(self, gen: Generation) -> None:
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as scope:
                gen.scope = scope
                async with AsyncExitStack() as stack:
                    session = await self._open_session(gen, stack)
                    healing, restoring = self._healing, self._healing.established
                    async with anyio.create_task_group() as tg:
                        if era.is_modern(session.protocol_version):
                            # Listening before the first listing: nothing that changes after it can be missed.
                            stream = ChangeStream(gen, healing, self.config.connect_timeout, restoring=restoring)
                            await tg.start(stream.run)
                        tools = await self._list_tools(gen)
                        # its tools known: tools_on_doubt must name only them (a ConfigurationError to the caller)
                        check_doubt_keys(self.config, f"MCP server {self.name!r}", [tool.name for tool in tools])
                        await self._publish(tools, offers_tasks(session))
                        if restoring and not era.is_modern(session.protocol_version):
                            await healing.resubscribe(session, self.config.timeout or self.config.connect_timeout)
                            if self.config.roots is not None or self.relay.relay is not None:  # roots offered
                                await healing.roots_changed(session)
                        # Compared now, told once connected; the comparison may take half the time left.
                        within = (scope.deadline - anyio.current_time()) / 2
                        await self._relist(gen, tool_prints(tools), restoring, within)
                        scope.deadline = math.inf
                        gen.session = session
                        self._protocol_version = session.protocol_version
                        self._server_info_name = session.server_info.name if session.server_info else None
                        gen.move(Phase.CONNECTED)
                        if gen.was_connected:
                            self._connects += 1
                            self._report(McpStatus.CONNECTED)
                        healing.established = True
                        tg.start_soon(healing.teller)
                        tg.start_soon(self._refresh_loop, gen)
                        await gen.wait_stopping()
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and not gen.was_connected and not gen.closing:
                gen.error = self._failure(gen, timed_out=True)
        except asyncio.CancelledError:
            gen.move(gen.phase, Ending.CLOSED)  # the event loop is shutting down (asyncio.run's end): nothing failed
            raise
        except Exception as exc:
            gen.cause = exc
            gen.error = self._failure(gen, exc)
        finally:
            self._finish(gen)

    def _failure(
        self, gen: Generation, exc: BaseException | None = None, *, phase: str | None = None, timed_out: bool = False
    ) -> ServerConnectionError:
        if phase is None:
            phase = "while connected" if gen.was_connected else "while connecting"
        error = describe_failure(
            self.config,
            exc,
            phase=phase,
            process=gen.process,
            timed_out=timed_out,
            expired=gen.expired,
            challenge=gen.challenge,
        )
        error.__cause__ = exc
        return error

    def _finish(self, gen: Generation) -> None:
        gen.move(Phase.DONE)
        if self._gen is not gen:
            return
        if gen.closing:
            self._report(McpStatus.CLOSED)
            return
        if gen.deaf is not None and gen.error is None:
            gen.error = ServerConnectionError(f"MCP server {self.name!r}: {gen.deaf}.", server=self.name)
        self._error_before = (gen.error or self._failure(gen)).message
        self._report(McpStatus.FAILED, self._error_before)
        if not gen.was_connected:
            return
        if gen.deaf is None:  # a server that lives but will not open its event stream is no crash
            self._crashes.lost()
        wanted = self._healing.waiting or gen.deaf is not None
        if wanted and (self._revival is None or self._revival.done()):
            self._revival = _spawn(self._revive(always=gen.deaf is not None), name=f"kavalai-mcp-{self.name}-revive")

    async def _revive(self, *, always: bool) -> None:
        """A connection with subscriptions (``always``: any connection, one whose event stream could not be
        opened again) was lost: connect again in the background (with bounded backoff, within
        ``connect_timeout``), so that the updates come again without waiting for the next call; what cannot be
        restored so is reported lost. A server in a crash loop is not started again: its subscriptions are lost."""
        healing = self._healing
        await healing.flush()  # notices of the generation that ended, which its teller did not hand over
        backoff = Backoff(self.config.connect_timeout)
        while (healing.subscribed or always) and not self.connected:
            refusal = self._crashes.refusal(self.name)
            if refusal is not None or not await backoff.wait():
                why = refusal or f"the server could not be connected again within {backoff.budget:g} s"
                for uri in sorted(healing.subscribed):
                    healing.lose(uri, why)
                await healing.flush()
                return
            try:
                await self.connect()
            except FunctionKernelException as exc:  # ServerConnectionError, as a rule: try again after a while
                logger.info("MCP server %r: connecting again failed: %s", self.name, exc)

    def _report(self, status: McpStatus, error: str | None = None) -> None:
        """The one place the connection's reported status changes (``error`` only with ``FAILED``); connecting,
        disconnecting and failing are logged at INFO on ``kavalai.mcp``."""
        if status is not self._status:
            if status is McpStatus.CONNECTED:
                again = f" (connect #{self._connects})" if self._connects > 1 else ""
                logger.info("MCP server %r connected%s: %d tools", self.name, again, len(self._tools))
            elif status is McpStatus.CLOSED:
                logger.info("MCP server %r closed", self.name)
            elif status is McpStatus.FAILED:
                logger.info("MCP server %r failed: %s", self.name, error)
        self._status, self._error = status, error

    def _stray(self, what: str) -> None:
        """A message that answers no request: dropped and counted; logged the first few times, then only at
        every power of ten, so a server that sends one with every message cannot flood the log."""
        self._strays += 1
        count = self._strays
        if count <= _STRAYS_LOGGED:
            more = " (later ones are counted in its state's stray_messages)" if count == _STRAYS_LOGGED else ""
            logger.warning("MCP server %r sent %s; ignored%s", self.name, scrub(self.config, what)[:300], more)
        elif str(count).rstrip("0") == "1":  # 10, 100, 1000, ...
            logger.warning("MCP server %r has sent %d messages that answer no request; ignored", self.name, count)

    # ------------------------------------------------------------------------------------------------ tools

    async def _open_session(self, gen: Generation, stack: AsyncExitStack) -> ClientSession:
        """Open the transport and initialize a session on it. A ``url`` whose transport is not pinned is tried
        as streamable HTTP first and, when that fails, as the legacy SSE transport (the MCP specification's
        backwards compatibility); the transport that worked is kept for the next connects."""
        config = self.config
        if config.url is not None and config.transport is None and self._detected is not None:
            config = config.model_copy(update={"transport": self._detected})
        try:
            return await self._session_on(gen, stack, config)
        except Exception as first:
            if config.url is None or config.transport is not None or gen.was_connected:
                raise
            sse = config.model_copy(update={"transport": "sse"})
            logger.info("MCP server %r: streamable HTTP failed (%s); trying the legacy SSE transport", self.name, first)
            try:
                session = await self._session_on(gen, stack, sse)
            except Exception:
                raise first from None  # neither worked: the streamable HTTP failure is the one to report
            self._detected = "sse"
            return session

    async def _session_on(self, gen: Generation, stack: AsyncExitStack, config: McpServer) -> ClientSession:
        inner = await stack.enter_async_context(AsyncExitStack())
        try:
            reads, writes, gen.process = await inner.enter_async_context(
                open_transport(
                    config,
                    on_session_expired=gen.expire,
                    on_stray=self._stray,
                    on_challenge=gen.challenged,
                    on_open=lambda gap: self._hearing.opened(gen, gap),
                    on_deaf=lambda why: self._hearing.deaf(gen, why),
                )
            )
            # The one layer every message of the session crosses (_session_streams.py): the end of the connection
            # reported, created tasks carried, a server/discover probe's span settled, a pinned version offered.
            streams = SessionStreams(
                reads, writes, on_end=gen.end, probes=ProbeSpans(), pinned=era.pinned_version(config.protocol)
            )
            # The SDK's Client negotiates the era (server/discover, else the handshake) over our transport, and
            # keeps list results for as long as their ttlMs hints allow.
            client = Client(
                streams.transport,
                mode=era.client_mode(config.protocol),
                message_handler=MessageHandler(gen, config, self._stray, self.relay),
                logging_callback=ServerLog(config, self.relay, lambda: self._healing.log_level or config.log_level),
                log_level=self._healing.log_level or config.log_level or era.log_level(config.name),
                client_info=_CLIENT_INFO,
                cache=CacheConfig(),
                extensions=[advertise(TASKS_EXTENSION)],  # a long call may come back as a task (_tasks.py)
                **client_side.callbacks(config, self._in_flight.copy, self.relay, self._asking_call),
            )
            await inner.enter_async_context(client)
            problem = era.pin_problem(config.protocol, client.protocol_version, era.offered(client.session))
            if problem is not None:
                raise ConfigurationError(f"MCP server {config.name!r}: {problem}.")
            level = self._healing.log_level or config.log_level  # the last one asked for at run time, if any
            if era.sets_log_level(client.session, level):
                refusal = await era.ask_log_level(client, level)
                if self._healing.established:  # set again after a reconnect
                    self._healing.log_level_set(refusal)
        except BaseException:
            await inner.aclose()
            raise
        gen.client = client
        return client.session

    async def _refresh_loop(self, gen: Generation) -> None:
        while True:
            await gen.refresh.wait()
            gen.refresh = anyio.Event()
            gap, gen.gap = gen.gap, False
            try:
                tools = await self._list_tools(gen, cache_mode="refresh")
                await self._publish(tools, gen.session is not None and offers_tasks(gen.session))
            except Exception as exc:  # keep the old tools; the connection itself reports real failures
                logger.warning("MCP server %r: refreshing the tool list failed: %s", self.name, scrub(self.config, exc))
                continue
            await self._relist(gen, tool_prints(tools), gap, self.config.timeout or self.config.connect_timeout)

    async def _relist(self, gen: Generation, tools: dict[str, str], tell: bool, within: float) -> None:
        """Record the catalogue just listed; after a reconnect (``tell``), tell ``on_change`` what changed."""
        try:
            await self._healing.relist(gen.client, tools, tell=tell, within=within)
        except Exception as exc:  # the comparison is lost, not the connection
            logger.warning("MCP server %r: comparing its catalogue failed: %s", self.name, scrub(self.config, exc))

    async def set_log_level(self, level: str) -> None:
        """Ask the server to send log messages from ``level`` on (handshake era: ``logging/setLevel``, a server
        that logs; 2026-07-28: in each tool call's ``_meta`` from now on); asked again on each new session after a
        reconnect."""
        self._healing.log_level = level  # type: ignore[assignment]
        await self.request(lambda client: era.ask_log_level(client, level), "logging/setLevel")  # type: ignore[arg-type]

    async def subscribe(self, uri: str, *, subscribe: bool) -> None:
        """Ask to be told when the resource at ``uri`` changes (``on_change``), or to stop; return once that is in
        force (2026-07-28: once the change stream with the new filter is open)."""
        loop = elsewhere(self._gen.task if self._gen is not None else None)
        if loop is not None:  # the session lives on another event loop (_loops.py)
            await run_on(loop, self.subscribe(uri, subscribe=subscribe))
            return
        gen, session = await self._session()
        modern = era.is_modern(session.protocol_version)
        if not modern:
            await features.subscribe_resource(self.request, uri, subscribe=subscribe)
        if subscribe:  # kept to be set up again after a reconnect (_healing.py); 2026-07-28: the stream's filter
            self._healing.subscribed.add(uri)
        else:
            self._healing.subscribed.discard(uri)
        self._healing.dropped.discard(uri)  # asked for now: no longer one that was lost
        if not modern or gen.relisten is None:
            return
        listened = anyio.Event()
        gen.listened.append(listened)
        gen.relisten.set()
        limit = self.config.timeout or self.config.connect_timeout
        with anyio.move_on_after(limit) as waited:
            await listened.wait()
        what = f"{'subscribing to' if subscribe else 'unsubscribing from'} {uri}"
        if waited.cancelled_caught:
            raise ServerConnectionError(
                f"MCP server {self.name!r} did not open its subscriptions/listen stream within {limit:g} s "
                f"when {what}.",
                server=self.name,
            )
        if gen.stopping:
            raise ServerConnectionError(
                f"MCP server {self.name!r} closed its connection when {what}.", server=self.name
            )
        if subscribe and uri not in self._healing.subscribed:
            refusal = MCPError(mcp_types.INVALID_PARAMS, "its subscriptions/listen stream did not honor it")
            raise request_error(self.config, f"subscribing to {uri!r}", refusal)

    async def _list_tools(self, gen: Generation, cache_mode: Literal["use", "refresh"] = "use") -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        ttl_ms = 0
        totals = ListingTotals(self.name, "tools/list")
        for _ in range(_MAX_PAGES):
            page = await gen.client.list_tools(cursor=cursor, cache_mode=cache_mode)
            totals.add(page.tools)
            tools.extend(page.tools)
            ttl_ms = page.ttl_ms if cursor is None else min(ttl_ms, page.ttl_ms)
            cursor = page.next_cursor
            if not cursor:
                break
        # A listing the server says may be kept ttlMs is listed again at the first call after that; without a
        # hint (0, and every handshake-era server) it is kept until the server says the list changed.
        self._stale_at = anyio.current_time() + ttl_ms / 1000 if ttl_ms > 0 else math.inf
        return tools

    async def _publish(self, tools: list[mcp_types.Tool], runs_tasks: bool = False) -> None:
        # Published lazily: listed and described from the server's schemas now, models built at the first call,
        # so a server with 10,000 tools connects without building 20,000 model classes on the event loop.
        fresh: dict[str, LazyTool] = {}
        for i, tool in enumerate(tools):
            lazy = self._lazy_tool(tool, runs_tasks)
            if lazy is not None:
                fresh[lazy.name] = lazy
            if i % 500 == 499:
                await anyio.lowlevel.checkpoint()  # let other tasks run between batches of a long listing
        self._task_only = {t.name for t in tools if t.execution is not None and t.execution.task_support == "required"}
        for uri in set(self._tools) - set(fresh):
            self._registry.remove_tool(uri)
        for lazy in fresh.values():
            self._registry.add_lazy(lazy, replace=True)
        self._tools = fresh

    def _lazy_tool(self, tool: mcp_types.Tool, runs_tasks: bool = False) -> LazyTool | None:
        try:
            uri = ToolURI.build("mcp", self.name, tool.name)
        except InvalidToolURIError as exc:
            logger.warning("MCP server %r: skipping tool %r: %s", self.name, tool.name, exc)
            return None
        metadata = {
            "server": self.name,
            "tool": tool.name,
            "transport": self.transport,
            "structured": tool.output_schema is not None,  # whether the server declared an outputSchema
            "origin": self.config.origin,  # where its effect goes (adapters/_origin.py)
            **doubt_metadata(self.config, tool.name),
        }
        if tool.execution is not None and tool.execution.task_support in ("optional", "required"):
            metadata["task_support"] = tool.execution.task_support  # a gateway serves it as a task to hosts that ask
        # Whether the server itself decides when a call becomes its task (a gateway's host is given its task then):
        # a 2026-07-28 server that declared the tasks extension, for any call; a 2025-11-25 one, for the tools it
        # runs only as tasks (called as tasks here, _tasks.py).
        if runs_tasks or metadata.get("task_support") == "required":
            metadata["server_tasks"] = True
        listed = tool.model_dump(mode="json", by_alias=True, exclude_none=True, include=set(_LISTED))
        if listed:  # its title, annotations, icons and _meta, for a gateway that lists it as its server did
            metadata["listed"] = listed
        return LazyTool(
            uri=uri,
            description=tool.description or tool.title or "",
            input_schema=tool.input_schema,
            output_schema=tool.output_schema if tool.output_schema is not None else _CONTENT_SCHEMA,
            build=lambda: self._definition(uri, tool, metadata),
            metadata=metadata,
        )

    def _definition(self, uri: ToolURI, tool: mcp_types.Tool, metadata: dict[str, Any]) -> ToolDefinition:
        config = self.config
        models = build_models(self.name, tool, extra_arguments=config.extra_arguments, extra_output=config.extra_output)
        name, uri_text, structured = tool.name, str(uri), models.structured

        async def invoke(args: BaseModel) -> Any:
            return await self.call(name, uri_text, args, structured=structured)

        async def invoke_unwrapped(args: BaseModel) -> Any:  # a FastMCP-style server's {"result": value}
            return unwrapped(await self.call(name, uri_text, args, structured=structured))

        return ToolDefinition(
            uri=uri,
            description=tool.description or tool.title or "",
            input_model=models.input_model,
            output_model=models.output_model,
            invoke=invoke_unwrapped if models.unwrap else invoke,
            wrapped=models.wrapped,
            timeout=self.config.timeout,
            input_schema=tool.input_schema,
            output_schema=models.output_schema,
            metadata=metadata,
        )

    def unpublish(self) -> None:
        """Withdraw this server's tools from the registry."""
        for uri in self._tools:
            self._registry.remove_tool(uri)
        self._tools = {}

    # ---------------------------------------------------------------------------------------------- calling

    def call(self, tool: str, uri: str, args: BaseModel, *, structured: bool) -> Awaitable[Any]:
        """Run ``tools/call``: an awaitable of the raw value for the output model. Not a coroutine itself: the usual
        call is :meth:`_call`'s coroutine, handed to the awaiting tool without a frame of its own."""
        gen = self._gen
        if gen is not None and elsewhere(gen.task) is not None:  # the session lives on another event loop (_loops.py)
            return self._call_elsewhere(tool, uri, args, structured=structured)
        if self.relay.relay is None and self.config.elicitation != CALLER:  # no call to note, no answerer
            return self._call(tool, uri, args, structured=structured)
        return self._noted_call(tool, uri, args, structured=structured)

    async def _call_elsewhere(self, tool: str, uri: str, args: BaseModel, *, structured: bool) -> Any:
        loop = elsewhere(self._gen.task if self._gen is not None else None)
        if loop is None:  # that loop's task ended in between: here, then
            return await self.call(tool, uri, args, structured=structured)
        return await run_on(loop, self._call_elsewhere(tool, uri, args, structured=structured))

    async def _noted_call(self, tool: str, uri: str, args: BaseModel, *, structured: bool) -> Any:
        made = current_call() if self.relay.relay is not None else None
        if made is not None:  # whose own deadline stops while a person answers a relayed elicitation
            self._relayed_calls.append(made)
            try:
                return await self._answered_call(tool, uri, args, structured=structured)
            finally:
                self._relayed_calls.remove(made)
        return await self._answered_call(tool, uri, args, structured=structured)

    def _asking_call(self) -> ToolCall | None:
        """The kernel's call a server's relayed elicitation is made for: the one call in flight on this connection
        (with several, whose it is cannot be told from the session's reader: none, and their own clocks run)."""
        return self._relayed_calls[0] if len(self._relayed_calls) == 1 else None

    async def _answered_call(self, tool: str, uri: str, args: BaseModel, *, structured: bool) -> Any:
        answerer = current_answerer() if self.config.elicitation == CALLER else None
        if answerer is None:
            return await self._call(tool, uri, args, structured=structured)
        self._in_flight.append(answerer)  # for a handshake-era server, which asks outside this task
        try:
            return await self._call(tool, uri, args, structured=structured)
        finally:
            self._in_flight.remove(answerer)

    async def _call(self, tool: str, uri: str, args: BaseModel, *, structured: bool) -> Any:
        # args.model_dump(by_alias=True, exclude_unset=True, mode="json"), without its frame of argument handling
        arguments = args.__pydantic_serializer__.to_python(args, by_alias=True, exclude_unset=True, mode="json")
        for attempt in range(_CALL_ATTEMPTS):
            gen = self._gen
            if gen is not None and (session := gen.session) is not None and gen.phase is Phase.CONNECTED:
                pass  # the common case: _session()'s, without its coroutine
            else:
                gen, session = await self._session()
            stale_at = self._stale_at
            if stale_at != math.inf and stale_at < anyio.current_time():  # no clock read without a ttlMs hint
                self._stale_at = math.inf
                gen.refresh.set()  # the listing's ttlMs has passed: list again, in the background
            made = current_call()  # the kernel's call: its progress callback, and its _meta when sent
            # a call without a callback of its own: a gateway's host may follow it (_nested.py), else no progress
            progress = made.report_progress if made is not None and made.progress is not None else relayed_progress()
            # 2025-11-25: a tool listed with taskSupport "required" is called as a task (_tasks.py); a 2026-07-28
            # server offering tasks may answer with one. Else the request goes out from here, without send's frame.
            legacy_task = tool in self._task_only and not era.is_modern(session.protocol_version)
            sender = (
                self._sender(tool, arguments, session, progress, made, legacy_task=legacy_task)
                if legacy_task or offers_tasks(session)
                else None
            )

            try:
                # No tracer provider: no span, and its attributes not built (mcp_client_span would yield at once).
                traced = tracing_configured()
                with mcp_client_span("tools/call", tool, self._span_attributes(tool, session)) if traced else _NO_SPAN:
                    if sender is None:
                        request = self._request(tool, arguments, None, None, made, session)
                        first = await session.send_request(request, era.CALL_RESULT, progress_callback=progress)
                    else:
                        first = await sender(None, None)
                    answered: mcp_types.CallToolResult | TaskCreated = (
                        await era.drive_input_required(
                            session, first, sender or self._sender(tool, arguments, session, progress, made)
                        )
                        if isinstance(first, mcp_types.InputRequiredResult)
                        else first  # what drive_input_required returns at once, without its frame
                    )
                    # A server may run the call as a task: then it is followed to its end (_tasks.py).
                    if isinstance(answered, TaskCreated):
                        server_task_created()  # a gateway's host is given its task now (_escalation.py)
                        result = await drive_task(session, answered)
                    else:
                        result = answered
                    keep(uri, result)  # for a gateway that passes it on as received (_wire.py)
                    if result.is_error:  # inside the span: it records the error
                        raise_tool_error(uri, result)
            except MCPError as exc:
                if gen.expired and attempt + 1 < _CALL_ATTEMPTS:
                    continue  # refused with the forgotten session, so it ran nowhere: again, on a new session
                if (exc.code == mcp_types.CONNECTION_CLOSED and not answer_unreadable(exc)) or gen.stopping:
                    raise await self._lost(gen, uri) from exc
                raise call_error(self.config, uri, exc) from exc
            return result_value(result, structured=structured)
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _request(
        self,
        tool: str,
        arguments: dict[str, Any],
        responses: mcp_types.InputResponses | None,
        state: str | None,
        made: ToolCall | None,
        session: ClientSession,
    ) -> mcp_types.CallToolRequest:
        """The ``tools/call`` request: with ``_meta`` carrying the call's idempotency key, its milliseconds left and
        the log level asked (the deadline read now, as it is sent)."""
        params = mcp_types.CallToolRequestParams(
            name=tool,
            arguments=arguments,
            input_responses=responses,
            request_state=state,
            # key, ms left, log level; a gateway's host's capabilities (moved into place by SessionStreams)
            _meta=asked_meta(era.log_meta(meta_of(made), self._healing.log_level, session)),
        )
        return mcp_types.CallToolRequest(params=params)

    def _sender(
        self,
        tool: str,
        arguments: dict[str, Any],
        session: ClientSession,
        progress: ProgressFnT | None,
        made: ToolCall | None,
        *,
        legacy_task: bool = False,
    ) -> Callable[
        [mcp_types.InputResponses | None, str | None],
        Awaitable[mcp_types.CallToolResult | mcp_types.InputRequiredResult | TaskCreated],
    ]:
        """What sends the call (again, with a round's answers and the server's state): as a 2025-11-25 task, or
        followed as a task a 2026-07-28 server may make of it, or plainly."""

        async def send(
            responses: mcp_types.InputResponses | None, state: str | None
        ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult | TaskCreated:
            request = self._request(tool, arguments, responses, state, made, session)
            if legacy_task:
                return await call_as_legacy_task(session, request, progress)
            if offers_tasks(session):  # a task the caller leaves before its answer is cancelled too
                return await send_call(
                    session, lambda: session.send_request(request, era.CALL_RESULT, progress_callback=progress)
                )
            return await session.send_request(request, era.CALL_RESULT, progress_callback=progress)

        return send

    def _span_attributes(self, tool: str, session: ClientSession) -> dict[str, Any]:
        return {
            "gen_ai.tool.name": tool,
            "gen_ai.operation.name": "execute_tool",
            "mcp.protocol.version": session.protocol_version or "",
            "network.transport": "pipe" if self.config.kind == "stdio" else "tcp",
            "kavalai.mcp.server": self.name,
        }

    async def request(self, send: Callable[[Client], Awaitable[T]], what: str) -> T:
        """Send one request other than ``tools/call`` through the SDK's client (``what`` names it in errors),
        connecting first if needed, within the server's timeout."""
        loop = elsewhere(self._gen.task if self._gen is not None else None)
        if loop is not None:  # the session lives on another event loop (_loops.py)
            return await run_on(loop, self.request(send, what))
        gen, _ = await self._session()
        try:
            with anyio.fail_after(self.config.timeout) if self.config.timeout is not None else nullcontext():
                return await send(gen.client)
        except InputRequiredRoundsExceededError as exc:
            raise request_error(self.config, what, MCPError(code=mcp_types.INTERNAL_ERROR, message=str(exc))) from None
        except MCPError as exc:
            if (exc.code == mcp_types.CONNECTION_CLOSED and not answer_unreadable(exc)) or gen.stopping:
                raise await self._lost(gen, what) from exc
            raise request_error(self.config, what, exc) from exc
        except TimeoutError:
            raise ToolTimeoutError(
                f"MCP server {self.name!r}: {what} timed out after {self.config.timeout:g} s.",
                timeout=self.config.timeout,
            ) from None

    async def _lost(self, gen: Generation, uri: str) -> ServerConnectionError:
        """The error for a call whose connection went away: why it did, as far as can be told within a moment."""
        if not gen.closing:
            gen.end()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_EXIT_WAIT):
                await gen.wait_done()  # the exit code and stderr of a stdio server, the cause of an HTTP failure
        if gen.closing:
            return ServerConnectionError(
                f"MCP server {self.name!r} was closed during a call to {uri}.", uri=uri, server=self.name
            )
        error = self._failure(gen, gen.cause, phase=f"during a call to {uri}")
        error.uri = uri
        if self._gen is gen and not gen.is_done():  # say so now, not only once it has finished shutting down
            self._report(McpStatus.FAILED, error.message)
        return error

    # ---------------------------------------------------------------------------------------------- closing

    async def aclose(self) -> None:
        """Close the connection (its process, session and task) and withdraw its tools. Idempotent."""
        loop = elsewhere(self._gen.task if self._gen is not None else None)
        if loop is not None:  # the session lives on another event loop (_loops.py)
            await run_on(loop, self.aclose())
            return
        revival, self._revival = self._revival, None
        if revival is not None and not revival.done():
            revival.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
                await asyncio.wait([revival])
        gen = self._gen
        if gen is not None and not gen.is_done():
            if gen.session is None and gen.scope is not None:
                gen.scope.cancel()  # still connecting: interrupt it
            gen.move(Phase.STOPPING, Ending.CLOSED)
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
                await gen.wait_done()
            if not gen.is_done():  # pragma: no cover - only a transport that ignores cancellation
                logger.warning("MCP server %r did not shut down within %s s", self.name, _CLOSE_WAIT)
        self.unpublish()
        self._healing.forget()
        self._crashes.reset()
        if self._status is not McpStatus.REGISTERED:
            self._report(McpStatus.CLOSED)


_NO_SPAN: Final = nullcontext()  # reusable: enters and leaves without a frame of Python


def _spawn(coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
    """Start the owner task on the running asyncio loop; it belongs to no caller's task group."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        coro.close()
        raise RuntimeError("MCP connections need an asyncio event loop (anyio's asyncio backend).") from None
    return loop.create_task(coro, name=name)
