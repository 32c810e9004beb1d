"""Serving the kernel's MCP server over stdio or streamable HTTP, for the length of the serving.

Both functions connect the kernel before the first request and close it when serving stops (the client closes
stdin, the task is cancelled, or the server fails), so the MCP servers the kernel started stop with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import socket
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from typing import Any

import uvicorn
from mcp.server import Server
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kavalai._listen import KEEP_ALIVE, LIMIT_CONNECTIONS, listening_socket
from kavalai.kernel import Kernel, required_seconds
from kavalai.serve._exchange import SingleExchange
from kavalai.serve._http_limits import BODY_SECONDS, SEND_SECONDS, BoundedProtocol, Bounds, bound
from kavalai.serve._server import build_mcp_server
from kavalai.serve._stdio import stdio_streams
from kavalai.serve._tools import Naming

__all__ = ["BearerTokenMiddleware", "ReadyCallback", "http_app", "serve_http", "serve_stdio", "uvicorn_config"]

#: Why JSON responses need stateless mode.
_JSON_NEEDS_STATELESS = (
    "JSON responses need stateless mode: a session's requests to the client (sampling, elicitation) and its "
    "progress travel on event streams"
)

#: Called once the server accepts requests, with a description (stdio) or the endpoint URL (HTTP).
ReadyCallback = Callable[[str], None]


async def serve_stdio(
    kernel: Kernel,
    *,
    allow: Sequence[str] | None = None,
    deny: Sequence[str] = (),
    name: str = "kavalai",
    on_ready: ReadyCallback | None = None,
    lazy: bool = False,
    names: Naming = "prefixed",
    tasks: Sequence[str] = (),
    tasks_required: Sequence[str] = (),
) -> None:
    """Serve ``kernel``'s tools as an MCP server on this process's stdin and stdout until the client closes stdin.

    Stdin and stdout are read and written on the event loop when they are pipes or sockets, with the SDK's
    thread-based stdio otherwise (see :mod:`kavalai.serve._stdio`). While serving, file descriptor 1 points at
    stderr (and 0 at the null device), so stray output of tools cannot corrupt the protocol stream. The kernel is
    connected first and closed at the end.

    Args:
        kernel: the kernel whose tools are offered.
        allow: URI globs; when given, only matching tools are offered.
        deny: URI globs of tools never offered.
        name: the server name shown to clients.
        on_ready: called with ``"stdio"`` once the kernel is connected and requests are read.
        lazy: connect the kernel's servers at the first request that needs their tools, not before.
        names: ``"prefixed"`` or ``"own"`` (see :func:`~kavalai.serve.build_mcp_server`).
        tasks: URI globs of tools run as tasks for hosts that ask (see :func:`~kavalai.serve.build_mcp_server`).
        tasks_required: URI globs of tools run only as tasks.

    Raises:
        ServerConnectionError: a server of the kernel cannot be connected (not with ``lazy``).
    """
    server = build_mcp_server(
        kernel, allow=allow, deny=deny, name=name, lazy=lazy, names=names, tasks=tasks, tasks_required=tasks_required
    )
    async with stdio_streams() as (reads, writes), _connected(kernel, lazy=lazy):
        if on_ready is not None:
            on_ready("stdio")
        await server.run(reads, writes, server.create_initialization_options())


async def serve_http(
    kernel: Kernel,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    bearer_token: str | None = None,
    allow: Sequence[str] | None = None,
    deny: Sequence[str] = (),
    name: str = "kavalai",
    on_ready: ReadyCallback | None = None,
    lazy: bool = False,
    names: Naming = "prefixed",
    stateless: bool = False,
    tasks: Sequence[str] = (),
    tasks_required: Sequence[str] = (),
    sock: socket.socket | None = None,
    keep_alive: int = KEEP_ALIVE,
    json_response: bool = False,
    session_idle_timeout: float | None = None,
    limit_connections: int = LIMIT_CONNECTIONS,
    body_timeout: float = BODY_SECONDS,
    send_timeout: float = SEND_SECONDS,
) -> None:
    """Serve ``kernel``'s tools as a streamable HTTP MCP endpoint at ``http://host:port/path`` until cancelled.

    Cancelling the task stops the server gracefully (no new connections; requests in flight get a second to
    finish), then closes the kernel. On a loopback ``host``, requests whose ``Host`` or ``Origin`` header is not
    a loopback address are refused (DNS rebinding protection).

    Two more paths answer ``GET`` without a token, for load balancers: ``/healthz`` (200 while the process
    serves) and ``/readyz`` (200 once the kernel is connected, 503 before that and once stopping has begun).

    Args:
        kernel: the kernel whose tools are offered.
        host: the address to listen on.
        port: the port; ``0`` picks a free one (``on_ready`` receives the URL with it).
        path: the endpoint's path.
        bearer_token: when given, every request needs ``Authorization: Bearer <bearer_token>``; others get 401.
        allow: URI globs; when given, only matching tools are offered.
        deny: URI globs of tools never offered.
        name: the server name shown to clients.
        on_ready: called with the endpoint URL once the kernel is connected and the port is listening.
        lazy: connect the kernel's servers at the first request that needs their tools, not before.
        names: ``"prefixed"`` or ``"own"`` (see :func:`~kavalai.serve.build_mcp_server`).
        stateless: every request stands alone: no session id, nothing kept between requests, so replicas can sit
            behind any load balancer. A server-to-client request (sampling, elicitation) has no way back to a
            handshake-era client there: it is refused, and the call that needed it fails with an error saying that
            ``kavalai serve --stateless`` has no back channel (a 2026-07-28 client is asked in its call's
            input-required rounds); notifications still flow.
        tasks: URI globs of tools run as tasks for hosts that ask (see :func:`~kavalai.serve.build_mcp_server`;
            a task is held by the process that started it: behind replicas, route a task's requests to it).
        tasks_required: URI globs of tools run only as tasks.
        sock: a listening socket to serve on instead of ``host`` and ``port`` (a worker of ``--workers``); the
            caller owns it and closes it.
        keep_alive: seconds an idle keep-alive connection stays open (see :data:`KEEP_ALIVE`); raise it above the
            idle timeout of a load balancer in front that keeps longer (Google Cloud's: 600 s).
        json_response: with ``stateless`` only: answer each request with one ``application/json`` body, never an
            event stream (for clients or proxies that cannot read one); a request's progress and log messages are
            then not sent, there being no stream to carry them (``subscriptions/listen`` stays a stream).
        session_idle_timeout: seconds a session may go without a request in flight (nor an open event stream)
            before the gateway ends it, as if the host had deleted it (its subscriptions are taken back); ``None``:
            the MCP SDK's default (30 minutes in mcp 2.3). Not with ``stateless`` (no sessions).
        limit_connections: the most connections open, and requests in flight (an event stream is one), at once;
            a request past it is answered ``503`` (the connection itself is accepted, to be answered), but for the
            probes ``/healthz`` and ``/readyz``, answered past it (a busy replica is not an unhealthy one).
        body_timeout: seconds a client has, from a request's head, to send its body; past it the request is
            answered ``408`` and the connection closed.
        send_timeout: seconds a response may wait for a client that takes none of it (an event stream it does
            not read); past it the connection is reset. A client that reads, however slowly, is not cut.

    Raises:
        ServerConnectionError: a server of the kernel cannot be connected (not with ``lazy``).
        OSError: the address cannot be listened on.
        ValueError: ``json_response`` without ``stateless``; ``session_idle_timeout`` with ``stateless``; it,
            ``body_timeout`` or ``send_timeout`` not a positive number of seconds (the one rule: more than a year
            is clamped to a year); ``limit_connections`` not a positive integer.
    """
    server = build_mcp_server(
        kernel,
        allow=allow,
        deny=deny,
        name=name,
        lazy=lazy,
        names=names,
        stateless=stateless,
        tasks=tasks,
        tasks_required=tasks_required,
    )
    readiness = _Readiness()
    endpoint = http_app(
        server,
        path=path,
        host=host,
        bearer_token=bearer_token,
        stateless=stateless,
        json_response=json_response,
        session_idle_timeout=session_idle_timeout,
    )
    app = readiness.wrap(endpoint)
    config = uvicorn_config(
        app,
        keep_alive=keep_alive,
        limit_connections=limit_connections,
        body_timeout=body_timeout,
        send_timeout=send_timeout,
        probes=_Readiness.PATHS,
    )
    with contextlib.nullcontext(sock) if sock is not None else _listening(host, port) as listening:
        async with _connected(kernel, lazy=lazy):
            readiness.ready = True
            if on_ready is not None:
                on_ready(_endpoint(listening, path))
            with _asyncio_declared():
                await _run_until_cancelled(_Uvicorn(config), listening, readiness)


def uvicorn_config(
    app: ASGIApp,
    *,
    keep_alive: int = KEEP_ALIVE,
    limit_connections: int = LIMIT_CONNECTIONS,
    body_timeout: float = BODY_SECONDS,
    send_timeout: float = SEND_SECONDS,
    probes: Collection[str] = (),
) -> uvicorn.Config:
    """How ``serve_http`` runs uvicorn: :data:`~kavalai.serve._http_limits.BoundedProtocol` (each read acknowledged
    at once, a request's head bounded in size and time, its body in time (``body_timeout``), a write's wait for a
    client that does not read too (``send_timeout``)), ``keep_alive`` seconds of idle keep-alive (a new connection
    too), at most ``limit_connections`` connections and requests in flight (503 past it, but for the paths in
    ``probes``, which ``app`` answers at once), a second for requests in flight once stopping, no websockets,
    warnings only."""
    if isinstance(keep_alive, bool) or not isinstance(keep_alive, int) or keep_alive < 1:  # nan, inf, True too
        raise ValueError(f"keep_alive must be 1 second or more, not {keep_alive}")
    if isinstance(limit_connections, bool) or not isinstance(limit_connections, int) or limit_connections < 1:
        raise ValueError(f"limit_connections must be a positive integer, not {limit_connections!r}")
    bounds = Bounds(body_seconds=body_timeout, send_seconds=send_timeout, probes=frozenset(probes))
    config = uvicorn.Config(
        app,
        http=BoundedProtocol,
        log_level="warning",
        ws="none",
        lifespan="on",
        timeout_graceful_shutdown=1,
        timeout_keep_alive=keep_alive,
        limit_concurrency=limit_connections + 1,  # uvicorn counts the new connection itself: N + 1 admits N
    )
    return bound(config, bounds)


def http_app(
    server: Server[Any],
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    bearer_token: str | None = None,
    stateless: bool = False,
    json_response: bool = False,
    session_idle_timeout: float | None = None,
) -> Any:
    """The ASGI application of ``server``'s streamable HTTP endpoint at ``path``, behind a bearer token check
    when ``bearer_token`` is given, without sessions when ``stateless``, answering with JSON bodies instead of
    event streams when ``json_response`` (stateless only: a session's requests to the client, sampling and
    elicitation, would have no way to it), ending a session idle ``session_idle_timeout`` seconds (``None``: the
    SDK's default). Its lifespan runs the SDK's session manager.

    Raises:
        ValueError: ``json_response`` without ``stateless``; ``session_idle_timeout`` with ``stateless``, or not
            a positive number of seconds (the one rule: more than a year is clamped to a year).
    """
    if json_response and not stateless:
        raise ValueError(_JSON_NEEDS_STATELESS)
    idle: dict[str, Any] = {}
    if session_idle_timeout is not None:  # the SDK's own check of the number (mcp 2.3 takes it here)
        if stateless:
            raise ValueError("session_idle_timeout needs sessions: a stateless server has none")
        idle["session_idle_timeout"] = required_seconds(session_idle_timeout, what="session_idle_timeout")
    app: Any = _direct(
        server,
        server.streamable_http_app(
            streamable_http_path=path, host=host, stateless_http=stateless, json_response=json_response, **idle
        ),
        path,
    )
    return app if bearer_token is None else BearerTokenMiddleware(app, bearer_token)


def _direct(server: Server[Any], app: Starlette, path: str) -> ASGIApp:
    """``app``, with the requests to ``path`` handed to its endpoint straight, not through Starlette's error and
    exception middleware and router: they only find the one route and pass the request on (an exception
    reaches uvicorn, which answers 500 as Starlette would); a 2026-07-28 client's tool calls and listings are
    answered in their own task (:class:`~kavalai.serve._exchange.SingleExchange`). The rest (the lifespan, other
    paths: 404) go through ``app``. ``app`` itself when its routes are not the one plain route to ``path`` (the
    SDK changed)."""
    if app.user_middleware or len(app.routes) != 1:
        return app
    [route] = app.routes
    if not isinstance(route, Route) or route.path != path or route.methods is not None:
        return app
    endpoint = SingleExchange(server, route.app)

    async def direct(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == path and not scope.get("root_path"):
            await endpoint(scope, receive, send)
        else:
            await app(scope, receive, send)

    return direct


class BearerTokenMiddleware:
    """An ASGI middleware answering 401 to every HTTP request without ``Authorization: Bearer <token>``.

    The token is compared in constant time. Lifespan events pass through.

    Args:
        app: the application behind the check.
        token: the token requests must carry.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request's token; pass an authorized request (or a non-HTTP event) on."""
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "error_description": "a valid bearer token is required"})
        headers = [
            (b"content-type", b"application/json"),
            (b"www-authenticate", b'Bearer error="invalid_token"'),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body.encode()})

    def _authorized(self, scope: Scope) -> bool:
        given = [value for key, value in scope.get("headers", []) if key.lower() == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(given[0], self._expected)


class _Readiness:
    """Whether the server takes requests, answered at ``GET /readyz`` (200 or 503); ``GET /healthz`` answers 200
    while the process serves. Both come before any token check: a load balancer's probe carries none; and both are
    served past the connection limit (:attr:`~kavalai.serve._http_limits.Bounds.probes`): a busy replica is not an
    unhealthy one.

    Attributes:
        ready: set once the kernel is connected, cleared when stopping begins.
    """

    HEALTH_PATH = "/healthz"
    READY_PATH = "/readyz"
    PATHS = frozenset({HEALTH_PATH, READY_PATH})

    def __init__(self) -> None:
        self.ready = False

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """``app`` behind the two probe paths."""

        async def probes(scope: Scope, receive: Receive, send: Send) -> None:
            path = scope.get("path") if scope["type"] == "http" else None
            if path == self.HEALTH_PATH:
                await _plain(send, 200, b"ok")
            elif path == self.READY_PATH:
                ready = self.ready
                await _plain(send, 200 if ready else 503, b"ready" if ready else b"not ready")
            else:
                await app(scope, receive, send)

        return probes


async def _plain(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that leaves signals to its caller (it would otherwise re-raise them after stopping,
    before the kernel is closed)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _run_until_cancelled(server: uvicorn.Server, sock: socket.socket, readiness: _Readiness) -> None:
    """Serve; on cancellation stop gracefully (not ready from then on), wait for the stop, then let the
    cancellation go on."""
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        readiness.ready = False
        server.should_exit = True
        with contextlib.suppress(Exception):
            await serving
        raise


@contextlib.contextmanager
def _asyncio_declared() -> Iterator[None]:
    """For the block, the running async library is declared ``asyncio`` for this thread (the loop's) in sniffio's
    thread-local (its public way), when sniffio is installed. anyio asks sniffio which library runs at every cancel
    scope, task group and stream operation of the MCP SDK (about 15 times a call), and sniffio, with nothing
    declared, looks for the current asyncio task each time; declared, it reads the attribute. Thread-local, not the
    context variable: a sync tool's worker thread (which gets a copy of the context) still finds no loop of its
    own, so ``anyio.run`` there works as before."""
    try:
        from sniffio import thread_local
    except ImportError:  # anyio then asks asyncio itself
        yield
        return
    before, thread_local.name = thread_local.name, "asyncio"
    try:
        yield
    finally:
        thread_local.name = before


@contextlib.asynccontextmanager
async def _connected(kernel: Kernel, *, lazy: bool = False) -> AsyncIterator[None]:
    """The kernel connected for the block (``lazy``: left for the first request), and closed after it (also when
    connecting fails)."""
    try:
        if not lazy:
            await kernel.connect()
        yield
    finally:
        await kernel.close()


@contextlib.contextmanager
def _listening(host: str, port: int) -> Iterator[socket.socket]:
    """A listening TCP socket on ``host`` and ``port`` (from the one gate, so with ``TCP_NODELAY``): connections
    made before the server runs wait in the backlog (as long as uvicorn's) rather than being refused."""
    sock = listening_socket(host, port)
    try:
        yield sock
    finally:
        sock.close()


def _endpoint(sock: socket.socket, path: str) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"
