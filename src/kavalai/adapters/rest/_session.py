"""One pooled aiohttp session per REST server, and the one place aiohttp errors become kavalai errors.

The session is created on first use inside the running event loop (aiohttp sessions are bound to a loop) and
closed by :meth:`ServerSession.aclose`, which ``kernel.close()`` reaches through the adapter; the next call after
that opens a new one. A session that is never closed is closed when its event loop shuts down (``asyncio.run()``
finalises async generators, and one of them owns the session), so its sockets do not outlive the loop.

Responses are decoded here: JSON by content type, other bodies as text, an empty body (a 204, a HEAD) as
``None``; a 4xx/5xx becomes :class:`~kavalai.errors.HTTPStatusError`.

A foreign exception is kept as the ``__cause__`` of the kavalai error, unless its text holds one of the server's
secrets (aiohttp puts the request URL, API key query parameter included, into some of its messages): then it is
dropped, so that no traceback or log line can show the secret.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncGenerator
from typing import Any, Final

import aiohttp
from aiohttp.client_middlewares import ClientHandlerType, ClientMiddlewareType
from pydantic_core import from_json, to_json
from yarl import URL

from kavalai.adapters.rest._config import ResolvedServer, RestServer
from kavalai.adapters.rest._request import PreparedRequest
from kavalai.errors import (
    ConfigurationError,
    FunctionKernelException,
    HTTPStatusError,
    ResponseTooLargeError,
    ServerConnectionError,
    ToolExecutionError,
    ToolInputError,
    ToolTimeoutError,
)

__all__ = ["BODY_EXCERPT_CHARS", "ServerSession"]

#: How much of an error response's body an HTTPStatusError keeps.
BODY_EXCERPT_CHARS: Final = 1000
_EXCERPT_BYTES: Final = 4 * BODY_EXCERPT_CHARS


class ServerSession:
    """The connection pool of one REST server and the requests sent through it."""

    def __init__(self, server: RestServer) -> None:
        self.server = server
        # Registration only records the configuration: environment variables are read when a session opens.
        self._resolved: ResolvedServer | None = None
        self._ssl = self._ssl_setting()
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    @property
    def resolved(self) -> ResolvedServer:
        """The server's settings with URL and credentials read (read now if no session has read them yet)."""
        if self._resolved is None:
            self._resolved = self.server.resolve()
        return self._resolved

    @property
    def name(self) -> str:
        """The server name."""
        return self.server.name

    async def _open(self) -> aiohttp.ClientSession:
        """A new pooled session (the environment is read again), owned by an async generator of this loop."""
        if self._closer is not None:
            await self.aclose()  # let go of a closed session, or one of another event loop, properly
            if self._session is not None:  # another call opened one meanwhile
                return self._session
        self._resolved = self.server.resolve()
        connector = aiohttp.TCPConnector(limit=self.server.max_connections, ssl=self._ssl)
        session = aiohttp.ClientSession(
            connector=connector,
            headers=self.resolved.headers,
            timeout=aiohttp.ClientTimeout(total=None),
            raise_for_status=False,
            middlewares=_credential_guard(self.resolved),
            json_serialize=_dumps,
        )
        self._session, self._loop = session, asyncio.get_running_loop()
        self._closer = _close_when_the_loop_ends(session)
        await anext(self._closer)
        return session

    async def _read_bounded(self, response: aiohttp.ClientResponse, where: str, uri: str | None) -> bytes:
        """The body, counted after decompression (a gzip bomb is refused as it inflates, not after)."""
        limit = self.server.max_response_bytes
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(256 * 1024):
            size += len(chunk)
            if size > limit:
                raise ResponseTooLargeError(
                    f"{where}: the response of {self.name!r} is larger than {limit:,} bytes (max_response_bytes of "
                    "the RestServer; raise it if such responses are expected).",
                    uri=uri,
                    limit=limit,
                )
            chunks.append(chunk)
        return b"".join(chunks)

    async def send(self, request: PreparedRequest, *, uri: str | None = None) -> Any:
        """Send ``request`` and return the decoded body; raise a kavalai error (naming ``uri``) on any failure.

        ``request.path`` is relative to the base URL, or an absolute ``http(s)://`` URL (OpenAPI specs).
        """
        session = self._session
        try:
            if session is None or session.closed or self._loop is not asyncio.get_running_loop():
                session = await self._open()  # first use, after close(), or in another event loop
        except ConfigurationError as exc:  # a credential variable unset since registration: name the tool too
            exc.uri = exc.uri or uri
            raise
        resolved = self.resolved
        method, path = request.method, request.path
        url = f"{resolved.base_url}{path}" if path.startswith("/") else path
        kwargs: dict[str, Any] = {}
        if request.query or resolved.query:
            kwargs["params"] = [*request.query, *resolved.query]
        if request.headers:
            kwargs["headers"] = request.headers
        where = uri or f"REST server {self.name!r}"
        if request.has_body:
            kwargs["data"] = _json_body(request.body, where, uri)
            kwargs["headers"] = {**(request.headers or {}), "Content-Type": "application/json"}
        try:
            async with session.request(method, url, **kwargs) as response:
                if response.status >= 400:
                    raise await self._status_error(response, method, path, where, uri)
                return _decode(await self._read_bounded(response, where, uri), response)
        except FunctionKernelException:
            raise
        except TimeoutError as exc:
            error: FunctionKernelException = ToolTimeoutError(
                f"{where}: {method} {path} timed out waiting for {self.name!r}.", uri=uri
            )
            cause: BaseException = exc
        except aiohttp.ClientConnectorCertificateError as exc:
            error = ServerConnectionError(
                f"{where}: the TLS certificate of REST server {self.name!r} at {resolved.base_url} could not be "
                f"verified ({self._describe(exc)}). For a private CA give verify='<CA bundle path>'; "
                "verify=False turns verification off.",
                uri=uri,
                server=self.name,
            )
            cause = exc
        except aiohttp.ClientConnectionError as exc:
            error = ServerConnectionError(
                f"{where}: cannot reach REST server {self.name!r} at {resolved.base_url} "
                f"({self._describe(exc)}). Is it running, and is its url right?",
                uri=uri,
                server=self.name,
            )
            cause = exc
        except (aiohttp.ClientError, ValueError) as exc:
            error = ToolExecutionError(f"{where}: {method} {path} failed: {self._describe(exc)}", uri=uri)
            cause = exc
        if resolved.holds_secret(str(cause)):
            raise error from None
        raise error from cause

    async def _status_error(
        self, response: aiohttp.ClientResponse, method: str, path: str, where: str, uri: str | None
    ) -> HTTPStatusError:
        try:
            raw = await response.content.read(_EXCERPT_BYTES)
        except aiohttp.ClientError:
            raw = b""
        text = self.resolved.redact(raw.decode(response.charset or "utf-8", errors="replace"))
        excerpt = text if len(text) <= BODY_EXCERPT_CHARS else f"{text[:BODY_EXCERPT_CHARS]}..."
        reason = f" {response.reason}" if response.reason else ""
        shown = f": {excerpt}" if excerpt else ""
        return HTTPStatusError(
            f"{where}: {method} {path} answered {response.status}{reason}{shown}",
            uri=uri,
            method=method,
            status_code=response.status,
            body=excerpt,
        )

    def _ssl_setting(self) -> ssl.SSLContext | bool:
        verify = self.server.verify
        if not isinstance(verify, str):
            return verify
        try:
            return ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"REST server {self.name!r}: cannot load the CA bundle {verify!r} given as verify: {exc}"
            ) from exc

    def _describe(self, exc: BaseException) -> str:
        text = str(exc)
        return self.resolved.redact(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)

    async def aclose(self) -> None:
        """Close the pooled session (if open); the next request opens a new one."""
        closer, self._closer, self._session, self._loop = self._closer, None, None, None
        if closer is not None:
            await closer.aclose()  # its finally block closes the session


async def _close_when_the_loop_ends(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Own ``session`` until closed: by :meth:`ServerSession.aclose`, or by the loop's shutdown, which closes
    every async generator still suspended (``loop.shutdown_asyncgens()``, run by ``asyncio.run()``)."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


def _credential_guard(resolved: ResolvedServer) -> tuple[ClientMiddlewareType, ...]:
    """A client middleware that keeps credential headers from leaving the server's origin on a redirect.

    aiohttp itself drops ``Authorization`` (and cookies) on a redirect to another origin, but not an API key
    header or a custom token header; this drops those too. It runs on every request and redirect hop, so it is
    installed only for servers that have such headers.
    """
    names = [name for name in resolved.secret_headers if name.lower() != "authorization"]
    if not names:
        return ()
    origin = URL(resolved.base_url).origin()

    async def guard(request: aiohttp.ClientRequest, handler: ClientHandlerType) -> aiohttp.ClientResponse:
        if request.url.origin() != origin:
            for name in names:
                request.headers.popall(name, None)
        return await handler(request)

    return (guard,)


def _dumps(value: Any) -> str:
    """The JSON text of a request body, by pydantic-core's encoder (a few times faster than ``json.dumps``)."""
    return to_json(value).decode()


def _json_body(value: Any, where: str, uri: str | None) -> bytes:
    """The JSON text of a request body. JSON has no NaN or Infinity: a body holding one is refused rather than
    sent as something the server cannot read (or, worse, silently as null)."""
    body = to_json(value)
    if b"NaN" in body or b"Infinity" in body:  # cheap first look; json.dumps then says for sure
        try:
            json.dumps(value, allow_nan=False, default=str)
        except ValueError:
            raise ToolInputError(
                f"{where}: the request body holds NaN or Infinity, which JSON cannot carry.", uri=uri
            ) from None
    return body


def _decode(body: bytes, response: aiohttp.ClientResponse) -> Any:
    if not body:
        return None
    content_type = response.content_type
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            return from_json(body)
        except ValueError as exc:
            raise ValueError(f"the response is not valid JSON ({exc})") from exc
    return body.decode(response.charset or "utf-8", errors="replace")
