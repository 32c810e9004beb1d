"""The host sessions of ``kavalai serve``, as the relay of the kernel's MCP servers
(:class:`kavalai.adapters.mcp.McpRelay`): what a server sends reaches the host it concerns.

- A server's request made during a call (sampling, elicitation, roots) goes to the host whose call is in flight on
  that server, on that call's stream (a host of the 2026-07-28 era: as its call's input-required round), at most
  :data:`MAX_ASKING` of a call at once (more are refused); when no
  host's call is, or calls of several hosts are, the server is told so with an error (the gateway cannot tell whom
  to ask), and so is it when the host does not offer what it asks, or has not answered when the call ends (a request
  never outlives the call it was part of). A ``roots/list`` outside any call goes to the one host that can be asked
  on its session (a handshake-era host), and is refused when there are none or several; at most :data:`MAX_ASKING`
  of them are put to it at once (more are refused).
- A log message goes, tagged with the server's name as its logger (``github`` or ``github/<its logger>``), to the
  hosts with a call in flight on that server (on that call's stream), else to every host that asked for log messages
  with ``logging/setLevel``; each host gets only those at or above the level it set.
- A host that reads too slowly (or not at all) holds at most :data:`MAX_UNSENT` notifications unsent: those that
  come for it meanwhile are dropped, counted in a warning (a server flooding log messages or updates costs the
  gateway a bounded amount per host, and never holds up the server's answers).
- A changed list (tools, resources, prompts) is told to every host; a changed resource to the hosts subscribed to it
  (a 2026-07-28 host: on its ``subscriptions/listen`` stream, if that asked for it). A resource stays subscribed to
  at its server while some host or listen stream holds it (:meth:`HostSessions.held`).

A host is known from its first request, by its connection (the SDK's per-client ``Connection``: a handshake-era
host's lasts its session, a 2026-07-28 host's one request). When a handshake-era host's session ends (stdio closed,
the HTTP session deleted or expired, the gateway stopping), the connection's teardown forgets the host and takes
back its subscriptions at the servers, but those another host or a listen stream still holds
(:meth:`HostSessions.release`): a host that leaves without unsubscribing leaves nothing subscribed behind it. The
teardown only starts that release: it runs in the gateway's own task group (:meth:`HostSessions.running`, the
server's lifespan), each ``resources/unsubscribe`` bounded by its server's timeout, and the serving ends once they
have (the SDK's few seconds for a connection's teardown do not cut a slow server short). A connection whose
teardown has run is never known again: a request of it still running is served, but holds nothing (a subscription
it asks for is refused). A host one of whose sends fails is forgotten at once (its subscriptions are taken back when
its session ends).
Served ``stateless`` (``kavalai serve --stateless``), a request has no way back to a handshake-era host: every
server request during its calls is refused at once with an error saying so, which the server's failing tool passes on
to the host (a 2026-07-28 host's call is asked in input-required rounds, which need no session).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

from kavalai.adapters.mcp import INPUT_ROUND, McpChange, McpLogMessage, asking_of
from kavalai.secrets import get_logger
from kavalai.serve._errors import for_host, protocol_error, refusal
from kavalai.serve._rounds import RoundsCall, takes_rounds

__all__ = ["HostSessions", "capabilities_of"]

logger = get_logger("kavalai.serve")

_OUTSIDE_WAIT: Final = 60.0  # seconds a host is given to answer a roots/list asked outside a call
#: Notifications a host may have unsent (it reads too slowly, or not at all) before the gateway drops those that
#: come for it (each is a task holding its message: the bound on what a slow host costs).
MAX_UNSENT: Final = 256
#: Requests of a server one host call may have put to its host at once (sampling, elicitation, roots): a server
#: asking more meanwhile is refused (a host is not flooded with questions, nor the gateway with their waits).
MAX_ASKING: Final = 8
_ORDER: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass
class _Host:
    """One host connection: its latest session (for messages outside a request), what it asked for."""

    session: ServerSession
    rounds_only: bool = False  # a 2026-07-28 host: asked only within its calls' rounds
    level: str | None = None  # set by logging/setLevel
    subscribed: set[str] = field(default_factory=set)  # served URIs
    ending: bool = False  # its connection's teardown will release it (HostSessions._ends_with)
    asked: int = 0  # roots/list put to it outside a call and not answered yet (at most MAX_ASKING)


@dataclass
class _Unsent:
    """The notifications being sent to one host connection now, and those dropped (at :data:`MAX_UNSENT`)."""

    count: int = 0
    dropped: int = 0


@dataclass(eq=False)
class _Call:
    """A host's call in flight on an MCP server, and the requests put to the host for it (ended with the call)."""

    server: str
    ctx: ServerRequestContext[Any]
    host: Connection
    asking: set[anyio.CancelScope] = field(default_factory=set)
    asked: int = 0  # requests put to the host for this call and not answered yet (at most MAX_ASKING)
    rounds: RoundsCall | None = None  # a 2026-07-28 host's call: asked through input-required rounds

    @property
    def now(self) -> ServerRequestContext[Any]:
        """The request the host waits on now (a call across rounds: its latest round's)."""
        return self.rounds.ctx if self.rounds is not None and self.rounds.ctx is not None else self.ctx


#: The host's call whose task this is: a request a server makes within it (a 2026-07-28 server's input-required
#: round, answered in the calling task) is that call's, even while other hosts' calls are in flight on the server.
_IN_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("kavalai_serve_in_call", default=None)


class HostSessions:
    """The host sessions of one served kernel, and the calls they have in flight.

    Args:
        served_uri: a resource's URI as served, from its server's name and own URI (for ``resources/updated``).
        unsubscribe: unsubscribes from a served resource at its server (for what no host holds any more).
        stateless: served without sessions: the servers' requests are refused (no back channel to a host) unless the
            call is a 2026-07-28 host's, asked in input-required rounds.
    """

    def __init__(
        self,
        served_uri: Callable[[str, str], str],
        unsubscribe: Callable[[str], Awaitable[object]],
        *,
        stateless: bool = False,
    ) -> None:
        self._served_uri = served_uri
        self._unsubscribe = unsubscribe
        self._stateless = stateless
        self._hosts: weakref.WeakKeyDictionary[Connection, _Host] = weakref.WeakKeyDictionary()  # gone: dropped
        self._ended: weakref.WeakSet[Connection] = weakref.WeakSet()  # their teardown has run: never known again
        # per connection, known or not (a host forgotten, or whose teardown ran, may still have calls in flight)
        self._unsent: weakref.WeakKeyDictionary[Connection, _Unsent] = weakref.WeakKeyDictionary()
        self._owners: list[TaskGroup] = []  # the servings' task groups the releases of ended hosts run in
        self._calls: list[_Call] = []
        self.bus = InMemorySubscriptionBus()  # the changes for 2026-07-28 hosts' subscriptions/listen streams
        self._listened: collections.Counter[str] = collections.Counter()  # served URIs: listen streams holding each

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A serving of the server (its lifespan): the releases of the hosts whose sessions end within the block run
        in its task group, and the block ends once they have (each is bounded by its server's timeout)."""
        async with anyio.create_task_group() as tasks:
            self._owners.append(tasks)
            try:
                yield
            finally:
                self._owners.remove(tasks)

    def seen(self, ctx: ServerRequestContext[Any]) -> _Host:
        """The host making the request of ``ctx`` (known from now on: a handshake-era host until its session ends,
        a 2026-07-28 host until its request ends; a host whose session has ended is not known again: it gets a
        record of its own, kept nowhere)."""
        connection = connection_of(ctx)
        if connection in self._ended:
            return _Host(ctx.session, ending=True)
        host = self._hosts.get(connection)
        if host is None:
            host = self._hosts[connection] = _Host(ctx.session, rounds_only=takes_rounds(ctx.protocol_version))
            # Released when its connection ends: a session's, or a 2026-07-28 host's one request's (the record holds
            # the session, which holds the connection: the weak key alone never let such a record go).
            self._ends_with(connection, host)
        else:
            host.session = ctx.session
        return host

    @contextlib.contextmanager
    def calling(
        self, server: str | None, ctx: ServerRequestContext[Any], rounds: RoundsCall | None = None
    ) -> Iterator[None]:
        """Within the block, the host of ``ctx`` has a call in flight on the MCP server ``server`` (``rounds``: a
        2026-07-28 host's call, whose questions become its input-required rounds, :mod:`kavalai.serve._rounds`): a
        tool call, a prompt rendered, a resource read, a completion. Every request a 2026-07-28 server is sent within
        it tells the server what this host can be asked (sampling, elicitation, roots), not the gateway's client, so
        the server asks only that: the one place each forwarded request learns it."""
        self.seen(ctx)
        if server is None:
            yield
            return
        call = _Call(server, ctx, connection_of(ctx), rounds=rounds)
        self._calls.append(call)
        token = _IN_CALL.set(call)
        try:
            with asking_of(capabilities_of(ctx)):
                yield
        finally:
            _IN_CALL.reset(token)
            self._calls.remove(call)
            for scope in call.asking:  # a request the host has not answered ends with the call it was part of
                scope.cancel()

    def set_level(self, ctx: ServerRequestContext[Any], level: str) -> str:
        """The host of ``ctx`` asked for log messages from ``level`` on; the level the servers are to log at: the
        most verbose any host asked for (each host is still sent only what it asked for)."""
        self.seen(ctx).level = level
        levels = [host.level for host in list(self._hosts.values()) if host.level is not None]
        return min([level, *levels], key=_ORDER.index)

    @contextlib.contextmanager
    def listening(self, uris: list[str]) -> Iterator[None]:
        """A listen stream holds the served resources ``uris`` within the block."""
        self._listened.update(uris)
        try:
            yield
        finally:
            self._listened.subtract(uris)
            self._listened += collections.Counter()  # drops the URIs no stream holds any more

    def held(self, uri: str) -> bool:
        """Whether a host's subscription or a listen stream holds the served resource ``uri``."""
        return self._listened[uri] > 0 or any(uri in host.subscribed for host in list(self._hosts.values()))

    def subscribe(self, ctx: ServerRequestContext[Any], uri: str, *, subscribe: bool) -> bool:
        """The host of ``ctx`` subscribes to (or unsubscribed from) the served resource ``uri``; whether that
        changed what it holds. A subscription is held from before it is asked at the server: a session ending
        meanwhile takes it back (it may have reached the server)."""
        host = self.seen(ctx)
        if subscribe:
            if self.ended(ctx):  # its teardown ran: nothing would take the subscription back
                raise protocol_error(types.INVALID_REQUEST, "the host's session has ended: it is subscribed to nothing")
            added = uri not in host.subscribed
            host.subscribed.add(uri)
            self._ends_with(connection_of(ctx), host)  # whatever its era, its subscriptions end with its connection
            return added
        removed = uri in host.subscribed
        host.subscribed.discard(uri)
        return removed

    def ended(self, ctx: ServerRequestContext[Any]) -> bool:
        """Whether the session of the host of ``ctx`` has ended (its connection's teardown has run)."""
        return connection_of(ctx) in self._ended

    async def release(self, uris: Iterable[str]) -> None:
        """Unsubscribe from the served resources ``uris`` at their servers, but for those a host or a listen stream
        still holds (a server that fails to is logged: the subscription ends with its connection anyway)."""
        for uri in sorted(set(uris)):
            if self.held(uri):
                continue
            await self._release_one(uri)

    async def _release_one(self, uri: str) -> None:
        try:
            await self._unsubscribe(uri)
        except Exception as exc:  # a server gone meanwhile: nothing left to take back
            logger.info("kavalai serve: could not unsubscribe from %s, held no more: %s", uri, exc)

    async def _released_apart(self, uri: str) -> None:
        """Release ``uri`` in a serving's task group, shielded: a serving cancelled meanwhile (the gateway stopping)
        still sends the unsubscription, which its server's timeout bounds."""
        with anyio.CancelScope(shield=True):
            if not self.held(uri):
                await self._release_one(uri)

    def _ends_with(self, connection: Connection, host: _Host) -> None:
        """When ``connection`` closes (its teardown, run by the SDK however it ends), ``host`` is forgotten and
        what it alone subscribed to is unsubscribed at the servers."""
        if host.ending:
            return
        host.ending = True

        async def ended() -> None:
            self._ended.add(connection)
            if self._hosts.get(connection) is host:
                self._hosts.pop(connection)
            uris, host.subscribed = host.subscribed, set()
            if not self._owners:  # served without a lifespan: within the teardown (the SDK bounds it)
                await self.release(uris)
                return
            for uri in sorted(uris):  # in the serving's task group: the teardown's bound does not cut them short
                self._owners[-1].start_soon(self._released_apart, uri)

        connection.exit_stack.push_async_callback(ended)

    # ----------------------------------------------------------------------------------- McpRelay

    async def log(self, message: McpLogMessage) -> None:
        """Pass a server's log message on (see the module's docstring)."""
        name = message.server if not message.logger else f"{message.server}/{message.logger}"
        params = types.LoggingMessageNotificationParams(level=message.level, data=message.data, logger=name)
        notification = types.LoggingMessageNotification(params=params)
        calls = {call.host: call for call in self._calls if call.server == message.server}
        if calls:
            for call in calls.values():
                host = self._hosts.get(call.host)
                if host is None or _wants(host, message.level):
                    await self._send(call.host, call.now.session, notification, call.now.request_id)
            return
        for key, host in list(self._hosts.items()):
            if host.level is not None and _wants(host, message.level):
                await self._send(key, host.session, notification, None)

    async def changed(self, change: McpChange) -> None:
        """Pass a server's change on (see the module's docstring)."""
        notification: types.ServerNotification
        event: ServerEvent
        if change.kind == "tools":
            notification, event = types.ToolListChangedNotification(), ToolsListChanged()
        elif change.kind == "prompts":
            notification, event = types.PromptListChangedNotification(), PromptsListChanged()
        elif change.kind == "resources":
            notification, event = types.ResourceListChangedNotification(), ResourcesListChanged()
        else:
            uri = self._served_uri(change.server, change.uri or "")
            notification = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=uri))
            event = ResourceUpdated(uri=uri)
        await self.bus.publish(event)  # to the listen streams that asked for it
        for key, host in list(self._hosts.items()):
            if host.rounds_only:  # told on its listen stream, if it opened one
                continue
            if change.kind != "resource" or notification.params.uri in host.subscribed:  # type: ignore[union-attr]
                await self._send(key, host.session, notification, None)

    async def sample(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """Put a server's sampling request to the host whose call it is part of."""
        request = types.CreateMessageRequest(params=params)
        answer: types.CreateMessageResult | types.ErrorData = await self._ask(
            server, "sampling", request, types.CreateMessageResult
        )
        return answer

    async def elicit(self, server: str, params: Any) -> types.ElicitResult | types.ErrorData:
        """Put a server's elicitation to the host whose call it is part of."""
        answer: types.ElicitResult | types.ErrorData = await self._ask(
            server, "elicitation", types.ElicitRequest(params=params), types.ElicitResult
        )
        return answer

    async def list_roots(self, server: str) -> types.ListRootsResult | types.ErrorData:
        """Put a server's ``roots/list`` to the host whose call it is part of."""
        answer: types.ListRootsResult | types.ErrorData = await self._ask(
            server, "roots", types.ListRootsRequest(), types.ListRootsResult
        )
        return answer

    # ----------------------------------------------------------------------------------- helpers

    async def _ask(self, server: str, capability: str, request: Any, result_type: type[Any]) -> Any:
        own = _IN_CALL.get()
        if own is not None and own.server == server and own in self._calls:  # asked within the call's own task
            hosts = {own.host: own}
        else:
            hosts = {call.host: call for call in self._calls if call.server == server}
        if self._stateless and not (len(hosts) == 1 and next(iter(hosts.values())).rounds is not None):
            # a 2026-07-28 host's call is asked in input-required rounds, which need no session; nothing else can be
            return refusal(no_back_channel(server, capability))
        if not hosts and capability == "roots":
            return await self._roots_outside_a_call()
        if len(hosts) != 1:
            why = "no call of a host is in flight on it" if not hosts else f"calls of {len(hosts)} hosts are in flight"
            return refusal(f"kavalai serve cannot tell which host to ask for {capability}: {why}")
        [call] = hosts.values()
        session = call.now.session
        if not session.check_client_capability(types.ClientCapabilities(**{capability: {}})):
            if call.rounds is not None:  # a 2026-07-28 host's request fails saying what it must declare (-32021)
                call.rounds.failed(missing_capability(*_lacking(session, capability)))
            return refusal(f"the host of kavalai serve does not offer {capability}")
        if call.asked >= MAX_ASKING and INPUT_ROUND.get() is None:  # one backend round's are bounded by the adapter
            return refusal(f"kavalai serve puts at most {MAX_ASKING} requests of one call to its host at once")
        call.asked += 1
        try:
            return await self._put(call, session, request, result_type, capability)
        finally:
            call.asked -= 1

    async def _put(
        self, call: _Call, session: ServerSession, request: Any, result_type: type[Any], capability: str
    ) -> Any:
        """Put a server's ``request`` to the host of ``call``: on its session, or as a round of its call."""
        request = for_host(request)  # the secret gate: a backend's text may hold a secret of the gateway's
        if call.rounds is not None:
            return await call.rounds.ask(request, result_type)
        metadata = ServerMessageMetadata(related_request_id=call.now.request_id)
        with anyio.CancelScope() as scope:
            call.asking.add(scope)
            try:
                return await session.send_request(request, result_type, metadata=metadata)
            except MCPError as exc:
                return exc.error
            except Exception as exc:  # the host's connection went away, or its answer was not one
                return refusal(f"the host of kavalai serve did not answer: {type(exc).__name__}: {exc}")
            finally:
                call.asking.discard(scope)
        return refusal(f"the call ended before the host answered the request for {capability}")

    async def _roots_outside_a_call(self) -> Any:
        """A server's ``roots/list`` with no call in flight: asked of the one host that can be asked on its session
        (the backend connections serve every host: with several, the gateway cannot tell whose roots they are)."""
        able = [host for host in list(self._hosts.values()) if not host.rounds_only]
        if len(able) != 1:
            why = f"{len(able)} hosts are connected" if able else "no host that can be asked is connected"
            return refusal(f"kavalai serve cannot tell which host to ask for roots outside a call: {why}")
        [host] = able
        if not host.session.check_client_capability(types.ClientCapabilities(roots={})):
            return refusal("the host of kavalai serve does not offer roots")
        if host.asked >= MAX_ASKING:
            return refusal(f"kavalai serve puts at most {MAX_ASKING} roots requests outside a call to its host at once")
        host.asked += 1
        try:
            return await self._ask_roots(host)
        finally:
            host.asked -= 1

    async def _ask_roots(self, host: _Host) -> Any:
        """Put a ``roots/list`` to ``host`` on its session, bounded by :data:`_OUTSIDE_WAIT`."""
        with anyio.move_on_after(_OUTSIDE_WAIT):
            try:
                answer: types.ListRootsResult = await host.session.send_request(
                    for_host(types.ListRootsRequest()), types.ListRootsResult
                )
            except MCPError as exc:
                return exc.error
            except Exception as exc:  # the host's connection went away, or its answer was not one
                return refusal(f"the host of kavalai serve did not answer: {type(exc).__name__}: {exc}")
            return answer
        return refusal(f"the host of kavalai serve did not answer roots/list within {_OUTSIDE_WAIT:g} s")

    async def _send(self, key: Connection, session: ServerSession, notification: Any, related: Any) -> None:
        """Every notification to a host crosses here: at most :data:`MAX_UNSENT` of one connection unsent at once,
        whether its host is known, forgotten, or its session's teardown has run (a call of it still in flight); and
        the secret gate (:func:`for_host`: a backend's log message holding a secret of the gateway's is masked)."""
        unsent = self._unsent.get(key)
        if unsent is None:
            unsent = self._unsent[key] = _Unsent()
        if unsent.count >= MAX_UNSENT:  # it does not read: what comes for it is dropped
            unsent.dropped += 1
            if unsent.dropped == 1 or unsent.dropped % 1000 == 0:
                logger.warning(
                    "kavalai serve: a host reads too slowly (%d notifications unsent): %d dropped so far",
                    unsent.count,
                    unsent.dropped,
                )
            return
        unsent.count += 1
        try:
            await session.send_notification(for_host(notification), related_request_id=related)
        except Exception as exc:  # a host that has gone is forgotten
            logger.debug("kavalai serve: a host could not be told %s: %s", type(notification).__name__, exc)
            self._hosts.pop(key, None)
        finally:
            unsent.count -= 1


def connection_of(ctx: ServerRequestContext[Any]) -> Connection:
    """The SDK's per-client ``Connection`` of the request ``ctx``: a handshake-era host's lasts its session (stdio,
    or an HTTP session until deleted or expired), a 2026-07-28 host's is made for the request from its envelope.
    Its ``exit_stack`` is where the SDK has per-connection cleanup put (unwound however the connection ends).

    The SDK's request context will carry it as ``ctx.connection`` (its ``Context`` does; the runner still builds the
    older ``ServerRequestContext``, which does not): until then it is the one the request's session speaks on, this
    module's one reach into the SDK's private state (tests/serve/test_host_ends.py fails if it moves)."""
    connection = getattr(ctx, "connection", None)
    if isinstance(connection, Connection):
        return connection
    return ctx.session._connection  # the SDK's private attribute: see the docstring


def capabilities_of(ctx: ServerRequestContext[Any]) -> dict[str, Any]:
    """What the host of ``ctx`` declared it can be asked (its session's, or this request's in the 2026-07-28 era),
    in wire form."""
    declared = ctx.session.client_capabilities
    return {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)


def _wants(host: _Host, level: str) -> bool:
    return host.level is None or _ORDER.index(level) >= _ORDER.index(host.level)


def missing_capability(*capabilities: str) -> MCPError:
    """The error a 2026-07-28 host's request fails with when the server behind it asks for ``capabilities`` the host
    did not declare (``MissingRequiredClientCapabilityError``: its data names every one)."""
    data = types.MissingRequiredClientCapabilityErrorData(
        required_capabilities=types.ClientCapabilities(**{key: {} for key in capabilities})
    ).model_dump(by_alias=True, exclude_none=True)
    named = " and ".join(repr(capability) for capability in capabilities)
    noun = "capability" if len(capabilities) == 1 else "capabilities"
    return protocol_error(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"the request needs the client {noun} {named}, which the host did not declare",
        data,
    )


#: The client capability each request a server may make of the host needs.
_NEEDS: Final = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}


def _lacking(session: ServerSession, capability: str) -> list[str]:
    """The capabilities the host of ``session`` lacks for ``capability`` and for the rest of the server's round it
    was asked in (all of it asked at once: every one is named), sorted."""
    together = INPUT_ROUND.get()
    wanted = {capability, *(_NEEDS[method] for method in (together.methods if together else ()) if method in _NEEDS)}
    return sorted(c for c in wanted if not session.check_client_capability(types.ClientCapabilities(**{c: {}})))


def no_back_channel(server: str, capability: str) -> str:
    """Why a server's request cannot reach the host of a stateless gateway."""
    return (
        f"kavalai serve --stateless has no back channel to the host: the MCP server {server!r} asked for "
        f"{capability}, which only a session can carry (serve without --stateless for tools that ask the host)"
    )
