"""Issue 40: no Nagle stall. Every server the project starts accepts connections with ``TCP_NODELAY`` set, and
every listening socket comes from the one gate, ``kavalai._listen``.

A connection with Nagle on holds a response's second segment (the SSE event carrying a tool's result, after the
headers) until the client's delayed ACK: about 40 ms a call. The tests look at the server's own accepted socket
(this process holds both ends), never at a clock.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai._listen import REUSE_PORT, listening_socket, port_for_workers, worker_listening_socket
from kavalai.auth import LoopbackRedirect
from kavalai.demo.oauth import serve_demo_oauth
from kavalai.demo.rest_app import serve_demo_app
from kavalai.serve import serve_http
from tests.servers.uvicorn_server import serve

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "src" / "kavalai" / "_listen.py"


def accepted_socket_option(server: tuple[str, int], client: tuple[str, int], option: int = socket.TCP_NODELAY) -> int:
    """The TCP ``option`` (``TCP_NODELAY`` by default) of the server-side socket of the connection from ``client``
    to ``server`` (in this process: the servers under test run on its loop or in its threads)."""
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(int(name))) as sock:
                if sock.type != socket.SOCK_STREAM or sock.getsockname()[:2] != server:
                    continue
                if sock.getpeername()[:2] == client:
                    return sock.getsockopt(socket.IPPROTO_TCP, option)
    raise AssertionError(f"no accepted connection {client} -> {server} in this process")


async def _nodelay_of_a_request(base_url: str, path: str = "/") -> int:
    """Send one keep-alive request to ``base_url``, read the answer's first bytes, and return the server's
    ``TCP_NODELAY`` on that connection."""
    host, port = base_url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: keep-alive\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        assert (await asyncio.wait_for(reader.read(12), 10)).startswith(b"HTTP/1.1")
        client = writer.get_extra_info("sockname")[:2]
        return await asyncio.to_thread(accepted_socket_option, (host, int(port)), client)
    finally:
        writer.close()
        await writer.wait_closed()


@pythontool
def _add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@contextlib.asynccontextmanager
async def gateway(extra_tools: dict[str, Any] | None = None, **options: Any) -> AsyncIterator[str]:
    """``serve_http`` with ``options`` on a free port of this process's loop, one tool (``python_add``, and
    ``extra_tools`` by name); yields the endpoint URL; cancelled at the end."""
    kernel = FunctionKernel()
    kernel.register_python_tool("add", _add)
    for name, tool in (extra_tools or {}).items():
        kernel.register_python_tool(name, tool)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_http(kernel, port=0, on_ready=ready.set_result, **options))
    try:
        yield await asyncio.wait_for(asyncio.shield(ready), 30)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


async def test_the_gateway_accepts_connections_with_nodelay() -> None:
    # Fails on the listening socket made with protocol 0: asyncio then leaves Nagle on.
    async with gateway() as url:
        assert await _nodelay_of_a_request(url, "/mcp") == 1


async def test_the_oauth_demo_servers_accept_connections_with_nodelay() -> None:
    async with serve_demo_oauth() as demo:
        for url in (demo.issuer, demo.mcp_url, demo.rest_url):
            assert await _nodelay_of_a_request(url) == 1, url


async def test_the_rest_demo_app_and_the_redirect_listener_accept_connections_with_nodelay() -> None:
    async with serve_demo_app() as url:
        assert await _nodelay_of_a_request(url, "/books") == 1
    listener = LoopbackRedirect()
    uri = listener.redirect_uri()
    await listener.expect("state")
    try:
        assert await _nodelay_of_a_request(uri) == 1
    finally:
        await listener.discard("state")


async def test_the_test_servers_accept_connections_with_nodelay() -> None:
    async def app(scope: dict[str, object], receive: Callable[..., object], send: Callable[..., object]) -> None:
        assert scope["type"] == "http"
        await send({"type": "http.response.start", "status": 204, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    with serve(app, lifespan="off") as url:
        assert await _nodelay_of_a_request(url) == 1


def test_the_gate_makes_tcp_sockets_with_nodelay() -> None:
    with listening_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP  # so asyncio sets TCP_NODELAY on what it accepts too
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    with listening_socket("127.0.0.1", 0) as first, pytest.raises(OSError):  # a port in use is refused
        listening_socket("127.0.0.1", first.getsockname()[1])


def test_workers_get_a_port_held_by_the_parent_and_listen_each_on_their_own_socket() -> None:
    """With ``SO_REUSEPORT`` (Linux) the parent's socket holds the port without listening, and each worker's
    socket listens on that port beside the others (a second one made while the first listens); the port stays
    taken for anyone else. Without it, the parent's socket listens and the workers share it."""
    with port_for_workers("127.0.0.1", 0) as held:
        port = held.getsockname()[1]
        assert port != 0
        assert held.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == (0 if REUSE_PORT else 1)
        given = [socket.socket(fileno=os.dup(held.fileno())) for _ in range(2)]
        mine = [worker_listening_socket(sock) for sock in given]
        try:
            assert all(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1 for sock in mine)
            assert all(sock.getsockname()[1] == port for sock in mine)
            assert all(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1 for sock in mine)
            if REUSE_PORT:
                assert mine[0].fileno() != mine[1].fileno()
                assert all(sock.fileno() == -1 for sock in given)  # the given copies are closed
            else:
                assert mine == given  # shared
            with pytest.raises(OSError):  # no plain socket can take the port meanwhile
                listening_socket("127.0.0.1", port)
        finally:
            for sock in mine:
                sock.close()


def _python_files() -> list[Path]:
    return sorted(path for top in ("src", "tests", "bench") for path in (ROOT / top).rglob("*.py"))


def _calls(tree: ast.AST, attribute: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == attribute)
            or (isinstance(node.func, ast.Name) and node.func.id == attribute)
        )
    ]


def test_every_listening_socket_comes_from_the_gate() -> None:
    """The enumeration: a ``listen()`` anywhere but the gate, or a module that hands a socket of its own to a
    server (uvicorn's ``sockets=``, aiohttp's ``SockSite``) without importing the gate, fails here."""
    own_listen, handed = [], []
    for path in _python_files():
        if path == GATE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        name = str(path.relative_to(ROOT))
        own_listen += [f"{name}:{call.lineno}" for call in _socket_listens(tree)]
        hands = _calls(tree, "SockSite") + [
            call for call in ast.walk(tree) if isinstance(call, ast.Call) and _passes_sockets(call)
        ]
        if hands and "kavalai._listen" not in {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}:
            handed.append(name)
    assert own_listen == []
    assert handed == []


def _socket_listens(tree: ast.AST) -> list[ast.Call]:
    """``x.listen()`` / ``x.listen(backlog)``: a socket's, not an event API's (``event.listen(Engine, ...)``) or an
    MCP client's (``client.listen(tools_list_changed=True)``)."""
    return [call for call in _calls(tree, "listen") if len(call.args) <= 1 and not call.keywords]


def _passes_sockets(call: ast.Call) -> bool:
    return any(keyword.arg == "sockets" for keyword in call.keywords)


@pytest.mark.parametrize(
    "snippet", ["sock.listen(5)", "sock.listen()", "server.serve(sockets=[s])", "web.SockSite(runner, s)"]
)
def test_the_enumeration_sees_a_socket_of_its_own(snippet: str) -> None:
    tree = ast.parse(snippet)
    assert (
        _socket_listens(tree)
        or _calls(tree, "SockSite")
        or any(isinstance(call, ast.Call) and _passes_sockets(call) for call in ast.walk(tree))
    )
