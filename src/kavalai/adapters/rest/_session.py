"""One pooled aiohttp session per REST server, and the requests sent through it.

The session comes from :class:`kavalai.http.LoopSession` (opened on first use in the running loop, closed by
:meth:`ServerSession.aclose`, which ``kernel.close()`` reaches through the adapter). Every hop is judged by the
session's last client middleware (:func:`kavalai.http.origin_guard`), which aiohttp runs for each hop, redirects
included, before it connects: the outbound gate's check (a redirect elsewhere is a URL learned from the server), and
no credential header leaves the server's origin. No request passes middlewares of its own (they would replace the
session's, guard included).

Responses are decoded here: JSON by content type, other bodies as text, an empty body (a 204, a HEAD) as
``None``; a 4xx/5xx becomes :class:`~kavalai.errors.HTTPStatusError` and aiohttp's exceptions become kavalai's
by the table of :mod:`kavalai.adapters.rest._errors`.

A foreign exception is kept as the ``__cause__`` of the kavalai error, unless its text holds one of the server's
secrets (aiohttp puts the request URL, API key query parameter included, into some of its messages): then it is
dropped, so that no traceback or log line can show the secret.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
from aiohttp import hdrs
from aiohttp.client_middlewares import ClientMiddlewareType
from aiohttp.payload import BytesPayload
from opentelemetry import context as otel_context
from opentelemetry.propagate import inject
from opentelemetry.trace import SpanKind, get_current_span
from pydantic_core import from_json, to_json
from yarl import URL

from kavalai.adapters.rest._config import ResolvedServer, RestServer
from kavalai.adapters.rest._errors import BODY_EXCERPT_CHARS, Failure, map_exception, status_error
from kavalai.adapters.rest._request import PreparedRequest
from kavalai.errors import ConfigurationError, FunctionKernelException, ResponseTooLargeError, ToolInputError
from kavalai.http import BodyTooLargeError, LoopSession, Outbound, aiohttp_session, origin_guard, read_limited
from kavalai.tracing import annotate, span, tracing_configured

__all__ = ["BODY_EXCERPT_CHARS", "ServerSession"]

#: How many redirects one request may follow.
MAX_REDIRECTS = 10
#: How many request URLs (base URL + a tool's path) a session keeps parsed: aiohttp parses a URL given as text on
#: every request. Paths with placeholders vary, so the cache stops growing here (later paths are parsed each time).
MAX_PARSED_URLS = 256


class ServerSession:
    """The connection pool of one REST server and the requests sent through it."""

    def __init__(self, server: RestServer, *, middlewares: Sequence[ClientMiddlewareType] = ()) -> None:
        self.server = server
        self._middlewares = tuple(middlewares)  # an OAuth flow's (per identity): run before the hop guard
        # Registration only records the configuration: the URL's variable is read when a session opens, credential
        # variables at every request.
        self._resolved: ResolvedServer | None = None
        self._per_request = server.credentials_per_request
        self._ssl = self._ssl_setting()
        self._pool = LoopSession(self._new_session)
        self._urls: dict[str, URL] = {}  # path -> the parsed URL under the open session's base URL

    @property
    def resolved(self) -> ResolvedServer:
        """The server's settings with URL and credentials read (read now if no session has read them yet)."""
        if self._resolved is None:
            self._resolved = self.server.resolve(env_credentials=False)
        return self._resolved

    @property
    def name(self) -> str:
        """The server name."""
        return self.server.name

    @property
    def client_session(self) -> aiohttp.ClientSession | None:
        """The aiohttp session opened last, or ``None`` before the first request and after :meth:`aclose`."""
        return self._pool.session

    def _new_session(self) -> tuple[aiohttp.ClientSession, Callable[[], Awaitable[None]] | None]:
        """A new pooled session; the URL's variable is read again (credentials from variables go per request)."""
        self._resolved = resolved = self.server.resolve(env_credentials=False)
        self._urls = {}  # the base URL was read again
        # The outbound gate: the base URL's host is the user's; a redirect elsewhere is learned from the server.
        outbound = Outbound(self.name, [resolved.base_url], kind="REST server")
        session, resolver = aiohttp_session(
            outbound,
            connector_options={"limit": self.server.max_connections, "ssl": self._ssl},
            headers=resolved.headers,
            timeout=aiohttp.ClientTimeout(total=None),  # each call's own deadline governs
            raise_for_status=False,
            # The hop guard last: it judges each hop as it leaves (an OAuth flow's token included).
            middlewares=(
                *self._middlewares,
                origin_guard(resolved.base_url, secret_headers=resolved.secret_headers, check=outbound.hop_check),
            ),
            json_serialize=_dumps,
        )
        return session, (resolver.close if resolver is not None else None)

    def send(self, request: PreparedRequest, *, uri: str | None = None) -> Coroutine[Any, Any, Any]:
        """Send ``request`` and return the decoded body; raise a kavalai error (naming ``uri``) on any failure.

        ``request.path`` is relative to the base URL, or an absolute ``http(s)://`` URL (OpenAPI specs). When a
        tracer provider is set, the request is an HTTP CLIENT span (the OpenTelemetry HTTP conventions), and the
        ``traceparent`` the server receives names it. Returns the coroutine to await (no frame of its own).
        """
        if not tracing_configured():
            return self._send(request, uri, traced=False)
        return self._send_traced(request, uri)

    async def _send_traced(self, request: PreparedRequest, uri: str | None) -> Any:
        target = URL(request.path if not request.path.startswith("/") else f"{self.resolved.base_url}{request.path}")
        attributes = {
            "http.request.method": request.method,
            "server.address": target.host or "",
            "server.port": target.port or 0,
            "url.full": self.resolved.redact(str(target.with_query(None))),
            "kavalai.rest.server": self.name,
        }
        with span(f"{request.method}", attributes, kind=SpanKind.CLIENT):
            return await self._send(request, uri, traced=True)

    async def _send(self, request: PreparedRequest, uri: str | None, *, traced: bool) -> Any:
        session = self._pool.current()
        if session is None:
            try:
                session = await self._pool.get()  # first use, after close(), or in another event loop
            except ConfigurationError as exc:  # a credential variable unset since registration: name the tool
                exc.uri = exc.uri or uri
                raise
        resolved = self.resolved
        if self._per_request:  # credentials from the environment: read for every request, so a change counts
            try:
                resolved = resolved.with_credentials(self.server.request_credentials())
            except ConfigurationError as exc:  # a credential variable unset since the last call: name the tool
                exc.uri = exc.uri or uri
                raise
        method, path = request.method, request.path
        url: URL | str = path  # an absolute URL (OpenAPI specs): aiohttp parses it
        if path.startswith("/"):
            parsed = self._urls.get(path)
            if parsed is None:
                parsed = URL(f"{resolved.base_url}{path}")
                if len(self._urls) < MAX_PARSED_URLS:
                    self._urls[path] = parsed
            url = parsed
        where = uri or f"REST server {self.name!r}"
        kwargs = _request_options(request, resolved, where, uri)
        try:
            async with session.request(method, url, max_redirects=MAX_REDIRECTS, **kwargs) as response:
                if traced:
                    annotate(get_current_span(), {"http.response.status_code": response.status})
                if response.status >= 400:
                    raise await status_error(Failure(resolved, method, path, where, uri), response)
                return _decode(await read_limited(response, self.server.max_response_bytes), response)
        except FunctionKernelException:
            raise
        except BodyTooLargeError as exc:
            raise ResponseTooLargeError(
                f"{where}: the response of {self.name!r} is larger than {exc.limit:,} bytes (max_response_bytes "
                "of the RestServer; raise it if such responses are expected).",
                uri=uri,
                limit=exc.limit,
            ) from None
        except Exception as exc:
            error = map_exception(Failure(resolved, method, path, where, uri), exc)
            if error is None:
                raise
            if resolved.holds_secret(str(exc)):
                raise error from None
            raise error from exc

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

    async def aclose(self) -> None:
        """Close the pooled session (if open); the next request opens a new one."""
        await self._pool.aclose()


def _request_options(request: PreparedRequest, resolved: ResolvedServer, where: str, uri: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if request.query or resolved.query:
        options["params"] = [*request.query, *resolved.query]
    traced = _span_possible() and get_current_span().get_span_context().is_valid
    if request.has_body and not request.form and not (request.headers or resolved.request_headers or traced):
        # The common case, no header of the request's own: the content type rides on the payload, so aiohttp merges
        # no headers dict. It wins over a Content-Type the server's default headers set, as the dict's does.
        options["data"] = BytesPayload(_json_body(request.body, where, uri), content_type=_JSON)
        if resolved.content_type_set:
            options["headers"] = _JSON_HEADERS
        return options
    headers = dict(request.headers) if request.headers else {}
    if resolved.request_headers:
        headers.update(resolved.request_headers)
    if request.has_body and request.form:
        options["data"] = urlencode(request.body).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif request.has_body:
        options["data"] = _json_body(request.body, where, uri)
        headers["Content-Type"] = _JSON
    if traced:  # a traced call: the server continues the trace
        inject(headers)
    if headers:
        options["headers"] = headers
    return options


_JSON: Final = "application/json"
_N: Final = ord("N")
_I: Final = ord("I")
_JSON_HEADERS: Final = MappingProxyType({"Content-Type": _JSON})


def _span_possible() -> bool:
    """Whether a span may be current: false while OpenTelemetry's current context is empty (no span is set in it,
    so none can be valid), read through the public ``get_current()``: two small calls instead of the span lookup."""
    return bool(otel_context.get_current())


def _dumps(value: Any) -> str:
    """The JSON text of a request body, by pydantic-core's encoder (a few times faster than ``json.dumps``)."""
    return to_json(value).decode()


def _json_body(value: Any, where: str, uri: str | None) -> bytes:
    """The JSON text of a request body. JSON has no NaN or Infinity: a body holding one is refused rather than
    sent as something the server cannot read (or, worse, silently as null)."""
    body = to_json(value)
    # A first look in three steps, cheapest first: a byte 'N' or 'I' (an int needle: a memchr, where a bytes needle
    # costs five times more), then the words, then json.dumps says for sure (the words may be inside a string).
    if (_N in body or _I in body) and (b"NaN" in body or b"Infinity" in body):
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
    # The common answer's header as sent, compared before aiohttp parses it (a parse per response otherwise).
    content_type = response.headers.get(hdrs.CONTENT_TYPE)
    if content_type != _JSON:
        content_type = response.content_type
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            return from_json(body)
        except ValueError as exc:
            raise ValueError(f"the response is not valid JSON ({exc})") from exc
    try:
        return body.decode(response.charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name in the header
        return body.decode("utf-8", errors="replace")
