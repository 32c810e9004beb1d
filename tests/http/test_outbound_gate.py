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
        "Session",  # requests (the OTLP/HTTP exporter's)
    }
)
#: Modules whose attribute call counts (``aiohttp.request`` yes, ``session.request`` no).
CLIENT_MODULES = frozenset(
    {"aiohttp", "httpx", "httpx2", "httpcore", "httpcore2", "urllib", "socket", "asyncio", "http", "requests"}
)
#: The SDK's HTTP transports and the keyword through which they must get the gate's client.
SDK_TRANSPORTS = {"streamable_http_client": "http_client", "sse_client": "httpx_client_factory"}
#: The LLM provider SDKs' clients (named, or built from the provider's ``_sdk_client`` attribute), which make their
#: own HTTP client unless given one: each construction passes ``http_client=``.
SDK_CLIENTS = frozenset({"AsyncOpenAI", "OpenAI", "AsyncAnthropic", "Anthropic"})
#: Every trace exporter the source builds, as (file, call): the OTLP exporters get the gate's session or have their
#: endpoint judged first (``_checked_endpoint``); the console exporter writes to stderr; others are the user's.
EXPORTERS = {
    ("_tracing_setup.py", "exporter_class(session=session)"),  # OTLP/HTTP: the gate's requests session
    ("_tracing_setup.py", "exporter_class(out=sys.stderr)"),  # console: no network
    ("_tracing_setup.py", "exporter_class()"),  # OTLP/gRPC (endpoint judged) or one the user installed
    ("_tracing_setup.py", "_exporter(name, env)"),  # the one helper making the three above
    ("_tracing_setup.py", "MaskingExporter(exporter)"),  # each of them, wrapped: spans masked as they leave
}


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_sdk_client(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in SDK_CLIENTS or "_sdk_client" in ast.unparse(func)


def exporters(tree: ast.AST) -> list[str]:
    """Every call of a trace exporter (a name with ``exporter`` in it, called) in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name.lower().endswith(("exporter", "exporter_class")):
                found.append(ast.unparse(node))
    return found


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
        elif _is_sdk_client(func) and not any(kw.arg == "http_client" for kw in node.keywords):
            found.append((node.lineno, f"{ast.unparse(func)} without http_client="))
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
        "requests.Session",
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


def test_every_trace_exporter_is_listed_with_how_it_crosses_the_gate() -> None:
    found = {
        (str(path.relative_to(SRC)), call)
        for path in sorted(SRC.rglob("*.py"))
        for call in exporters(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert found == EXPORTERS, "a new trace exporter: give it the gate's session or judge its endpoint, then list it"


def test_the_scan_flags_an_sdk_client_without_the_gates_client() -> None:
    source = """
import openai
from kavalai.http import httpx_client
openai.AsyncOpenAI(api_key="k")
AsyncAnthropic(api_key="k")
getattr(sdk, self._sdk_client)(api_key="k")
openai.AsyncOpenAI(api_key="k", http_client=httpx_client(outbound))
OTLPSpanExporter(endpoint="http://x")
"""
    tree = ast.parse(source)
    assert [what for _, what in crossings(tree)] == [
        "openai.AsyncOpenAI without http_client=",
        "AsyncAnthropic without http_client=",
        "getattr(sdk, self._sdk_client) without http_client=",
    ]
    assert exporters(tree) == ["OTLPSpanExporter(endpoint='http://x')"]


#: Every file making an aiohttp session (outside the gate), and how each hop of its requests, redirects included, is
#: judged by ``origin_guard(..., check=...)``, aiohttp's per-hop client middleware: ``session`` (in the session's
#: ``middlewares``; then no request of that file may pass middlewares of its own, which would replace the session's),
#: ``request`` (passed with each request), or ``None`` when nothing judges them.
HOP_GUARDS: dict[str, str | None] = {
    "adapters/rest/_session.py": "session",  # the outbound gate's hop_check: a redirect is a learned URL
    "tools/_fetch.py": "request",  # the fetch tools' address rules, per request (each has its own origin)
    "demo/oauth.py": "session",  # the demo's browser: a Location is a learned URL (loopback allowed)
}
#: The aiohttp session methods that send a request (and so take ``middlewares=``).
_SENDS = ("request", "get", "post", "put", "patch", "delete", "head", "options", "ws_connect")


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)) == name
    ]


def _has_check(calls: list[ast.Call]) -> bool:
    return bool(calls) and all(any(kw.arg == "check" for kw in call.keywords) for call in calls)


def _guards_in(calls: list[ast.Call]) -> list[ast.Call]:
    """The ``origin_guard(...)`` calls inside the ``middlewares=`` arguments of ``calls``."""
    return [
        guard
        for call in calls
        for kw in call.keywords
        if kw.arg == "middlewares"
        for guard in _calls(kw.value, "origin_guard")
    ]


def hop_guard(tree: ast.AST) -> str | None:
    """How the aiohttp sessions made in ``tree`` judge their hops: ``session``, ``request`` or ``None``."""
    sessions = _calls(tree, "aiohttp_session")
    sends = [call for name in _SENDS for call in _calls(tree, name)]
    if sessions and all(_has_check(_guards_in([call])) for call in sessions):
        # the session's guard holds only while no request replaces the session's middlewares with its own
        return None if any(kw.arg == "middlewares" for call in sends for kw in call.keywords) else "session"
    guards = _guards_in(sends)
    guards += [  # a middlewares tuple built apart from the call (an options dict)
        call
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values, strict=True)
        if isinstance(key, ast.Constant) and key.value == "middlewares"
        for call in _calls(value, "origin_guard")
    ]
    return "request" if _has_check(guards) else None


def test_every_aiohttp_session_judges_every_hop() -> None:
    found = {
        str(path.relative_to(SRC)): hop_guard(tree)
        for path in sorted(SRC.rglob("*.py"))
        if not path.is_relative_to(GATE)
        and _calls(tree := ast.parse(path.read_text(encoding="utf-8")), "aiohttp_session")
    }
    assert found == HOP_GUARDS, "a new aiohttp session: judge its hops (origin_guard with check=), then list it"
    assert None not in HOP_GUARDS.values(), "every session judges its hops: none is exempt"


def test_the_hop_scan_tells_a_session_that_judges_nothing() -> None:
    guarded = "session, _ = aiohttp_session(o, middlewares=(*mine, origin_guard(url, check=o.hop_check)))"
    assert hop_guard(ast.parse(guarded)) == "session"
    assert hop_guard(ast.parse(f"{guarded}\nsession.request('GET', u)")) == "session"
    assert hop_guard(ast.parse(f"{guarded}\nsession.get(u, middlewares=())")) is None  # it replaces the guard
    assert hop_guard(ast.parse("session, _ = aiohttp_session(o, middlewares=(origin_guard(url),))")) is None
    assert hop_guard(ast.parse("session, _ = aiohttp_session(o)")) is None
    assert hop_guard(ast.parse("session, _ = aiohttp_session(o, request_class=Mine)")) is None
    per_request = "aiohttp_session()\nsession.request('GET', u, middlewares=(origin_guard(u, check=c),))"
    assert hop_guard(ast.parse(per_request)) == "request"
    assert hop_guard(ast.parse("aiohttp_session()\nsession.request('GET', u, middlewares=(origin_guard(u),))")) is None
