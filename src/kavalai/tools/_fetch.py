"""Guarded, pooled HTTP fetching shared by the bundled ``http`` and ``web`` tools.

One :class:`GuardedClient` per registered group owns one aiohttp ``ClientSession``,
created lazily in the running loop and closed by the kernel's ``close()`` (the next call creates a new one). Every
hop of a request, redirects included, passes the SSRF guard of :mod:`kavalai.http._netguard` twice: :func:`check_url`
in :func:`kavalai.http.origin_guard` before it is sent, and the resolver the session dials through; the same guard
drops credential headers on a hop to another origin. The body is read by :func:`kavalai.http.read_limited`,
refused as soon as it exceeds the byte cap.

Failures are raised as built-in exceptions whose message is meant for a model: ``PermissionError`` (refused by the
guard), ``ValueError`` (a bad URL or body, a response over the cap), ``ConnectionError`` (the transport failed,
too many redirects) and ``TimeoutError``.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import anyio
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict
from yarl import URL

from kavalai.errors import ConfigurationError
from kavalai.http import (
    BodyTooLargeError,
    GuardedResolver,
    HopRefusedError,
    IPNetwork,
    LoopSession,
    aiohttp_session,
    check_url,
    origin_guard,
    parse_networks,
    read_limited,
    shown_url,
)
from kavalai.kernel import required_seconds
from kavalai.tools._register import check_limits

__all__ = ["DEFAULT_USER_AGENT", "FetchConfig", "Fetched", "GuardedClient", "open_client", "parse_url"]

DEFAULT_USER_AGENT: Final = "kavalai-tools/0.1"
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_FORBIDDEN_IN_HEADERS: Final = frozenset("\r\n\x00")


@dataclass(frozen=True, slots=True)
class FetchConfig:
    """The limits and guard settings of one registered group.

    Attributes:
        allow_private_networks: lift the SSRF guard entirely (only for trusted callers and tests).
        allowed_networks: networks let through despite the guard.
        resolver: the DNS resolver to dial through; the guard wraps it. ``None``: aiohttp's default.
        max_redirects: how many redirects one request may follow.
        max_response_bytes: the largest (decompressed) body accepted.
        user_agent: the ``User-Agent`` sent unless the caller sets one.
    """

    allow_private_networks: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolver: AbstractResolver | None = None
    max_redirects: int = 5
    max_response_bytes: int = 2 * 1024 * 1024
    user_agent: str = DEFAULT_USER_AGENT


@dataclass(frozen=True, slots=True)
class Fetched:
    """A complete response: the last hop's status, headers and body."""

    status: int
    reason: str
    url: str
    headers: dict[str, str]
    body: bytes
    content_type: str
    charset: str | None
    redirects: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The body decoded with its declared charset (UTF-8 otherwise), undecodable bytes replaced."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # an unknown charset name in the header
            return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON when it is JSON (by content type or by shape), else ``None``."""
        text = self.text()
        looks_like_json = text.lstrip()[:1] in ("{", "[")
        if "json" not in self.content_type and not looks_like_json:
            return None
        try:
            return jsonlib.loads(text)
        except ValueError:
            return None


def open_client(
    group: str,
    *,
    allow_private_networks: bool,
    allowed_networks: Iterable[str],
    resolver: AbstractResolver | None,
    max_redirects: int,
    max_response_bytes: int,
    user_agent: str,
) -> GuardedClient:
    """Check a group's settings and create its client (the caller has ``kernel.close()`` close it).

    Raises:
        ConfigurationError: an ``allowed_networks`` entry that is not a network, or a limit out of range.
    """
    try:
        networks = parse_networks(allowed_networks)
    except ValueError as exc:
        raise ConfigurationError(f"Cannot register the {group} tools: {exc}") from exc
    if max_redirects < 0:
        raise ConfigurationError(
            f"Cannot register the {group} tools: max_redirects must be at least 0, got {max_redirects!r}."
        )
    check_limits(group, max_response_bytes=max_response_bytes)
    config = FetchConfig(
        allow_private_networks=allow_private_networks,
        allowed_networks=networks,
        resolver=resolver,
        max_redirects=max_redirects,
        max_response_bytes=max_response_bytes,
        user_agent=user_agent,
    )
    return GuardedClient(config)


def parse_url(url: str) -> URL:
    """Parse an absolute http(s) URL or raise ``ValueError`` saying what is wrong with it."""
    shown = shown_url(url) if isinstance(url, str) else url  # quoted without the password it may carry
    try:
        parsed = URL(url)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{shown!r} is not a valid URL: {shown_url(str(exc))}") from None
    if not parsed.is_absolute() or parsed.scheme not in ("http", "https"):
        raise ValueError(f"{shown!r} is not an absolute http:// or https:// URL.")
    return parsed


class GuardedClient:
    """Sends requests through the guard with one pooled session per event loop (:class:`kavalai.http.LoopSession`)."""

    def __init__(self, config: FetchConfig) -> None:
        self.config = config
        self._pool = LoopSession(self._new_session)

    async def request(
        self,
        method: str,
        url: URL,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        body: str | None = None,
        timeout: float,
    ) -> Fetched:
        """Send ``method url`` following redirects through the guard, within ``timeout`` seconds (the one rule of
        ``kavalai.kernel.limit_seconds``: a ``ValueError`` for a value that is not positive seconds, more than a year
        clamped); see the module docstring for failures."""
        seconds = required_seconds(timeout, what="timeout")
        if json is not None and body is not None:
            raise ValueError("Give either a JSON body (json) or a text body (body), not both.")
        for name, value in (headers or {}).items():
            if _FORBIDDEN_IN_HEADERS.intersection(name + value) or not name.strip():
                raise ValueError(
                    f"Refused header {name!r}: a header needs a name, and its name and value may not contain line "
                    "breaks or NUL bytes."
                )
        try:
            with anyio.fail_after(seconds):
                return await self._send(method.upper(), url, headers, json, body)
        except TimeoutError as exc:
            raise TimeoutError(f"No complete response from {url} within {seconds:g} s.") from exc

    async def aclose(self) -> None:
        """Close the session and its resolver; the next request opens new ones."""
        await self._pool.aclose()

    async def _send(
        self, method: str, url: URL, headers: Mapping[str, str] | None, json: Any, body: str | None
    ) -> Fetched:
        self._check(url)
        session = await self._pool.get()
        sent: CIMultiDict[str] = CIMultiDict(headers or {})
        sent.setdefault("User-Agent", self.config.user_agent)
        payload = _payload(json, body, sent)
        limit = self.config.max_redirects
        # aiohttp follows the redirects (303 and POST-on-301/302 become GET); the guard checks every hop.
        options: dict[str, Any] = {
            "allow_redirects": limit > 0,
            "max_redirects": limit + 1,  # aiohttp counts the redirect that would pass the limit
            "middlewares": (origin_guard(url, check=self._check),),
        }
        async with (
            _transport_errors(url, limit),
            session.request(method, url, headers=sent, **options, **payload) as response,
        ):
            if limit == 0 and _redirect_target(response) is not None:
                raise ConnectionError(f"Stopped at {url}: more than 0 redirects (max_redirects).")
            return await self._read(response)

    def _check(self, url: URL) -> None:
        if url.scheme not in ("http", "https"):
            raise PermissionError(f"Refused {url}: only http:// and https:// URLs may be fetched.")
        if not self.config.allow_private_networks:
            check_url(url, self.config.allowed_networks)

    async def _read(self, response: aiohttp.ClientResponse) -> Fetched:
        try:
            body = await read_limited(response, self.config.max_response_bytes)
        except BodyTooLargeError as exc:
            raise ValueError(
                f"Refused the response from {response.url}: it is larger than the {exc.limit}-byte limit "
                f"(max_response_bytes; {exc.detail})."
            ) from None
        return Fetched(
            status=response.status,
            reason=response.reason or "",
            url=str(response.url),
            headers=_flat_headers(response),
            body=body,
            content_type=response.content_type,
            charset=response.charset,
            redirects=[str(hop.url) for hop in response.history[1:]]
            + ([str(response.url)] if response.history else []),
        )

    def _new_session(self) -> tuple[aiohttp.ClientSession, Callable[[], Awaitable[None]] | None]:
        resolver, owned = self._make_resolver()
        session, _ = aiohttp_session(
            resolver=resolver,
            connector_options={"limit": 64, "ttl_dns_cache": 10},
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),  # each request's own timeout governs (request())
        )
        return session, (resolver.close if owned else None)

    def _make_resolver(self) -> tuple[AbstractResolver, bool]:
        """The resolver to dial through, and whether this client must close it (never a caller's own)."""
        inner = self.config.resolver
        created = inner is None
        if inner is None:
            inner = aiohttp.DefaultResolver()
        if self.config.allow_private_networks:
            return inner, created
        return GuardedResolver(inner, self.config.allowed_networks, owns_inner=created), True


@asynccontextmanager
async def _transport_errors(url: URL, max_redirects: int) -> AsyncIterator[None]:
    """Translate aiohttp's errors for a request into the built-in exceptions the tools raise (one table, in order:
    the first matching branch wins)."""
    try:
        yield
    except HopRefusedError as exc:
        raise PermissionError(str(exc)) from None
    except aiohttp.TooManyRedirects as exc:
        last = exc.history[-1].url if exc.history else url
        raise ConnectionError(f"Stopped at {last}: more than {max_redirects} redirects (max_redirects).") from None
    except aiohttp.NonHttpUrlRedirectClientError as exc:
        target = exc.args[0] if exc.args else "the redirect"
        raise PermissionError(f"Refused {target}: only http:// and https:// URLs may be fetched.") from None
    except aiohttp.InvalidURL as exc:
        target = exc.args[0] if exc.args else ""
        raise ValueError(f"{url} redirected to an invalid URL {str(target)!r}: {exc}") from exc
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, PermissionError):
            raise PermissionError(f"Refused {exc.host}: {exc.os_error}.") from exc
        reason = exc.os_error.strerror or str(exc.os_error) or type(exc.os_error).__name__
        raise ConnectionError(f"Could not connect to {url}: {reason}.") from exc
    except aiohttp.ClientError as exc:
        raise ConnectionError(f"Request to {url} failed: {type(exc).__name__}: {exc}") from exc


def _payload(json: Any, body: str | None, headers: CIMultiDict[str]) -> dict[str, Any]:
    if json is not None:
        return {"json": json}
    if body is not None:
        headers.setdefault("Content-Type", "text/plain; charset=utf-8")
        return {"data": body.encode("utf-8")}
    return {}


def _redirect_target(response: aiohttp.ClientResponse) -> URL | None:
    location = response.headers.get("Location")
    if response.status not in _REDIRECTS or not location:
        return None
    try:
        return response.url.join(URL(location))
    except ValueError as exc:
        raise ValueError(f"{response.url} redirected to an invalid URL {location!r}: {exc}") from exc


def _flat_headers(response: aiohttp.ClientResponse) -> dict[str, str]:
    flat: dict[str, str] = {}
    for name, value in response.headers.items():
        key = name.lower()
        flat[key] = f"{flat[key]}, {value}" if key in flat else value
    return flat
