"""The kernel as one MCP server (the SDK's low-level :class:`mcp.server.Server`): its tools listed with their own
JSON schemas, and called through :meth:`kavalai.kernel.Kernel.call_tool`."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Final, cast

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.inbound import X_MCP_HEADER_KEY
from pydantic import BaseModel

import kavalai
from kavalai.adapters.mcp import (
    asking_together,
    calls_logging_at,
    deadline_from_meta,
    keeping_wire_results,
    on_server_task,
)
from kavalai.errors import (
    ConfigurationError,
    DeadlineExceededError,
    FunctionKernelException,
    JsonRpcError,
    ServerConnectionError,
)
from kavalai.kernel import Kernel, ProgressCallback, deadline
from kavalai.secrets import get_logger
from kavalai.serve._catalog import ServedCatalog
from kavalai.serve._errors import gated, missing_capability_of, protocol_error, tool_error_result
from kavalai.serve._hosts import HostSessions
from kavalai.serve._pages import page
from kavalai.serve._progress import progress_for
from kavalai.serve._relayed import mcp_adapter, relayed_handlers, served_servers
from kavalai.serve._rounds import InputRounds, RoundsCall, takes_rounds
from kavalai.serve._tasks import EXTENSION, HostTasks, TaskParams, TaskUpdateParams, declares_tasks, missing_extension
from kavalai.serve._tools import ExposedTools, Naming, mcp_input_schema
from kavalai.serve._traced import traced_when_configured

__all__ = ["build_mcp_server", "call_kernel_tool", "tool_error_result", "tool_result"]

logger = get_logger("kavalai.serve")


def build_mcp_server(
    kernel: Kernel,
    *,
    allow: Sequence[str] | None = None,
    deny: Sequence[str] = (),
    name: str = "kavalai",
    instructions: str | None = None,
    lazy: bool = False,
    names: Naming = "prefixed",
    stateless: bool = False,
    tasks: Sequence[str] = (),
    tasks_required: Sequence[str] = (),
) -> Server[Any]:
    """An MCP server offering ``kernel``'s tools (``python://``, ``rest://`` and ``mcp://`` alike).

    Each tool is listed under a provider-safe name (``python://fs.ls`` as ``python_fs_ls``, see
    :class:`~kavalai.serve.ExposedTools`), with its description, its input schema and the schema of its output
    model. A call returns the output model as ``structuredContent`` and as JSON text; a tool that fails
    (:class:`~kavalai.errors.FunctionKernelException`) gives a result with ``isError`` and the error message. An
    ``mcp://`` tool's call returns what its server sent instead, unchanged (every content block, its
    ``structuredContent``, an ``isError`` result's own content), after crossing the kernel like any call. A
    client's progress token receives the tool's progress; a client's cancellation cancels the kernel call.

    The server neither connects nor closes the kernel: :func:`~kavalai.serve.serve_stdio` and
    :func:`~kavalai.serve.serve_http` do, or the caller does.

    Args:
        kernel: the kernel whose tools are offered; connect it first so that MCP and OpenAPI tools are known.
        allow: URI globs; when given, only tools matching one of them are offered.
        deny: URI globs of tools never offered (nor callable).
        name: the server name shown to clients.
        instructions: optional instructions for the client's model.
        lazy: connect the kernel's servers at the first request that needs their tools (a listing or a call),
            not before; a server that cannot be reached then is logged and its tools left out.
        names: ``"prefixed"`` (``python_fs_ls``, ``mcp_github_search``) or ``"own"`` (``fs.ls``, ``search``:
            refused with :class:`~kavalai.errors.ConfigurationError` when two would share a name).
        stateless: served without sessions (``serve_http(stateless=True)``): an MCP server's sampling, elicitation
            or roots request during a handshake-era host's call is refused with an error saying ``kavalai serve
            --stateless`` has no back channel (a 2026-07-28 host's call is asked in input-required rounds).
        tasks: URI globs of the tools a 2026-07-28 host that declared the tasks extension gets a task for (its
            call runs on, owned by the gateway; the host follows it with ``tasks/get``, answers it with
            ``tasks/update``, cancels it with ``tasks/cancel``: :mod:`kavalai.serve._tasks`). The tools a
            handshake-era server listed with ``execution.taskSupport`` are served so too.
        tasks_required: URI globs of the tools that run only as tasks (a host without the extension gets -32021).
    """
    tools = ExposedTools(kernel, allow=allow, deny=deny, names=names)
    connecting = _LazyConnect(kernel) if lazy else None
    adapter = mcp_adapter(kernel)
    relayed: dict[str, Any] = {}
    hosts: HostSessions | None = None
    rounds = InputRounds()
    host_tasks = HostTasks(tasks, tasks_required)
    if adapter is not None:  # the MCP servers' logging, resources, prompts and requests are relayed too
        catalog = ServedCatalog(adapter, served_servers(adapter, tools), names)
        hosts = HostSessions(catalog.served_uri, catalog.unsubscribe, stateless=stateless)
        adapter.relay_to(hosts)
        relayed = relayed_handlers(adapter, tools, hosts, catalog, connecting or _connected, rounds)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if hosts is not None:
            hosts.seen(ctx)  # a host is known from its first request (roots outside a call are asked of it)
        if connecting is not None:
            await connecting()
        with _naming_refused():
            listed, cursor = page(tools.mcp_tools(), params)
        return types.ListToolsResult(tools=listed, next_cursor=cursor)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if connecting is not None:
            await connecting()
        with _naming_refused():
            uri = tools.uri_of(params.name)
        if uri is None:
            raise protocol_error(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        server = _server_of(kernel, uri)
        if takes_rounds(ctx.protocol_version):
            definition = kernel.get_tool_definition(uri)
            support = host_tasks.support(uri, definition)
            if support is not None and declares_tasks(ctx) and host_tasks.follows_backend(uri, definition):
                if params.request_state is not None or host_tasks.can_start(ctx):
                    # the backend's rounds are the host's rounds until the backend's task exists; then the host is
                    # given a task of the gateway's, following the call from there (_tasks.py).
                    composed = await host_tasks.composed(
                        params.name, params, ctx, lambda call: calling(ctx, params, uri, server, call, True, True)
                    )
                    return cast("types.CallToolResult | types.InputRequiredResult", composed)
            elif support is not None and declares_tasks(ctx) and host_tasks.can_start(ctx):
                # the call runs on, owned by the gateway; the host follows it as a task (_tasks.py). The answer is
                # a CreateTaskResult (the extension's resultType "task"), which the SDK sends as it is.
                created = host_tasks.start(params.name, ctx, lambda call: calling(ctx, params, uri, server, call, True))
                return cast("types.CallToolResult", created)
            if support == "required" and not declares_tasks(ctx):
                raise missing_extension(f"the tool {params.name} runs only as a task")
        if hosts is None or server is None or not takes_rounds(ctx.protocol_version) or not rounds.available:
            return await calling(ctx, params, uri, server, None)
        # A 2026-07-28 host is asked what the backend asks as this call's input-required rounds (_rounds.py).
        return await rounds.call(params.name, params, ctx, lambda call: calling(ctx, params, uri, server, call))

    async def calling(
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        uri: str,
        server: str | None,
        across: RoundsCall | None,
        task: bool = False,
        escalating: bool = False,
    ) -> types.CallToolResult:
        try:
            with (
                deadline(deadline_from_meta(params.meta), what=f"MCP client's request for {params.name}"),
                hosts.calling(server, ctx, across) if hosts is not None else contextlib.nullcontext(),
                calls_logging_at(_log_level_of(params.meta)),
                asking_together() if across is not None else contextlib.nullcontext(),
                on_server_task(across.escalate) if escalating and across is not None else contextlib.nullcontext(),
            ):
                # The client's io.kavalai/deadline, when it sent one, bounds every call made for this request; a
                # backend's sampling, elicitation and roots requests during the call go to this host (_hosts.py);
                # a 2026-07-28 host's log level for the request is asked of 2026-07-28 backends for their calls, and
                # what a backend asks in one round of its own is put to such a host in one round of the gateway's;
                # a 2026-07-28 backend is told what this host can be asked (sampling, elicitation, roots), so it
                # asks only that.
                # progress is asked of backends only when the host asked, and goes to the host request in at the
                # time: the call's own, or (across rounds, a call becoming a task) its latest round's (_progress.py)
                asked = None if task and not escalating else params.meta
                with progress_for(ctx, asked, across) as progress:
                    return await call_kernel_tool(
                        kernel,
                        uri,
                        params.arguments or {},
                        progress=progress,
                        task=task,
                        relays_missing=takes_rounds(ctx.protocol_version),
                    )
        except DeadlineExceededError as exc:
            return tool_error_result(str(exc))

    def input_schema(tool_name: str) -> dict[str, Any] | None:
        # The SDK checks a 2026-07-28 call's Mcp-Param-* headers against the schema's x-mcp-header declarations,
        # walking the whole schema twice a call: a schema declaring none has nothing to check (None).
        definition = tools.definition_of(tool_name)
        if definition is None or not declares_headers(definition.get_input_schema()):
            return None
        return mcp_input_schema(definition)

    with warnings.catch_warnings():
        # Logging is deprecated by the 2026-07-28 era, but the hosts of the handshake era (and its servers) use it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = Server(
            name,
            version=kavalai.__version__,
            instructions=instructions,
            get_tool_input_schema=input_schema,
            lifespan=_owning(rounds, hosts, host_tasks),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            **relayed,
        )
    _serve_tasks(server, host_tasks)
    server = traced_when_configured(server)
    return gated(server)  # every request's failure crosses the secret gate


_declares: dict[int, tuple[dict[str, Any], bool]] = {}  # id(schema): (schema, kept so the id stays its, answer)


def declares_headers(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` may declare ``Mcp-Param-*`` headers (the text ``x-mcp-header`` is in it); when not, the
    SDK need check no header of a call, there being no declaration to require or refuse one. Remembered per schema
    (a definition builds its schema once); the memory is emptied past 4096 schemas."""
    known = _declares.get(id(schema))
    if known is None or known[0] is not schema:
        if len(_declares) >= 4096:
            _declares.clear()
        known = _declares[id(schema)] = (schema, X_MCP_HEADER_KEY in json.dumps(schema, default=str))
    return known[1]


def _owning(
    rounds: InputRounds, hosts: HostSessions | None, tasks: HostTasks
) -> Callable[[Server[Any]], contextlib.AbstractAsyncContextManager[dict[str, Any]]]:
    """The server's lifespan: each serving owns the calls of 2026-07-28 hosts that run across rounds or as tasks,
    and the releases of the subscriptions of hosts whose sessions ended (it ends once they have)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with (
            hosts.running() if hosts is not None else contextlib.nullcontext(),
            rounds.running(),
            tasks.running(),
        ):
            yield {}

    return lifespan


def _serve_tasks(server: Server[Any], tasks: HostTasks) -> None:
    """The tasks extension's methods (``tasks/get``, ``tasks/update``, ``tasks/cancel``; ``tasks/result`` and
    ``tasks/list`` are not in it), served to 2026-07-28 hosts, and the extension declared to them."""

    def era_of(ctx: ServerRequestContext[Any]) -> None:
        if not takes_rounds(ctx.protocol_version):  # a handshake-era host: no such method
            raise protocol_error(types.METHOD_NOT_FOUND, "Method not found", ctx.method)

    async def get(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        era_of(ctx)
        return tasks.get(ctx, params)

    async def update(ctx: ServerRequestContext[Any], params: TaskUpdateParams) -> dict[str, Any]:
        era_of(ctx)
        return tasks.update(ctx, params)

    async def cancel(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        era_of(ctx)
        return tasks.cancel(ctx, params)

    server.add_request_handler("tasks/get", TaskParams, get)
    server.add_request_handler("tasks/update", TaskUpdateParams, update)
    server.add_request_handler("tasks/cancel", TaskParams, cancel)
    server.extensions[EXTENSION] = {}


async def _connected() -> None:
    """Nothing to wait for: the kernel was connected before serving."""


def _log_level_of(meta: Any) -> str | None:
    """The log level a request asked for in its ``_meta`` (a 2026-07-28 host), or ``None``."""
    level = meta.get(types.LOG_LEVEL_META_KEY) if isinstance(meta, dict) else None
    return level if isinstance(level, str) else None


def _server_of(kernel: Kernel, uri: str) -> str | None:
    """The MCP server behind the tool at ``uri`` (``None`` for a tool of another kind)."""
    definition = kernel.get_tool_definition(uri)
    server = definition.metadata.get("server")
    return str(server) if definition.uri.scheme == "mcp" and server is not None else None


@contextlib.contextmanager
def _naming_refused() -> Iterator[None]:
    """``names="own"`` with two tools sharing a name: the client is told why, as a protocol error."""
    try:
        yield
    except ConfigurationError as exc:
        raise protocol_error(types.INTERNAL_ERROR, str(exc)) from None


_RETRY_FLOOR: Final = 1.0  # seconds before a quick failure is tried again


class _LazyConnect:
    """Connects the kernel's servers at the first request that needs them, single-flight: the requests that arrive
    while an attempt runs wait for it and share its outcome, its failure too; a failed attempt is tried again at a
    later request, but no sooner than the failed attempt lasted (a server hanging in ``initialize`` is tried at most
    once per ``connect_timeout``; a quick failure after :data:`_RETRY_FLOOR` seconds), not once per waiter."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._attempt: anyio.Event | None = None  # set when the attempt running now ends
        self._retry_at = 0.0  # after a failure: when a request may try again
        self._done = False
        self.attempts = 0

    async def __call__(self) -> None:
        if self._done:
            return
        if self._attempt is not None:
            await self._attempt.wait()  # the attempt running now: its outcome is this request's too
            return
        if anyio.current_time() < self._retry_at:
            return  # failed a moment ago: the request goes on without the tools, as the waiters did
        self._attempt = attempt = anyio.Event()
        try:
            await self._connect_once()
        finally:
            self._attempt = None
            attempt.set()

    async def _connect_once(self) -> None:
        self.attempts += 1
        started = anyio.current_time()
        try:
            await self._kernel.connect()
        except ServerConnectionError as exc:
            logger.warning("kavalai serve: a server of the kernel could not be connected: %s", exc)
            self._retry_at = started + max(anyio.current_time() - started, _RETRY_FLOOR) * 2
            return
        self._done = True


async def call_kernel_tool(
    kernel: Kernel,
    uri: str,
    arguments: dict[str, Any],
    *,
    progress: ProgressCallback | None = None,
    task: bool = False,
    relays_missing: bool = False,
) -> types.CallToolResult:
    """Call the tool at ``uri`` and turn the outcome into an MCP tool result (a failure too): for an ``mcp://``
    tool, the result its server sent, unchanged; else the output model (or the error's message). ``task``: the
    call is a host's task, whose protocol errors (a server's JSON-RPC error) are raised (the task failed), not
    made a tool's error result. ``relays_missing``: the host is of the 2026-07-28 era, so a server's -32021 (a
    client capability the host must declare) reaches it as that JSON-RPC error, its data kept (raised)."""
    with keeping_wire_results() as received:
        try:
            output = await kernel.call_tool(uri, arguments, progress=progress)
        except FunctionKernelException as exc:
            logger.info("%s failed: %s", uri, exc)
            sent = received.get(uri)
            missing = missing_capability_of(exc) if relays_missing or task else None
            if missing is not None and not isinstance(sent, types.CallToolResult):
                raise missing from None
            if task and isinstance(exc, JsonRpcError) and not isinstance(sent, types.CallToolResult):
                raise
            return sent if isinstance(sent, types.CallToolResult) and sent.is_error else tool_error_result(str(exc))
    sent = received.get(uri)
    return sent if isinstance(sent, types.CallToolResult) else tool_result(output)


def tool_result(output: BaseModel) -> types.CallToolResult:
    """A successful result: the output model dumped as JSON, as ``structuredContent`` and as text."""
    data = output.model_dump(mode="json", by_alias=True, fallback=repr)
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)
