"""Healing a connection: what the caller set up on an MCP server is set up again after a reconnect, and what the
reconnect changed (or could not restore) is told to ``on_change``.

A connection is rebuilt whenever its generation ends (a stdio server restarted, an HTTP session the server forgot,
a legacy SSE stream that closed) and, in the 2026-07-28 era, its ``subscriptions/listen`` stream is opened again
when it closes while the server lives (:mod:`kavalai.adapters.mcp._listening`). A connection lost while it holds
subscriptions is connected again in the background by its connection (with :class:`Backoff`, within
``connect_timeout``); one without waits for its next use. Either way the connection's :class:`Healing` is the one
place that

- keeps what the caller set up: the resources subscribed to (the logging level and the roots come from the
  ``McpServer`` and are offered on every session anyway);
- sets the subscriptions up again on a new handshake-era session (``resources/subscribe``; the 2026-07-28 stream
  is opened with the same filter by the change stream), and counts each restoration and each loss;
- compares the catalogue (tools, resources, prompts) listed before and after, and tells ``on_change`` what was
  added, removed or changed, so an agent never calls a tool that is gone under a stale schema;
- hands every such notice to ``on_change`` from one teller task per generation, in order, so a callback that
  calls back into the kernel (to read a resource, to subscribe again) never blocks the connection.

Each subscription set up again is followed by a notice to read the resource again (``McpChange(kind="resource",
reason=...)``): what the server sent while the connection was down is not replayed. The same notice follows a
handshake-era event stream (HTTP GET) opened again after a failure, unless it was resumed with
``Last-Event-ID`` (:mod:`kavalai.adapters.mcp._watch`).
:class:`CrashLoop` bounds the restarts of a server that dies right after each.
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import anyio
import mcp_types
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from kavalai.adapters.mcp._catalog import McpChange
from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._errors import scrub
from kavalai.adapters.mcp._listing import all_pages
from kavalai.errors import ServerConnectionError
from kavalai.kernel import required_seconds
from kavalai.secrets import get_logger

__all__ = ["Backoff", "Catalogue", "CrashLoop", "Healing", "hand_over", "tool_prints"]

logger = get_logger("kavalai.mcp")

_MAX_PENDING: Final = 10_000  # notices waiting for on_change; past this a slow callback loses the newest
_MAX_PAGES: Final = 100  # a resources/prompts listing that never ends cannot hold a reconnect's comparison
_REREAD: Final = "subscribed again after a reconnect: updates sent while it was down are not replayed"
_REGAINED: Final = "subscribed again after a reconnect, having been lost: updates sent meanwhile are not replayed"


@dataclass(frozen=True, slots=True)
class Catalogue:
    """What a server listed, as name (or URI) -> fingerprint; ``None``: not listed (no ``on_change`` to tell, or
    the server offers none)."""

    tools: Mapping[str, str]
    resources: Mapping[str, str] | None = None
    prompts: Mapping[str, str] | None = None


def _print(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str)


def tool_prints(tools: Sequence[mcp_types.Tool]) -> dict[str, str]:
    """Each tool's fingerprint: its schemas and description (what the next description shows)."""
    return {t.name: _print(t.input_schema, t.output_schema, t.description) for t in tools}


def _diff(server: str, kind: Literal["tools", "resources", "prompts"], old: Any, new: Any) -> McpChange | None:
    if old is None or new is None:
        return None
    added = tuple(sorted(new.keys() - old.keys()))
    removed = tuple(sorted(old.keys() - new.keys()))
    changed = tuple(sorted(k for k in old.keys() & new.keys() if old[k] != new[k]))
    if not (added or removed or changed):
        return None
    return McpChange(server=server, kind=kind, added=added, removed=removed, changed=changed)


async def _pages(list_page: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    return await all_pages(list_page, field, f"{field}/list", max_pages=_MAX_PAGES)


class Backoff:
    """Waits between attempts to re-open something: ``first`` seconds, doubling up to ``cap``, for at most
    ``budget`` seconds since the first failure in a row (then :meth:`wait` says to give up)."""

    def __init__(self, budget: float, first: float = 0.05, cap: float = 1.0) -> None:
        self._budget, self._first, self._cap = budget, first, cap
        self._since: float | None = None
        self._delay = first
        self.attempts = 0  # waits since the last success

    @property
    def budget(self) -> float:
        """How long it keeps trying after the first failure in a row, in seconds."""
        return self._budget

    def reset(self) -> None:
        """It worked: the next failure starts a new budget."""
        self._since, self._delay, self.attempts = None, self._first, 0

    async def wait(self) -> bool:
        """Wait before the next attempt; ``False`` (at once) when the budget is spent."""
        now = anyio.current_time()
        if self._since is None:
            self._since = now
        left = self._since + self._budget - now
        if left <= 0:
            return False
        await anyio.sleep(min(self._delay, left))
        self._delay = min(self._delay * 2, self._cap)
        self.attempts += 1
        return True


class CrashLoop:
    """A server lost ``limit`` times within ``window`` seconds after connecting (one that dies right after every
    restart) is in a crash loop: it is not started again until the oldest of those losses is ``window`` old
    (``McpServer(crash_limit=..., crash_window=...)``)."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit, self.window = limit, window
        self._losses: deque[float] = deque(maxlen=limit)

    def lost(self) -> None:
        """A connection that had connected was lost (not closed by the kernel)."""
        self._losses.append(anyio.current_time())

    def refusal(self, server: str) -> str | None:
        """Why ``server`` may not be started again now, or ``None``."""
        if len(self._losses) < self.limit:
            return None
        left = self._losses[0] + self.window - anyio.current_time()
        if left <= 0:
            return None
        return (
            f"MCP server {server!r} was lost {self.limit} times within {self.window:g} s, each time after "
            f"connecting (a crash loop: crash_limit={self.limit}, crash_window={self.window:g}); it is not started "
            f"again for {left:.0f} s"
        )

    def reset(self) -> None:
        """The kernel closed the connection: start counting again."""
        self._losses.clear()


class Healing:
    """One connection's memory of what the caller set up, across its generations (see the module docstring)."""

    def __init__(self, config: McpServer) -> None:
        self._config = config
        self.subscribed: set[str] = set()  # resources subscribed to (2026-07-28: the listen stream's filter)
        self.dropped: set[str] = set()  # subscriptions reported lost: asked for again at each reconnect
        self.established = False  # a generation has connected since the kernel last closed the connection
        self.log_level: mcp_types.LoggingLevel | None = None  # the last one asked for at run time (set_log_level)
        self.restored = 0
        self.lost = 0
        self.catalogue: Catalogue | None = None
        self._in_force: set[str] = set()  # 2026-07-28: what the last change stream honored
        self._pending: list[McpChange] = []
        self._wake: anyio.Event | None = None  # the teller's, while one runs (made on its event loop)

    @property
    def server(self) -> str:
        """The server's name."""
        return self._config.name

    def forget(self) -> None:
        """The kernel closed the connection: nothing set up on it is restored at the next connect."""
        self.subscribed.clear()
        self.dropped.clear()
        self.log_level = None
        self._in_force.clear()
        self.established = False
        self.catalogue = None
        self._pending.clear()

    # ------------------------------------------------------------------------------------------- telling

    def tell(self, change: McpChange) -> None:
        """Queue ``change`` for ``on_change`` (delivered in order by the generation's :meth:`teller`)."""
        if self._config.on_change is None:
            return
        if len(self._pending) >= _MAX_PENDING:
            logger.warning("MCP server %r: on_change is %d notices behind; dropping one", self.server, _MAX_PENDING)
            return
        self._pending.append(change)
        if self._wake is not None:
            self._wake.set()

    @property
    def waiting(self) -> bool:
        """Whether a lost connection leaves something to restore or to tell: subscriptions, or notices."""
        return bool(self.subscribed or self._pending)

    async def flush(self) -> None:
        """Hand the queued notices to ``on_change`` now (no generation's teller is running)."""
        while self._pending:
            await hand_over(self._config.on_change, self._pending.pop(0), "on_change callback", self.server)

    async def teller(self) -> None:
        """Hand the queued notices to ``on_change``, one at a time, until the generation ends."""
        while True:
            wake = self._wake = anyio.Event()
            await self.flush()
            await wake.wait()

    def reread(self, uri: str | None, reason: str) -> None:
        """Tell the subscriber of ``uri`` (``None``: of every subscription) to read it again: updates the server
        sent while it could not reach us (``reason``) are not replayed."""
        for each in sorted(self.subscribed) if uri is None else (uri,):
            self.tell(McpChange(server=self.server, kind="resource", uri=each, reason=reason))

    def lose(self, uri: str | None, reason: str) -> None:
        """``uri`` (a subscription; ``None``: the logging level) could not be set up again: count it, drop it, tell
        ``on_change``."""
        if uri is not None:
            self.subscribed.discard(uri)
            self.dropped.add(uri)
        self.lost += 1
        reason = scrub(self._config, reason)
        logger.warning("MCP server %r: %s could not be restored: %s", self.server, uri or "the logging level", reason)
        self.tell(McpChange(server=self.server, kind="lost", uri=uri, reason=reason))

    def regain(self, uri: str, reason: str) -> None:
        """``uri``, a subscription reported lost, is in force again: count it restored, tell ``on_change``
        (``kind="restored"``: read it again, updates sent meanwhile are not replayed)."""
        self.dropped.discard(uri)
        self.subscribed.add(uri)
        self.restored += 1
        logger.info("MCP server %r: %s restored: %s", self.server, uri, reason)
        self.tell(McpChange(server=self.server, kind="restored", uri=uri, reason=reason))

    # ----------------------------------------------------------------------------------------- restoring

    async def resubscribe(self, session: ClientSession, timeout: float) -> None:
        """Handshake era, on a new session: ``resources/subscribe`` to each resource subscribed to before, and to
        each one reported lost (a refusal of one of those is not reported again), each within ``timeout`` seconds
        (the one rule, ``kavalai.kernel.limit_seconds``)."""
        seconds = required_seconds(timeout, what="timeout")
        for uri in sorted(self.subscribed | self.dropped):
            again = uri in self.dropped
            request = mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri))
            try:
                with anyio.fail_after(seconds):
                    await session.send_request(request, mcp_types.EmptyResult)
            except MCPError as exc:
                if exc.code == mcp_types.CONNECTION_CLOSED:
                    raise  # the new session is gone too: the generation fails, and the next one tries again
                if not again:
                    self.lose(uri, f"the server refused resources/subscribe: {exc}")
            except TimeoutError:
                if not again:
                    self.lose(uri, f"the server did not answer resources/subscribe within {seconds:g} s")
            else:
                if again:
                    self.regain(uri, _REGAINED)
                else:
                    self.restored += 1
                    self.reread(uri, _REREAD)

    async def roots_changed(self, session: ClientSession) -> None:
        """Handshake era, on a new session after a reconnect of a client that offers roots: tell the server that
        they may have changed (``notifications/roots/list_changed``), so that one that kept them per client asks
        ``roots/list`` again. A notification: nothing answers it, so nothing is counted."""
        try:
            await session.send_notification(mcp_types.RootsListChangedNotification())
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise
            logger.info("MCP server %r: notifications/roots/list_changed failed: %s", self.server, exc)

    def log_level_set(self, refusal: str | None) -> None:
        """Handshake era, on a new session after a reconnect: the configured logging level was asked for again
        (``refusal``: why the server refused it)."""
        if refusal is None:
            self.restored += 1
        else:
            level = self.log_level or self._config.log_level
            self.lose(None, f"the server refused logging/setLevel {level!r}: {refusal}")

    def listened(self, asked: Sequence[str], honored: Sequence[str], *, restoring: bool) -> None:
        """2026-07-28: a change stream opened, asking for ``asked`` and honoring ``honored``. What it kept counts as
        restored when the stream stands in for one that closed; what it dropped is lost if it was in force before
        (a new subscription it drops is only forgotten: ``subscribe_resource`` raises)."""
        kept = set(honored)
        for uri in asked:
            if uri in self.dropped:  # reported lost before: restored if honored now, else still lost
                if uri in kept:
                    self.regain(uri, _REGAINED)
            elif uri in kept:
                if restoring:
                    self.restored += 1
                    self.reread(uri, _REREAD)
            elif restoring or uri in self._in_force:
                self.lose(uri, "the server's subscriptions/listen stream did not honor it")
            else:
                self.subscribed.discard(uri)
        self._in_force = kept

    async def relist(self, client: Client, tools: Mapping[str, str], *, tell: bool, within: float) -> None:
        """Record the catalogue now listed and, when ``tell`` (after a reconnect or a change stream opened again),
        tell ``on_change`` how it differs from the one before. Resources and prompts are listed only for an
        ``on_change`` to tell, in at most ``within`` seconds (else they are not compared), and not again for a
        server's own notice that its tools changed."""
        old = self.catalogue
        if not tell and old is not None:
            self.catalogue = replace(old, tools=tools)
            return
        resources = prompts = None
        if self._config.on_change is not None:
            with anyio.move_on_after(within):
                resources, prompts = await self._extras(client)
        new = Catalogue(tools=tools, resources=resources, prompts=prompts)
        self.catalogue = new
        if not tell or old is None:
            return
        for kind, before, after in (
            ("tools", old.tools, new.tools),
            ("resources", old.resources, new.resources),
            ("prompts", old.prompts, new.prompts),
        ):
            change = _diff(self.server, kind, before, after)  # type: ignore[arg-type]
            if change is not None:
                self.tell(change)

    async def _extras(self, client: Client) -> tuple[dict[str, str] | None, dict[str, str] | None]:
        capabilities = client.session.server_capabilities
        resources = prompts = None
        try:
            if capabilities is not None and capabilities.resources is not None:
                found = await _pages(lambda c: client.list_resources(cursor=c, cache_mode="refresh"), "resources")
                resources = {str(r.uri): _print(r.name, r.description, r.mime_type) for r in found}
            if capabilities is not None and capabilities.prompts is not None:
                found = await _pages(lambda c: client.list_prompts(cursor=c, cache_mode="refresh"), "prompts")
                prompts = {p.name: _print(p.description, [a.model_dump() for a in p.arguments or ()]) for p in found}
        except (MCPError, ServerConnectionError) as exc:  # not compared; the connection reports real failures
            logger.info("MCP server %r: listing its catalogue failed: %s", self.server, scrub(self._config, exc))
        return resources, prompts


async def hand_over(callback: Any, value: Any, what: str, server: str) -> None:
    """Call the application's ``callback`` (sync or async) with ``value``; its failure is logged, never raised
    into the connection."""
    try:
        outcome = callback(value)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        logger.warning("The %s of MCP server %r failed", what, server, exc_info=True)
