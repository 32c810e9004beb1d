"""The tools of :mod:`tests.servers.mcp_tools` served over HTTP: streamable HTTP at ``/mcp``, legacy SSE at ``/sse``.

Serve them on a free 127.0.0.1 port with :func:`tests.servers.uvicorn_server.serve`::

    with serve(streamable_http_app()) as base_url:
        McpServer(name="web", url=f"{base_url}/mcp")
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage
from starlette.applications import Starlette

from tests.servers.mcp_tools import build_server


def streamable_http_app() -> Starlette:
    """A streamable HTTP MCP endpoint at ``/mcp``."""
    return build_server("web").streamable_http_app()


def sse_app() -> Starlette:
    """A legacy SSE MCP endpoint: events at ``/sse``, messages posted to ``/messages/``."""
    return build_server("legacy").sse_app()


class SessionForgettingApp:
    """An ASGI app in front of another that can forget the MCP sessions it has seen, as a restarted server (or one
    whose sessions timed out) does: requests that carry a forgotten ``mcp-session-id`` get HTTP 404 (or the
    ``status`` and ``message`` given, such as the TypeScript SDK examples' 400 "No valid session ID provided")."""

    def __init__(self, app: Any, status: int = 404, message: str = "Session not found") -> None:
        self.app = app
        self.status = status
        self.message = message
        self.seen: set[bytes] = set()
        self.forgotten: set[bytes] = set()

    def forget(self) -> None:
        """Forget every session seen so far."""
        self.forgotten |= self.seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer 404 for a forgotten session; pass everything else on."""
        session = dict(scope.get("headers", [])).get(b"mcp-session-id") if scope["type"] == "http" else None
        if session in self.forgotten:
            error = {"code": -32600, "message": self.message}
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": self.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if session is not None:
            self.seen.add(session)
        await self.app(scope, receive, send)


class _Cut(Exception):
    """Ends an event stream abruptly (uvicorn then closes the connection mid-body)."""


class EventStreamSpoiler:
    """An ASGI app in front of a streamable HTTP MCP endpoint that spoils its sessions' GET event streams while the
    server lives: :meth:`cut` ends the open ones abruptly (the connection closes mid-body), and :meth:`refuse`
    answers the next ``count`` GETs with HTTP 503. It counts the streams it let open and the GETs it refused."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.opened = 0
        self.refused = 0
        self._refusals = 0
        self._cuts = 0

    def refuse(self, count: int) -> None:
        """Answer the next ``count`` event-stream GETs with 503 (0: stop refusing)."""
        self._refusals = count

    def cut(self) -> None:
        """End every event stream open now, abruptly."""
        self._cuts += 1

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Spoil event-stream GETs as told; pass everything else on."""
        headers = dict(scope.get("headers", [])) if scope["type"] == "http" else {}
        if scope["type"] != "http" or scope["method"] != "GET" or b"mcp-session-id" not in headers:
            await self.app(scope, receive, send)
            return
        if self._refusals > 0:
            self._refusals -= 1
            self.refused += 1
            await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"busy"})
            return
        self.opened += 1
        cuts = self._cuts

        async def watch() -> None:
            while self._cuts == cuts:  # noqa: ASYNC110 - the test's thread sets it; no event crosses threads
                await anyio.sleep(0.02)
            raise _Cut

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await self.app(scope, receive, send)
            tg.cancel_scope.cancel()


class MemoryEventStore(EventStore):
    """The SDK server's resumability, in memory: every event of a session's streams kept with an id, and what came
    after an id replayed to a stream resumed with it (``Last-Event-ID``). Counts the replays and the events
    replayed."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, JSONRPCMessage | None]] = []  # (event id, stream id, message)
        self.replays = 0
        self.replayed = 0

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Keep one event; its id is its place."""
        event_id = str(len(self._events) + 1)
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        """Send the events of ``last_event_id``'s stream that came after it; that stream's id."""
        found = [i for i, event in enumerate(self._events) if event[0] == last_event_id]
        if not found:
            return None
        stream_id = self._events[found[0]][1]
        self.replays += 1
        for event_id, stream, message in self._events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                self.replayed += 1
                await send_callback(EventMessage(message, event_id))
        return stream_id
