"""Watching the event streams of a streamable HTTP connection, under the SDK's transport: a handshake-era
session's (HTTP GET) and, at the end, a 2026-07-28 change stream's (a ``subscriptions/listen`` POST).

The server sends what answers no request (a resource update, a list change, a log message) on the session's GET
event stream, which the SDK's client opens after the handshake. When that stream closes gracefully the SDK opens
it again; when it fails (a refused GET, a connection cut mid-stream) it tries twice and then stops for good,
silently: the session still answers calls, but no notification arrives any more. So this transport, between the
SDK's ``httpx2`` client and the network, keeps the stream alive while the server lives:

- a GET for an event stream that fails to open (a connection error, HTTP 5xx, 408 or 429) is sent again with
  :class:`~kavalai.adapters.mcp._healing.Backoff` (0.05 s doubling to 1 s) within the server's ``connect_timeout``,
  so the SDK's loop never counts a failure while the server is only briefly away; a 405 (the server offers no GET
  stream) and every other answer pass at once;
- a stream cut mid-way by a connection error ends as a graceful close does, so the SDK opens it again (with the
  ``Last-Event-ID`` it has) instead of counting a failure;
- each stream that opens is told to ``on_open``, with whether it follows such a failure (then notifications sent
  meanwhile may be lost, so the connection re-lists the catalogue and tells each subscriber to read its resource
  again); a stream resumed with ``Last-Event-ID`` (a server that gives its events ids keeps them, and replays what
  came after that one) follows no such gap: what was sent meanwhile arrives as it is replayed;
- a stream that cannot be opened within the budget is reported to ``on_deaf`` (with why), and the connection
  starts a new session, once: when the new one cannot open it either, the session is kept for its calls and its
  subscriptions are reported lost.

The same transport keeps a 2026-07-28 change stream (a ``subscriptions/listen`` POST) from ending the session: the
SDK's transport ends whole when a POST cannot reach the server, so a listen POST that fails so (the server away
for a moment, restarting) is sent again with the same backoff within ``connect_timeout``; past it the failure
passes as before and the connection ends (then connects again). An answer that is an error passes at once: the
SDK gives it to the listen request, and the change stream opens it again with its own backoff
(:mod:`kavalai.adapters.mcp._listening`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Final, cast

import httpx2
from mcp.client.streamable_http import LAST_EVENT_ID, MCP_SESSION_ID

from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._errors import scrub
from kavalai.adapters.mcp._generation import Generation
from kavalai.adapters.mcp._healing import Backoff, Healing
from kavalai.secrets import get_logger

__all__ = ["Hearing", "StreamWatch", "watched_transport"]

logger = get_logger("kavalai.mcp")

_RETRIED: Final = frozenset({408, 429, 500, 502, 503, 504})  # a server (or its proxy) away for a moment


class Hearing:
    """One connection's event streams across its sessions: what an opened stream and one that cannot be opened
    mean for the connection."""

    def __init__(self, config: McpServer, healing: Healing) -> None:
        self._config = config
        self._healing = healing
        self._deaf = 0  # sessions in a row whose event stream could not be opened again

    def opened(self, gen: Generation, gap: bool) -> None:
        """A session's event stream opened. After a failure (``gap``) what the server sent meanwhile is lost, so
        the lists are compared again and each subscriber is told to read its resource again."""
        self._deaf = 0
        if gap:
            gen.gap = True
            gen.refresh.set()
            self._healing.reread(None, "the event stream carrying its updates was down: updates sent meanwhile lost")

    def deaf(self, gen: Generation, why: str) -> None:
        """A session's event stream could not be opened again within ``connect_timeout``: a new session is made,
        once. When the new one cannot open it either (a proxy that refuses GETs, say), the session is kept for its
        calls, and each subscription is reported lost: its updates cannot arrive."""
        self._deaf += 1
        if self._deaf == 1:
            gen.unheard(why)
        elif self._deaf == 2:
            name = self._config.name
            logger.warning("MCP server %r: %s; its notifications will not arrive", name, scrub(self._config, why))
            for uri in sorted(self._healing.subscribed):
                self._healing.lose(uri, why)


class StreamWatch:
    """One session's GET event streams: whether one failed since the last opened, and whom to tell."""

    def __init__(
        self, server: str, budget: float, on_open: Callable[[bool], None], on_deaf: Callable[[str], None]
    ) -> None:
        self.server = server
        self.budget = budget
        self._on_open = on_open
        self._on_deaf = on_deaf
        self.broken = False  # a stream failed (to open, or mid-way) since one last opened
        self.opened = 0  # event streams opened
        self.retried = 0  # opening attempts sent again
        self.listen_retried = 0  # 2026-07-28 change stream POSTs sent again after a connection error

    def failed(self, why: str) -> None:
        """A stream failed to open, or was cut mid-way."""
        if not self.broken:
            logger.info("MCP server %r: its event stream failed (%s); opening it again", self.server, why)
        self.broken = True

    def open(self, *, resumed: bool) -> None:
        """A stream opened: tell ``on_open`` whether it follows a failure, so that what was sent meanwhile may be
        lost (not when it was ``resumed`` from the last event received: the server replays what followed)."""
        self.opened += 1
        gap, self.broken = self.broken and not resumed, False
        self._on_open(gap)

    def deaf(self, why: str) -> None:
        """No stream could be opened within the budget."""
        self._on_deaf(f"its event stream (HTTP GET) could not be opened again within {self.budget:g} s: {why}")


def watched_transport(watch: StreamWatch, inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
    """``inner`` with the GET event streams of one session kept alive as the module says."""
    return _WatchedTransport(inner, watch)


def _listen_post(request: httpx2.Request) -> bool:
    """Whether ``request`` opens a 2026-07-28 change stream (safe to send again: it only asks to listen)."""
    if request.method != "POST":
        return False
    try:
        content = request.content
        body = json.loads(content) if b"subscriptions/listen" in content else None
    except (httpx2.RequestNotRead, ValueError):  # a streamed body is no listen request's
        return False
    return isinstance(body, dict) and body.get("method") == "subscriptions/listen"


def _event_stream_get(request: httpx2.Request) -> bool:
    return (
        request.method == "GET"
        and MCP_SESSION_ID in request.headers
        and "text/event-stream" in request.headers.get("accept", "")
    )


class _WatchedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if _listen_post(request):
            return await self._listen(request)
        if not _event_stream_get(request):
            return await self._inner.handle_async_request(request)
        watch = self._watch
        backoff = Backoff(watch.budget)
        while True:
            try:
                response = await self._inner.handle_async_request(request)
            except httpx2.TransportError as exc:
                why = f"{type(exc).__name__}: {exc}"
                watch.failed(why)
                if not await backoff.wait():
                    watch.deaf(why)
                    raise
            else:
                if response.status_code not in _RETRIED:
                    if response.is_success:
                        watch.open(resumed=LAST_EVENT_ID in request.headers)
                        response.stream = _Graceful(cast(httpx2.AsyncByteStream, response.stream), watch)
                    return response
                why = f"HTTP {response.status_code}"
                watch.failed(why)
                if not await backoff.wait():
                    watch.deaf(why)
                    return response  # the SDK sees the failure too
                await response.aclose()
            watch.retried += 1

    async def _listen(self, request: httpx2.Request) -> httpx2.Response:
        backoff = Backoff(self._watch.budget)
        while True:
            try:
                return await self._inner.handle_async_request(request)
            except httpx2.TransportError as exc:
                if not await backoff.wait():
                    raise
                self._watch.listen_retried += 1
                logger.info("MCP server %r: its change stream could not be opened (%s); again", self._watch.server, exc)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Graceful(httpx2.AsyncByteStream):
    """An event stream whose connection is cut ends as if the server had closed it."""

    def __init__(self, inner: httpx2.AsyncByteStream, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx2.TransportError as exc:
            self._watch.failed(f"cut mid-way: {type(exc).__name__}")

    async def aclose(self) -> None:
        await self._inner.aclose()
