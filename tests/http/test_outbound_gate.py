"""The outbound gate's enumeration: every HTTP client, transport, connector or raw connection in the source is made
in ``kavalai/http/`` (the gate), and the MCP SDK's HTTP transports get their client from it. A new construction
anywhere else fails here, naming the file and line, so the next surface cannot connect around the gate."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "kavalai"
GATE = SRC / "http"

#: Calls that open a client, a pool or a connection (the last name of the called expression).
CONSTRUCTORS = frozenset(
    {
        "ClientSession",  # aiohttp
        "TCPConnector",
        "UnixConnector",
        "request",  # aiohttp.request / urllib.request
        "urlopen",
        "AsyncClient",  # httpx / httpx2
        "Client",
        "AsyncHTTPTransport",
        "HTTPTransport",
        "AsyncConnectionPool",  # httpcore
        "ConnectionPool",
        "create_connection",  # socket
        "open_connection",  # asyncio
        "HTTPConnection",  # http.client
        "HTTPSConnection",
    }
)
#: Modules whose attribute call counts (``aiohttp.request`` yes, ``session.request`` no).
CLIENT_MODULES = frozenset(
    {"aiohttp", "httpx", "httpx2", "httpcore", "httpcore2", "urllib", "socket", "asyncio", "http"}
)
#: The SDK's HTTP transports and the keyword through which they must get the gate's client.
SDK_TRANSPORTS = {"streamable_http_client": "http_client", "sse_client": "httpx_client_factory"}


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def crossings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every client construction in ``tree`` as (line, what), and every SDK transport without the gate's client."""
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in CLIENT_MODULES:
            imported.update(alias.asname or alias.name for alias in node.names if alias.name in CONSTRUCTORS)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in CONSTRUCTORS and _root(func) in CLIENT_MODULES:
            found.append((node.lineno, ast.unparse(func)))
        elif isinstance(func, ast.Name) and func.id in imported:
            found.append((node.lineno, func.id))
        elif isinstance(func, ast.Name) and func.id in SDK_TRANSPORTS:
            keyword = SDK_TRANSPORTS[func.id]
            if not any(kw.arg == keyword for kw in node.keywords):
                found.append((node.lineno, f"{func.id} without {keyword}="))
    return found


def _scan() -> dict[Path, list[tuple[int, str]]]:
    return {
        path: hits
        for path in sorted(SRC.rglob("*.py"))
        if (hits := crossings(ast.parse(path.read_text(encoding="utf-8"))))
    }


def test_every_http_client_is_made_by_the_outbound_gate() -> None:
    outside = [
        f"{path.relative_to(SRC)}:{line}: {what}"
        for path, hits in _scan().items()
        if not path.is_relative_to(GATE)
        for line, what in hits
    ]
    assert outside == [], "make HTTP clients with kavalai.http.aiohttp_session / httpx_client / httpx_transport"


def test_the_scan_finds_the_gates_own_constructions() -> None:
    inside = {what for path, hits in _scan().items() if path.is_relative_to(GATE) for _, what in hits}
    assert {
        "aiohttp.ClientSession",
        "aiohttp.TCPConnector",
        "httpx2.AsyncClient",
        "httpx2.AsyncHTTPTransport",
    } <= inside


def test_the_scan_flags_a_bypass() -> None:
    source = """
import aiohttp, httpx2
from aiohttp import ClientSession as CS
from mcp.client.sse import sse_client
async def f(session):
    aiohttp.ClientSession()
    CS()
    httpx2.AsyncClient()
    sse_client("http://x")
    await session.request("GET", "http://x")  # a request on a gate-made session: not a construction
"""
    assert [what for _, what in crossings(ast.parse(source))] == [
        "aiohttp.ClientSession",
        "CS",
        "httpx2.AsyncClient",
        "sse_client without httpx_client_factory=",
    ]
