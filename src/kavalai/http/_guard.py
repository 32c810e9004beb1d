"""Keeping credentials at their origin on every hop of a request, redirects included, and judging each hop.

Two ways to put the same judgement (:class:`_Hops`) on every hop:

- :func:`guarded_request`: a request class for a whole session (``aiohttp.ClientSession(request_class=...)``).
  aiohttp builds one request object per hop (the first, each redirect, a retry), so the class judges each hop as
  it is built, before it is sent. No middleware runs, so a request without a redirect pays almost nothing: the REST
  servers' sessions use it.
- :func:`origin_guard`: a client middleware, for requests whose origin differs from one request to the next (the
  fetch tools pass it per request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, TypeAlias

import aiohttp
from aiohttp.client_middlewares import ClientHandlerType, ClientMiddlewareType
from yarl import URL

__all__ = ["CREDENTIAL_HEADERS", "HopCheck", "HopRefusedError", "guarded_request", "origin_guard"]

#: Headers that always carry credentials. aiohttp drops these itself on a redirect to another origin; the guard
#: drops them too, so the rule holds whoever follows the redirect.
CREDENTIAL_HEADERS: Final = ("Authorization", "Proxy-Authorization", "Cookie")

#: Called with the URL of every hop before it is sent; raises ``PermissionError`` to refuse the hop.
HopCheck: TypeAlias = Callable[[URL], None]


class HopRefusedError(Exception):
    """A hop's :data:`HopCheck` refused it; the message is the check's.

    Not an ``OSError``: aiohttp would wrap one into a ``ClientOSError`` (and retry it) on its way out.
    """


class _Hops:
    """The judgement of one hop: the check, then the credential headers stripped unless the hop is at home."""

    __slots__ = ("_check", "_home", "_names")

    def __init__(self, origin: URL | str, secret_headers: Iterable[str], check: HopCheck | None) -> None:
        home = URL(origin)
        # An origin: scheme, host, port (the default if unsaid). raw_host: the form aiohttp's URLs carry.
        self._home = (home.scheme, home.raw_host, home.port)
        self._names = tuple(dict.fromkeys([*CREDENTIAL_HEADERS, *secret_headers]))
        self._check = check

    def judge(self, request: aiohttp.ClientRequest) -> None:
        """Refuse the hop (:class:`HopRefusedError`) or let it go, without the credentials if it leaves home."""
        url = request.url
        if self._check is not None:
            try:
                self._check(url)
            except PermissionError as exc:
                raise HopRefusedError(str(exc)) from None
        if (url.scheme, url.raw_host, url.port) != self._home:
            headers = request.headers
            for name in self._names:
                headers.popall(name, None)


def origin_guard(
    origin: URL | str, *, secret_headers: Iterable[str] = (), check: HopCheck | None = None
) -> ClientMiddlewareType:
    """A client middleware that strips credential headers from every hop whose origin is not ``origin``.

    Args:
        origin: the origin the credentials belong to (any URL of it; only scheme, host and port count).
        secret_headers: further header names that carry credentials (an API key header, a custom token).
        check: called with every hop's URL before it is sent, the first one included; a ``PermissionError`` it
            raises comes out of the request as :class:`HopRefusedError`.

    aiohttp runs a client middleware for each hop of a redirect chain, so the comparison is made against the
    origin the credentials were meant for, not the previous hop.
    """
    judge = _Hops(origin, secret_headers, check).judge

    async def guard(request: aiohttp.ClientRequest, handler: ClientHandlerType) -> aiohttp.ClientResponse:
        judge(request)
        return await handler(request)

    return guard


def guarded_request(
    origin: URL | str, *, secret_headers: Iterable[str] = (), check: HopCheck | None = None
) -> type[aiohttp.ClientRequest]:
    """A request class (``ClientSession(request_class=...)``) judging each hop as :func:`origin_guard` does.

    aiohttp builds a request object for every hop of a request (the first, each redirect, a retry) and sends
    nothing before it is built, so a hop refused here is refused before any connect; the arguments are
    :func:`origin_guard`'s. The judgement runs once the request's headers are complete (session and request
    headers, cookies, basic auth), so no credential header is added after it; a client middleware (an OAuth
    flow's) runs after it and must keep its own headers at home.
    """
    judge = _Hops(origin, secret_headers, check).judge

    class GuardedRequest(aiohttp.ClientRequest):
        """A request judged by its hop guard when built."""

        def update_expect_continue(self, expect: bool = False) -> None:
            # The last step of ClientRequest.__init__ (headers, cookies, auth and body are set by then): judging
            # here, not in an overridden __init__, spares forwarding its twenty-odd keyword arguments per hop.
            super().update_expect_continue(expect)
            judge(self)

    return GuardedRequest
