"""The shared part of the fake provider APIs: a Starlette app that records requests and plays queued replies.

A reply is either a JSON body with a status, or a list of server-sent events streamed as ``text/event-stream``.
Run it with :func:`tests.servers.uvicorn_server.serve`; the fake lives in the test's thread and uvicorn's, so the
queue and the request log are only appended to and popped from (both atomic on a deque/list).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["ConnectionCut", "FakeProvider", "RecordedRequest", "SSEvent"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class SSEvent:
    """One server-sent event: ``data`` is JSON-encoded unless it is a string; ``event`` is the optional name."""

    data: Any
    event: str | None = None

    def encode(self) -> bytes:
        data = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {data}\n\n".encode()


@dataclass
class _Reply:
    status: int = 200
    body: Any = None
    events: Sequence[SSEvent] | None = None
    raw: bytes | None = None
    cut: bool = False


@dataclass
class FakeProvider:
    """A fake HTTP API answering POSTs to ``path`` from a queue of replies.

    Attributes:
        requests: every request received, oldest first.
    """

    path: str
    requests: list[RecordedRequest] = field(default_factory=list)
    _replies: deque[_Reply] = field(default_factory=deque)

    def reply_json(self, body: Any, *, status: int = 200) -> None:
        """Queue a JSON reply."""
        self._replies.append(_Reply(status=status, body=body))

    def reply_stream(self, events: Sequence[SSEvent], *, cut: bool = False) -> None:
        """Queue a streamed reply; with ``cut`` the connection drops after the events, before the stream ends."""
        self._replies.append(_Reply(events=list(events), cut=cut))

    def reply_raw(self, body: bytes, *, status: int = 200, content_type: str = "application/json") -> None:
        """Queue a reply of raw bytes (for bodies that are not valid JSON)."""
        self._replies.append(_Reply(status=status, raw=body, body=content_type))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests received."""
        return [request.body for request in self.requests]

    def app(self) -> Starlette:
        """The ASGI application."""
        return Starlette(routes=[Route(self.path, self._handle, methods=["POST"])])

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(RecordedRequest(request.url.path, dict(request.headers), body))
        if not self._replies:
            return JSONResponse({"error": {"message": "the fake has no reply queued"}}, status_code=500)
        reply = self._replies.popleft()
        if reply.raw is not None:
            return Response(reply.raw, status_code=reply.status, media_type=reply.body)
        if reply.events is None:
            return JSONResponse(reply.body, status_code=reply.status)
        return StreamingResponse(_stream(reply.events, reply.cut), media_type="text/event-stream")


class ConnectionCut(Exception):
    """Raised inside the fake's stream to drop the connection mid-response."""


async def _stream(events: Sequence[SSEvent], cut: bool) -> AsyncIterator[bytes]:
    for event in events:
        yield event.encode()
    if cut:
        raise ConnectionCut("the fake drops the connection")
