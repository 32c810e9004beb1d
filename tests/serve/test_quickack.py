"""Issue 40: no delayed-ACK stall for a client with Nagle's algorithm on. The gateway's HTTP protocol
(``kavalai.serve._quickack``) sets ``TCP_QUICKACK`` after each read, so the acknowledgement a Nagle client waits for
before sending a request's second piece goes at once.

Without it, a connection that has answered a request is in Linux's ping-pong mode (``TCP_QUICKACK`` reads 0) when
the next request arrives, and a client that writes headers and body apart waits 40 ms or more for each call. The
tests look at the server's own accepted socket while it serves (this process holds both ends), never at a clock.
"""

from __future__ import annotations

import ast
import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from tests.servers.uvicorn_server import serve
from tests.test_listen import accepted_socket_option

from kavalai.serve._http_limits import BoundedProtocol
from kavalai.serve._quickack import QuickAckProtocol

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")

SERVE = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "serve"


async def test_every_request_finds_its_connection_acknowledging_at_once() -> None:
    """A keep-alive client with Nagle on sends five requests, each as headers then body in two writes; once the
    server has read each request's headers (before its body, before any answer), its side of the connection is out
    of ping-pong mode: the headers' acknowledgement has gone, and the body can follow."""
    states: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # The headers are read, the body not yet: a client with Nagle on sends it once the headers are acknowledged.
        server, client = tuple(scope["server"]), tuple(scope["client"])
        states.append(accepted_socket_option(server, client, socket.TCP_QUICKACK))
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    with serve(app, lifespan="off", http=QuickAckProtocol) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)  # Nagle on
        try:
            for _ in range(5):
                writer.write(f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 4\r\n\r\n".encode())
                await writer.drain()
                writer.write(b"body")
                await writer.drain()
                answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\nok"), 30)
                assert answer.startswith(b"HTTP/1.1 200")
        finally:
            writer.close()
            await writer.wait_closed()
    assert states == [1] * 5  # uvicorn's own protocol: [1, 0, 0, 0, 0] (ping-pong after the first answer)


def _uvicorn_configs(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "Config"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "uvicorn"
    ]


def test_every_uvicorn_server_of_the_gateway_runs_the_quick_ack_protocol() -> None:
    found = [
        (path.name, call)
        for path in sorted(SERVE.glob("*.py"))
        for call in _uvicorn_configs(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found, "the enumeration found no uvicorn.Config in kavalai/serve"
    for name, call in found:
        http = [keyword.value for keyword in call.keywords if keyword.arg == "http"]
        where = f"{name}:{call.lineno}: uvicorn.Config without http=BoundedProtocol (quick ACKs, bounded heads)"
        assert len(http) == 1, where
        assert isinstance(http[0], ast.Name), where
        assert http[0].id == "BoundedProtocol", where
    assert issubclass(BoundedProtocol, QuickAckProtocol)


def test_the_enumeration_sees_a_config_of_its_own() -> None:
    tree = ast.parse("import uvicorn\nuvicorn.Config(app, log_level='warning')\n")
    [call] = _uvicorn_configs(tree)
    assert [keyword.arg for keyword in call.keywords] == ["log_level"]


def test_the_gateway_parses_http_with_httptools() -> None:
    """The ``server`` extra brings ``httptools``, so uvicorn's protocol under the quick ACKs is httptools' parser, not
    h11's pure-Python one (about 0.1-0.3 ms of server CPU a call less, bench/serve_http.py): a missing or broken
    ``httptools`` would leave uvicorn falling back to h11 without a word."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert issubclass(QuickAckProtocol, HttpToolsProtocol)
    assert issubclass(BoundedProtocol, HttpToolsProtocol)  # so the heads are bounded (kavalai/serve/_http_limits.py)
