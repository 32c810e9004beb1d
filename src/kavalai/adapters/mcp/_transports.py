"""Opening a server's transport for a session: our stdio transport, or the SDK's streamable HTTP or SSE client.

The supervisor gets the session's two streams (and the process of a stdio server; the end of the stream the
session reads, even with no call in flight, is reported by :mod:`._session_streams`) and a signal: an HTTP server no
longer knows the session (HTTP 404 for a request carrying its session id, or a 400 that names the session, as
after a server restart or an idle timeout; the MCP specification then asks the client to start a new session).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client

from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._http_limits import bounded_transport
from kavalai.adapters.mcp._stdio import StdioProcess, open_stdio
from kavalai.adapters.mcp._watch import StreamWatch, watched_transport
from kavalai.errors import ConfigurationError
from kavalai.http import Outbound, httpx_client
from kavalai.secrets import register_secret, register_url_credentials

__all__ = ["open_transport"]

# A server may stay silent on its event stream for a long time; per-call timeouts are the kernel's job.
_SSE_READ_TIMEOUT: Final = 24 * 3600.0


@asynccontextmanager
async def open_transport(
    server: McpServer,
    *,
    on_session_expired: Callable[[], None],
    on_stray: Callable[[str], None] | None = None,
    on_challenge: Callable[[str], None] | None = None,
    on_open: Callable[[bool], None] | None = None,
    on_deaf: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[Any, Any, StdioProcess | None]]:
    """Open ``server``'s transport; yield the stream the session reads, the one it writes (both closed by the
    transport when it shuts down; the session reads and writes them through
    :class:`~kavalai.adapters.mcp._session_streams.SessionStreams`), and the process of a stdio server (``None`` for
    HTTP). ``on_stray`` is told of each message that answers no request (stdio; the
    SDK's HTTP transports hand those to the session as exceptions); ``on_challenge`` of the ``WWW-Authenticate``
    header of an HTTP 401 answer (the SDK's transports tell the session only "an error response"). Over
    streamable HTTP, ``on_open`` is told when the session's event stream opens (and whether after a failure), and
    ``on_deaf`` (with why) when it cannot be opened again within ``connect_timeout`` (:mod:`._watch`)."""
    server = server.resolved()  # command_env / url_env are read now, at each connect
    register_secret(*server.headers.values())  # the secret gate: header values and URL credentials are secrets
    register_url_credentials(server.url)
    if server.kind == "stdio":
        async with open_stdio(server, on_stray) as ((reads, writes), process):
            yield reads, writes, process
        return
    watch = StreamWatch(server.name, server.connect_timeout, on_open or _nothing, on_deaf or _nothing)
    async with _open_http(server, on_session_expired, on_challenge, watch) as (reads, writes):
        yield reads, writes, None


def _nothing(*_: object) -> None:
    return None


async def _session_unknown(response: httpx2.Response) -> bool:
    """Whether the answer to a request carrying a session id says that the server does not know the session: HTTP
    404, as the MCP specification asks, or HTTP 400 with a JSON-RPC error that names the session, as the TypeScript
    SDK's example servers (server-everything among them) answer once restarted. Either way nothing ran."""
    if response.status_code == 404:
        return True
    if response.status_code != 400 or "json" not in response.headers.get("content-type", ""):
        return False
    try:
        body = json.loads(await response.aread())
    except (ValueError, httpx2.HTTPError):
        return False
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return isinstance(message, str) and "session" in message.lower()


@asynccontextmanager
async def _open_http(
    server: McpServer,
    on_session_expired: Callable[[], None],
    on_challenge: Callable[[str], None] | None,
    watch: StreamWatch,
) -> AsyncIterator[Any]:
    if server.url is None:
        raise ConfigurationError(f"MCP server {server.name!r} has no url to connect to.")
    limit, name = server.max_message_bytes, server.name
    flow = server.auth.flow(name, server.url, kind="MCP server") if server.auth is not None else None
    outbound = flow.outbound() if flow is not None else Outbound(name, [server.url], kind="MCP server")

    def bounded(inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return bounded_transport(name, limit, inner)

    # OAuth: the identity's flow (the SDK's provider behind a fast path) authorizes every request of the session.
    auth = flow.httpx_auth() if flow is not None else None

    async def check_challenge(response: httpx2.Response) -> None:
        # Not with auth=: its OAuth flow answers a 401 itself (and says why when it cannot).
        if response.status_code == 401 and on_challenge is not None and server.auth is None:
            on_challenge(response.headers.get("www-authenticate", ""))

    if server.kind == "sse":

        def bounded_client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return httpx_client(
                outbound,
                bounded,
                headers=headers,
                timeout=timeout,
                auth=auth,
                event_hooks={"response": [check_challenge]},
            )

        # A legacy SSE session ends with its event stream, which the end of the read stream reports.
        async with sse_client(
            server.url,
            headers=dict(server.headers),
            timeout=server.connect_timeout,
            sse_read_timeout=_SSE_READ_TIMEOUT,
            httpx_client_factory=bounded_client,
            auth=auth,
        ) as streams:
            yield streams
        return

    async def check_session(response: httpx2.Response) -> None:
        if MCP_SESSION_ID in response.request.headers and await _session_unknown(response):
            on_session_expired()

    def watched(inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return watched_transport(watch, bounded(inner))  # the session's GET event streams kept alive

    timeout = httpx2.Timeout(server.connect_timeout, read=None)
    async with (
        httpx_client(
            outbound,
            watched,
            headers=dict(server.headers),
            timeout=timeout,
            event_hooks={"response": [check_session, check_challenge]},
            auth=auth,
        ) as client,
        streamable_http_client(server.url, http_client=client, max_sse_event_size=limit) as streams,
    ):
        yield streams
