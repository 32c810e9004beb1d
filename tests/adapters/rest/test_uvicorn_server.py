"""The shared test helper that serves an ASGI app with uvicorn in a thread."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from tests.servers.uvicorn_server import ServerThread, serve


async def _hello(request: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_serve_yields_a_live_loopback_url_and_frees_the_port() -> None:
    with serve(Starlette(routes=[Route("/", _hello)])) as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{url}/", timeout=5) as response:
            assert response.read() == b"hello"
        port = int(url.rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError):  # nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_failing_startup_raises_instead_of_hanging() -> None:
    @asynccontextmanager
    async def broken(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield

    server = ServerThread(Starlette(lifespan=broken), startup_timeout=30)
    with pytest.raises(RuntimeError, match=r"uvicorn did not start on http://127\.0\.0\.1:\d+ .*SystemExit"):
        server.start()  # returns as soon as the server thread gives up, not after the 30 s
