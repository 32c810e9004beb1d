"""A small bridge from streamable HTTP to an MCP server over stdio, for the tests that run the
conformance suite (``@modelcontextprotocol/conformance``: its server scenarios take only ``--url``) against
``kavalai serve`` over stdio: :func:`stdio_bridge`.

The bridge starts the stdio server once an era and shares its one connection among the HTTP sessions the suite opens
(one a scenario), so a run costs a server start an era, not one a scenario: the first ``initialize`` goes to the
handshake-era server, later ones are answered with its result (a new ``mcp-session-id`` each); requests of no
session (the 2026-07-28 era's) go to a server of their own, started with the ``server/discover`` such a host begins
with, since a stdio connection serves one era. It adds nothing of its own to what the server says, and takes
nothing out:

- a request (``POST``) goes to the server under an id of the bridge's (the HTTP sessions' ids may coincide), and is
  answered on an event stream carrying what the server sends for it: its progress (by the request's progress
  token), the requests and notifications the server sends while it is the newest request in flight (over stdio they
  name no request: a server's sampling, elicitation, roots and log messages during a call), then its response under
  the client's own id;
- a notification or an answer of the client (``POST``) goes to the server as it is (a cancellation with its request's
  id in the bridge's form), answered ``202``;
- what the server sends while no request is in flight goes to the newest HTTP session's ``GET`` streams (kept for it
  until one is open);
- ``DELETE`` ends an HTTP session (the server's session, shared, stays).

What the HTTP transport alone decides (DNS rebinding protection, several ``GET`` streams of one session) is the
bridge's, not the server's: the tests leave those scenarios to the HTTP runs.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
from aiohttp import web
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["stdio_bridge"]

_LINE: Final = 64 * 1024 * 1024  # bytes a message of the server may take
_BACKLOG: Final = 1024  # messages one HTTP session holds for its GET streams
_MODERN: Final = "2026-07-28"
_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
_DISCOVER: Final = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "server/discover",
    "params": {
        "_meta": {
            _VERSION_KEY: _MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "stdio-bridge", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}


@dataclass(eq=False)
class _Session:
    """One HTTP session: what the server sends it outside a request, for its GET streams."""

    send: MemoryObjectSendStream[dict[str, Any]]
    receive: MemoryObjectReceiveStream[dict[str, Any]]


@dataclass(eq=False)
class _Pending:
    """A request of an HTTP session sent to the server and not answered yet."""

    session: _Session | None  # None: the server's initialize, sent for every HTTP session
    client_id: Any
    token: Any
    listens: bool  # a 2026-07-28 subscriptions/listen: its stream carries the changes asked for, until it ends
    send: MemoryObjectSendStream[dict[str, Any]]
    receive: MemoryObjectReceiveStream[dict[str, Any]]


@dataclass
class _Bridge:
    process: Process
    sessions: dict[str, _Session] = field(default_factory=dict)
    pending: dict[int, _Pending] = field(default_factory=dict)  # by the bridge's request id
    initialized: Any = None  # the server's initialize result, once it answered
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        async with self.lock:
            await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def read(self) -> None:
        """Every message of the server, to where it belongs."""
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        ended = (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError)
        with contextlib.suppress(*ended):  # the server has stopped
            while True:
                line = await lines.receive_until(b"\n", _LINE)
                if line.strip():
                    self._route(json.loads(line))

    def _route(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # a response to one of the bridge's requests
            ours = message.get("id")
            if ours is None:  # an error about a message the server could not read: the newest request's
                ours = max((key for key, pending in self.pending.items() if not pending.listens), default=None)
            pending = self.pending.pop(ours, None)
            if pending is not None:
                pending.send.send_nowait({**message, "id": pending.client_id})
                pending.send.close()
            return
        params = message.get("params") or {}
        if message["method"] == "notifications/progress":
            for pending in self.pending.values():
                if pending.token is not None and pending.token == params.get("progressToken"):
                    pending.send.send_nowait(message)
                    return
            return  # the request it was for has ended
        if message["method"] == "notifications/cancelled" and params.get("requestId") in self.pending:
            self._ended(params["requestId"], message)  # over stdio: the end of a subscriptions/listen stream
            return
        changes = message["method"].endswith(("/list_changed", "/updated"))
        listening = [pending for pending in self.pending.values() if pending.listens]
        calls = [ours for ours, pending in self.pending.items() if not pending.listens]
        if changes and listening:
            for pending in listening:
                pending.send.send_nowait(message)
        elif calls:
            self.pending[max(calls)].send.send_nowait(message)
        elif self.sessions:
            newest_session = list(self.sessions.values())[-1]
            with contextlib.suppress(anyio.WouldBlock):  # a session that never reads: dropped past its backlog
                newest_session.send.send_nowait(message)

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """The server's answer to ``message``, a request of the bridge's own (not of an HTTP session)."""
        ours = next(self.ids)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](16)
        self.pending[ours] = _Pending(None, message["id"], None, False, send, receive)
        await self.write({**message, "id": ours})
        async with receive:
            return await receive.receive()

    def _ended(self, ours: int, message: dict[str, Any]) -> None:
        pending = self.pending.pop(ours)
        params = {**message["params"], "requestId": pending.client_id}
        pending.send.send_nowait({**message, "params": params})
        pending.send.close()

    async def post(self, request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        session = self.sessions.get(request.headers.get("mcp-session-id", ""))
        if message.get("method") == "initialize":
            return await self._initialize(message)
        if "id" not in message or "method" not in message:  # a notification, or an answer to the server
            if message.get("method") == "notifications/cancelled":
                message = self._cancelled(message)
            if message.get("method") != "notifications/initialized" and message is not None:
                await self.write(message)
            return web.Response(status=202)
        return await self._request(request, session, message)

    def _cancelled(self, message: dict[str, Any]) -> Any:
        params = message.get("params") or {}
        for ours, pending in self.pending.items():
            if pending.client_id == params.get("requestId"):
                return {**message, "params": {**params, "requestId": ours}}
        return None

    async def _initialize(self, message: dict[str, Any]) -> web.Response:
        if self.initialized is None:
            self.initialized = (await self.ask(message)).get("result")
            await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send_gets, receive_gets = anyio.create_memory_object_stream[dict[str, Any]](_BACKLOG)
        session_id = uuid.uuid4().hex
        self.sessions[session_id] = _Session(send_gets, receive_gets)
        body = {"jsonrpc": "2.0", "id": message["id"], "result": self.initialized}
        return web.json_response(body, headers={"mcp-session-id": session_id})

    async def _request(
        self, request: web.Request, session: _Session | None, message: dict[str, Any]
    ) -> web.StreamResponse:
        ours = next(self.ids)
        token = ((message.get("params") or {}).get("_meta") or {}).get("progressToken")
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](_BACKLOG)
        listens = message.get("method") == "subscriptions/listen"
        self.pending[ours] = _Pending(session, message["id"], token, listens, send, receive)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        await self.write({**message, "id": ours})
        try:
            async with receive:
                async for sent in receive:
                    await response.write(f"event: message\ndata: {json.dumps(sent)}\n\n".encode())
        finally:
            self.pending.pop(ours, None)
        return response

    async def get(self, request: web.Request) -> web.StreamResponse:
        session = self.sessions.get(request.headers.get("mcp-session-id", ""))
        if session is None:
            return web.Response(status=404)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        with session.receive.clone() as messages:  # each GET stream a reader of the session's messages
            async for sent in messages:
                await response.write(f"event: message\ndata: {json.dumps(sent)}\n\n".encode())
        return response

    async def delete(self, request: web.Request) -> web.Response:
        session = self.sessions.pop(request.headers.get("mcp-session-id", ""), None)
        if session is not None:
            session.send.close()
            session.receive.close()
        return web.Response(status=200 if session is not None else 404)


class _Front:
    """The HTTP side: a request of a session (``initialize``, or one naming its ``mcp-session-id``) goes to the
    server process of the handshake era, one of the 2026-07-28 era (its ``MCP-Protocol-Version`` header or its
    ``_meta``) or of none to the process of that era (a stdio connection serves
    one era: a host of each starts its own), each started at its era's first request."""

    def __init__(self, command: Sequence[str], cwd: Path, errlog: Any, group: TaskGroup) -> None:
        self._command, self._cwd, self._errlog, self._group = list(command), cwd, errlog, group
        self._started: dict[bool, _Bridge] = {}
        self._lock = anyio.Lock()

    async def _era(self, legacy: bool) -> _Bridge:
        async with self._lock:
            if legacy not in self._started:
                process = await anyio.open_process(
                    self._command, cwd=self._cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errlog
                )
                self._started[legacy] = bridge = _Bridge(process)
                self._group.start_soon(bridge.read)
                if not legacy:  # as a host of that era begins: the connection is of the 2026-07-28 era from now on
                    await bridge.ask(_DISCOVER)
            return self._started[legacy]

    async def post(self, request: web.Request) -> web.StreamResponse:
        message = await request.json()
        meta = (message.get("params") or {}).get("_meta") or {}
        modern = request.headers.get("mcp-protocol-version") == _MODERN or _VERSION_KEY in meta
        legacy = not modern and ("mcp-session-id" in request.headers or message.get("method") == "initialize")
        return await (await self._era(legacy)).post(request, message)

    async def get(self, request: web.Request) -> web.StreamResponse:
        return await (await self._era(True)).get(request)

    async def delete(self, request: web.Request) -> web.Response:
        return await (await self._era(True)).delete(request)

    async def close(self) -> None:
        """Every session's streams closed, every process's stdin closed; each waited for (killed past 10 s)."""
        for bridge in self._started.values():
            for session in bridge.sessions.values():
                session.send.close()
                session.receive.close()
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                if bridge.process.stdin is not None:
                    await bridge.process.stdin.aclose()
            with anyio.move_on_after(10):
                await bridge.process.wait()
            if bridge.process.returncode is None:
                bridge.process.kill()
                await bridge.process.wait()


@contextlib.asynccontextmanager
async def stdio_bridge(command: Sequence[str], cwd: Path, errlog: Path) -> AsyncIterator[str]:
    """``command`` (an MCP server over stdio) served at the yielded URL over streamable HTTP, as the module says;
    the servers' stderr goes to ``errlog``. The servers are stopped (stdin closed, then killed) at the end."""
    with errlog.open("wb") as log:
        async with anyio.create_task_group() as group:
            front = _Front(command, cwd, log, group)
            app = web.Application(client_max_size=_LINE)
            app.router.add_post("/mcp", front.post)
            app.router.add_get("/mcp", front.get)
            app.router.add_delete("/mcp", front.delete)
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
            await runner.setup()
            try:
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                host, port = runner.addresses[0][:2]
                yield f"http://{host}:{port}/mcp"
            finally:
                await runner.cleanup()
                await front.close()
                group.cancel_scope.cancel()
