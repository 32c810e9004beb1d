"""Issue 40, hostile review of the HTTP gateway: a request's head is bounded in size and in time, its body in time,
a write to a client that does not read in time, the connections at once in number, and a connection that never
sends a request does not stay open for good (uvicorn's httptools protocol bounds none of them: 32 MB of headers were
held in memory, a slowloris client held its connection forever, so did a client trickling a body or never reading
its answer). Real gateway, raw sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import pytest
from tests.serve.test_serve import wait_until
from tests.test_listen import _add

from kavalai import FunctionKernel, pythontool
from kavalai.cli._run import EXIT_USAGE
from kavalai.cli._serve import build_serve_parser, serve_command
from kavalai.kernel import MAX_SECONDS
from kavalai.serve import _http_limits
from kavalai.serve._http_limits import HEAD_BYTES, Bounds
from kavalai.serve._transports import serve_http, uvicorn_config

pytestmark = pytest.mark.timeout(120)

#: Seconds a test waits for the server to close a connection (far above the bounds the tests set; never reached).
_WAIT = 20.0


@pythontool
def _big(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


@contextlib.asynccontextmanager
async def _gateway(keep_alive: int = 120, **options: Any) -> AsyncIterator[tuple[str, int]]:
    kernel = FunctionKernel()
    kernel.register_python_tool("add", _add)
    kernel.register_python_tool("big", _big)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(
        serve_http(kernel, port=0, on_ready=ready.set_result, keep_alive=keep_alive, **options)
    )
    try:
        url = await asyncio.wait_for(asyncio.shield(ready), 30)
        host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
        yield host, int(port)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), _WAIT)


async def _answer_to(host: str, port: int, *pieces: bytes) -> bytes:
    """What the server answers, until it closes the connection, to a new connection on which ``pieces`` are sent
    (and nothing more)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for piece in pieces:
            writer.write(piece)
        await writer.drain()
        return await _until_closed(reader)
    finally:
        writer.close()


async def _healthy(host: str, port: int) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return await _until_closed(reader)
    finally:
        writer.close()


async def test_a_head_past_the_limit_is_refused_with_431_before_more_is_held() -> None:
    async with _gateway() as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
            with contextlib.suppress(ConnectionError):  # the server may close before all of it is written
                for _ in range(HEAD_BYTES // len(line) + 10):
                    writer.write(line)
                await writer.drain()
            answer = await _until_closed(reader)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert (await _healthy(host, port)).startswith(b"HTTP/1.1 200 ")  # the gateway serves on
        # A head within the limit is served.
        reader, writer = await asyncio.open_connection(host, port)
        try:
            pad = b"X-Pad: " + b"a" * (HEAD_BYTES // 2) + b"\r\n"
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + pad + b"Connection: close\r\n\r\n")
            assert (await _until_closed(reader)).startswith(b"HTTP/1.1 200 ")
        finally:
            writer.close()


async def test_one_endless_header_line_is_refused_too() -> None:
    """The parser keeps an incomplete header to itself: the reads within a head are counted as well."""
    async with _gateway() as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
            with contextlib.suppress(ConnectionError):
                for _ in range(HEAD_BYTES // 1000 * 4):
                    writer.write(b"a" * 1000)
                    await writer.drain()
            answer = await _until_closed(reader)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


async def test_a_head_sent_too_slowly_is_answered_408_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http_limits, "HEAD_SECONDS", 0.5)
    async with _gateway() as (host, port):
        answer = await _answer_to(host, port, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")  # and no more
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert (await _healthy(host, port)).startswith(b"HTTP/1.1 200 ")


async def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive_time() -> None:
    async with _gateway(keep_alive=1) as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            assert await _until_closed(reader) == b""  # closed by the server, nothing said
        finally:
            writer.close()


@pytest.mark.parametrize(
    ("head", "sent"),
    [
        (b"Content-Length: 100\r\n", b'{"jsonrpc": "2.0"'),  # and never the rest
        (b"Transfer-Encoding: chunked\r\n", b"11\r\n" + b'{"jsonrpc": "2.0"' + b"\r\n"),  # never the last chunk
    ],
    ids=["content-length", "chunked"],
)
async def test_a_body_sent_too_slowly_is_answered_408_and_closed(head: bytes, sent: bytes) -> None:
    async with _gateway(body_timeout=0.5) as (host, port):
        answer = await _answer_to(
            host,
            port,
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + head,
            b"Accept: application/json, text/event-stream\r\n\r\n" + sent,
        )
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert (await _healthy(host, port)).startswith(b"HTTP/1.1 200 ")


async def test_a_body_that_comes_in_pieces_within_its_time_is_served() -> None:
    """The body's clock runs from the head, so a body in several reads is served (and the reads of the next
    request on the connection start no clock of their own when it comes whole)."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    async with _gateway(body_timeout=30) as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n" % port)
            writer.write(b"Accept: application/json, text/event-stream\r\nConnection: close\r\n")
            writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
            await writer.drain()
            await asyncio.sleep(0.2)  # the second piece comes in a read of its own
            writer.write(body[10:])
            await writer.drain()
            answer = await _until_closed(reader)
        finally:
            writer.close()
        # The request reached the MCP endpoint (no session: its answer is the SDK's, not the bound's).
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]


async def _session(host: str, port: int) -> dict[str, str]:
    """The headers of a new MCP session's requests (initialized), over aiohttp."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}
    url = f"http://{host}:{port}/mcp"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, headers=headers, json=_request(1, "initialize", hello)) as answer:
            assert answer.status == 200
            headers["mcp-session-id"] = answer.headers["mcp-session-id"]
            await answer.read()
        async with http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}):
            pass
    return headers


async def _add_on(host: str, port: int, headers: dict[str, str]) -> str:
    """``python_add(2, 3)`` on the session of ``headers``: the answer's text."""
    call = _request(7, "tools/call", {"name": "python_add", "arguments": {"a": 2, "b": 3}})
    url = f"http://{host}:{port}/mcp"
    async with aiohttp.ClientSession() as http, http.post(url, headers=headers, json=call) as answer:
        assert answer.status == 200
        return await answer.text()


def _request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


_ESTABLISHED, _CLOSED = 1, 7


def _tcp_state(sock: socket.socket) -> int:
    """The connection's TCP state (Linux's ``tcpi_state``: :data:`_ESTABLISHED`, :data:`_CLOSED`, ...)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="reads a connection's TCP state: Linux only")
async def test_an_answer_its_client_never_reads_is_reset_after_the_send_timeout_and_others_are_served() -> None:
    """A client asks for a large result (an event stream) and never reads it: the write waits for it
    ``send_timeout`` seconds, then the gateway resets the connection (without the bound it waited for good,
    holding the request's task and the unsent result); another session is served meanwhile and after."""
    async with _gateway(send_timeout=0.5) as (host, port):
        stalled, other = await _session(host, port), await _session(host, port)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            body = json.dumps(_request(2, "tools/call", {"name": "python_big", "arguments": {"size": 8 << 20}}))
            head = "".join(f"{name}: {value}\r\n" for name, value in stalled.items())
            request = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{head}"
            request += f"Content-Length: {len(body)}\r\n\r\n{body}"
            await asyncio.get_running_loop().sock_sendall(sock, request.encode())
            assert '"structuredContent":{"result":5}' in await _add_on(host, port, other)  # served meanwhile
            # Never read: the gateway resets the connection once its write has waited send_timeout.
            await wait_until(lambda: _tcp_state(sock) != _ESTABLISHED, timeout=_WAIT)
            assert _tcp_state(sock) == _CLOSED  # reset (a close would leave it waiting to close, behind the data)
        finally:
            sock.close()
        assert '"structuredContent":{"result":5}' in await _add_on(host, port, other)  # and after


async def test_an_answer_read_slowly_but_steadily_is_not_cut() -> None:
    """The send bound is on a write nobody takes, not on the whole answer: a client taking 64 KiB every 50 ms
    reads a 1 MiB result to its end with a 2 s bound (it takes about a second)."""
    async with _gateway(send_timeout=2) as (host, port):
        headers = await _session(host, port)
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 16)
        transport_sock = writer.get_extra_info("socket")
        transport_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            body = json.dumps(_request(2, "tools/call", {"name": "python_big", "arguments": {"size": 1 << 20}}))
            head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            request = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{head}"
            writer.write(f"{request}Connection: close\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
            await writer.drain()
            received = 0
            while chunk := await asyncio.wait_for(reader.read(1 << 16), _WAIT):
                received += len(chunk)
                await asyncio.sleep(0.05)
        finally:
            writer.close()
        assert received > 1 << 20  # the whole result came


async def _elsewhere(host: str, port: int) -> bytes:
    """The answer to a request for a path that is not served (404 when the request is taken)."""
    return await _answer_to(host, port, b"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")


async def _hold(host: str, port: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections, each in use (one request answered on it), so that the server holds them all."""
    held = [await asyncio.open_connection(host, port) for _ in range(count)]
    for reader, writer in held:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await asyncio.wait_for(reader.readuntil(b"ok"), _WAIT)).startswith(b"HTTP/1.1 200 ")
    return held


async def test_connections_past_the_limit_are_answered_503_and_served_again_below_it() -> None:
    async with _gateway(limit_connections=2) as (host, port):
        held = await _hold(host, port, 2)
        assert (await _elsewhere(host, port)).startswith(b"HTTP/1.1 503 ")  # a third at once
        _, writer = held.pop()
        writer.close()
        with anyio.fail_after(_WAIT):  # served again once the server has seen it go
            while not (await _elsewhere(host, port)).startswith(b"HTTP/1.1 404 "):  # noqa: ASYNC110 - no event
                await anyio.sleep(0.02)
        for _, writer in held:
            writer.close()


@pytest.mark.parametrize(
    ("target", "answer"),
    [
        (b"/healthz", b"ok"),
        (b"/readyz", b"ready"),
        (b"/healthz?from=balancer", b"ok"),
        (b"http://127.0.0.1/readyz", b"ready"),  # the absolute form a proxy may send
    ],
)
async def test_the_probes_are_answered_past_the_connection_limit(target: bytes, answer: bytes) -> None:
    """A replica at its limit is busy, not unhealthy: a balancer's probe on one more connection (or on a held one
    past as many requests in flight) gets the probe's own answer, while any other request there is answered 503."""
    async with _gateway(limit_connections=2) as (host, port):
        held = await _hold(host, port, 2)
        try:
            probe = f"GET {target.decode()} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
            found = await _answer_to(host, port, probe)
            assert found.startswith(b"HTTP/1.1 200 "), found[:200]
            assert found.endswith(b"\r\n\r\n" + answer)
            assert (await _elsewhere(host, port)).startswith(b"HTTP/1.1 503 ")  # the limit holds for the rest
        finally:
            for _, writer in held:
                writer.close()


@pytest.mark.parametrize("option", ["body_timeout", "send_timeout"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "5", None])
def test_a_bounds_seconds_are_the_one_rule(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{option} must be positive"):
        uvicorn_config(_app, **{option: value})
    clamped = uvicorn_config(_app, **{option: float("inf")})
    assert getattr(clamped, "kavalai_bounds") == Bounds(**{option.replace("timeout", "seconds"): MAX_SECONDS})  # noqa: B009


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "5"])
def test_a_connection_limit_that_is_not_a_positive_integer_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="limit_connections must be a positive integer"):
        uvicorn_config(_app, limit_connections=value)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI application never run."""


@pytest.mark.parametrize("given", ["0", "-1"])
def test_a_connection_limit_below_one_is_a_usage_error_on_the_command_line(given: str) -> None:
    args = build_serve_parser().parse_args(["tools.yaml", "--transport", "http", "--limit-connections", given])
    err = io.StringIO()
    assert serve_command(args, stderr=err) == EXIT_USAGE
    assert err.getvalue() == f"kavalai serve: --limit-connections {given}: give 1 or more\n"


async def test_a_whole_head_past_the_limit_in_one_write_is_refused_with_431() -> None:
    """A complete head just past the limit, sent at once (so read whole, its headers counted only at its end)."""
    async with _gateway() as (host, port):
        pad = b"X-Pad: " + b"a" * (HEAD_BYTES - 10) + b"\r\n"
        answer = await _answer_to(host, port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + pad + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
