"""Issue 40, hostile review of the HTTP gateway: a request's head is bounded in size and in time, and a connection
that never sends a request does not stay open for good (uvicorn's httptools protocol bounds none of them: 32 MB of
headers were held in memory, a slowloris client held its connection forever). Real gateway, raw sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from tests.test_listen import _add

from kavalai import FunctionKernel
from kavalai.serve import _http_limits
from kavalai.serve._http_limits import HEAD_BYTES
from kavalai.serve._transports import serve_http

pytestmark = pytest.mark.timeout(120)

#: Seconds a test waits for the server to close a connection (far above the bounds the tests set; never reached).
_WAIT = 20.0


@contextlib.asynccontextmanager
async def _gateway(keep_alive: int = 120) -> AsyncIterator[tuple[str, int]]:
    kernel = FunctionKernel()
    kernel.register_python_tool("add", _add)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_http(kernel, port=0, on_ready=ready.set_result, keep_alive=keep_alive))
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
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")  # and never the rest
            await writer.drain()
            answer = await _until_closed(reader)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert (await _healthy(host, port)).startswith(b"HTTP/1.1 200 ")


async def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive_time() -> None:
    async with _gateway(keep_alive=1) as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            assert await _until_closed(reader) == b""  # closed by the server, nothing said
        finally:
            writer.close()
