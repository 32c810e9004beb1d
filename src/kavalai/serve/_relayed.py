"""The MCP handlers of ``kavalai serve`` beside tools: logging, resources, resource templates, subscriptions, prompts
and completion, each relayed to the kernel's MCP servers (:mod:`kavalai.serve._catalog`), and the host sessions
their messages go back to (:mod:`kavalai.serve._hosts`).

They are served only when the kernel has MCP servers; a kernel of Python and REST tools declares tools alone.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError

from kavalai.adapters.mcp import McpAdapter, asking_together
from kavalai.errors import FunctionKernelException
from kavalai.kernel import Kernel
from kavalai.secrets import get_logger
from kavalai.serve._catalog import ServedCatalog
from kavalai.serve._hosts import HostSessions
from kavalai.serve._pages import page
from kavalai.serve._progress import progress_for
from kavalai.serve._rounds import InputRounds, RoundsCall, takes_rounds
from kavalai.serve._tools import ExposedTools

__all__ = ["mcp_adapter", "relayed_handlers"]

logger = get_logger("kavalai.serve")

Connecting = Callable[[], Awaitable[None]]


def mcp_adapter(kernel: Kernel) -> McpAdapter | None:
    """The kernel's ``mcp://`` adapter when it has one with servers registered, else ``None``."""
    if "mcp" not in kernel.schemes:
        return None
    adapter = kernel.adapter("mcp")
    return adapter if isinstance(adapter, McpAdapter) and adapter.server_names() else None


def relayed_handlers(
    adapter: McpAdapter,
    tools: ExposedTools,
    hosts: HostSessions,
    catalog: ServedCatalog,
    connecting: Connecting,
    rounds: InputRounds,
) -> dict[str, Any]:
    """The ``Server`` keyword arguments of the handlers relayed to ``adapter``'s servers. What a server asks while
    it renders a prompt or reads a resource goes to the host that asked, as during a tool call (a 2026-07-28 host:
    in input-required rounds of the gateway's, ``rounds``)."""

    def during(ctx: ServerRequestContext[Any], across: RoundsCall | None) -> Any:
        @contextlib.contextmanager
        def within(server: str) -> Iterator[None]:
            with hosts.calling(server, ctx, across), asking_together() if across else contextlib.nullcontext():
                yield

        return within

    async def relaying(ctx: ServerRequestContext[Any], what: str, params: Any, run: Any) -> Any:
        """``run(during, progress)`` for the host of ``ctx`` (``progress``: where the server's progress goes, when
        the host asked for it); a 2026-07-28 host is asked in rounds of ``what`` (a label)."""

        async def running(across: RoundsCall | None) -> Any:
            with progress_for(ctx, params.meta, across) as progress:
                return await run(during(ctx, across), progress)

        if not takes_rounds(ctx.protocol_version) or not rounds.available:
            return await running(None)
        return await rounds.call(what, params, ctx, running, is_tool=False)

    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        await connecting()
        level = hosts.set_level(ctx, params.level)  # the most verbose level of any host
        for server in catalog.servers():
            try:
                await adapter.set_log_level(server, level)
            except FunctionKernelException as exc:
                logger.info("kavalai serve: logging/setLevel not relayed to %r: %s", server, exc)
        return types.EmptyResult()

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        await connecting()
        hosts.seen(ctx)
        listed = await catalog.list_resources()
        resources, cursor = page(listed.resources, params)
        return types.ListResourcesResult(resources=resources, next_cursor=cursor)

    async def list_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
        await connecting()
        hosts.seen(ctx)
        listed = await catalog.list_resource_templates()
        templates, cursor = page(listed.resource_templates, params)
        return types.ListResourceTemplatesResult(resource_templates=templates, next_cursor=cursor)

    async def read(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        await connecting()
        hosts.seen(ctx)
        uri = str(params.uri)
        result: types.ReadResourceResult | types.InputRequiredResult = await relaying(
            ctx,
            f"resources/read {uri}",
            params,
            lambda within, progress: catalog.read_resource(uri, within, progress),
        )
        return result

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        await connecting()
        hosts.seen(ctx)
        uri = str(params.uri)
        # held before it is asked: a host whose session ends meanwhile (this request cancelled, perhaps after the
        # server subscribed) has it taken back at the server with its others
        added = hosts.subscribe(ctx, uri, subscribe=True)
        try:
            await catalog.subscribe(uri, subscribe=True)
        except Exception:
            if added:  # refused or failed: the host holds nothing new
                hosts.subscribe(ctx, uri, subscribe=False)
            raise
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        await connecting()
        hosts.subscribe(ctx, str(params.uri), subscribe=False)
        if not hosts.held(str(params.uri)):  # another host or a listen stream may still want its updates
            await catalog.subscribe(str(params.uri), subscribe=False)
        return types.EmptyResult()

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        await connecting()
        hosts.seen(ctx)
        listed = await catalog.list_prompts()
        prompts, cursor = page(listed.prompts, params)
        return types.ListPromptsResult(prompts=prompts, next_cursor=cursor)

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        await connecting()
        hosts.seen(ctx)
        result: types.GetPromptResult | types.InputRequiredResult = await relaying(
            ctx,
            f"prompts/get {params.name}",
            params,
            lambda within, progress: catalog.get_prompt(params.name, params.arguments, within, progress),
        )
        return result

    listener = ListenHandler(hosts.bus)

    async def listen(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        await connecting()
        hosts.seen(ctx)
        subscribed: list[str] = []
        try:
            for uri in params.notifications.resource_subscriptions or ():
                try:  # the backend is subscribed for the stream's resources (an unknown one simply never changes)
                    await catalog.subscribe(uri, subscribe=True)
                    subscribed.append(uri)
                except MCPError as exc:
                    logger.info("kavalai serve: no subscription to %s for a listen stream: %s", uri, exc)
            with hosts.listening(subscribed):
                return await listener(ctx, params)
        finally:  # the stream ended: what it alone held is unsubscribed at the servers
            with anyio.CancelScope(shield=True):
                await hosts.release(subscribed)

    async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
        await connecting()
        hosts.seen(ctx)
        context = params.context.arguments if params.context is not None else None
        return await catalog.complete(params.ref, params.argument, context, during(ctx, None))

    return {
        "on_set_logging_level": set_level,
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read,
        "on_subscribe_resource": subscribe,
        "on_unsubscribe_resource": unsubscribe,
        "on_list_prompts": list_prompts,
        "on_get_prompt": get_prompt,
        "on_completion": complete,
        "on_subscriptions_listen": listen,
    }


def served_servers(adapter: McpAdapter, tools: ExposedTools) -> Callable[[], list[str]]:
    """The servers whose catalogues are served: those some tool of which the ``allow``/``deny`` globs may admit
    (the globs matched against ``mcp://<server>.*``)."""

    def servers() -> list[str]:
        return [name for name in adapter.server_names() if _admits_server(tools, name)]

    return servers


def _admits_server(tools: ExposedTools, name: str) -> bool:
    probe = f"mcp://{name}.*"
    if tools.allow is not None and not any(
        fnmatch.fnmatchcase(probe, p) or p.startswith(f"mcp://{name}.") for p in tools.allow
    ):
        return False
    return not any(fnmatch.fnmatchcase(probe, p) for p in tools.deny)
