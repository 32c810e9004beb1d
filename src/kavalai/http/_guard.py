"""Keeping credentials at their origin on every hop of a request, redirects included, and judging each hop.

One judgement (:class:`_Hops`), put on every hop by :func:`origin_guard`, a client middleware: aiohttp's supported
per-hop hook. A session whose requests all belong to one origin carries it for the whole session (the REST servers,
the demo's browser); requests whose origin differs from one to the next pass it per request (the fetch tools).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Final, TypeAlias

import aiohttp
from aiohttp.client_middlewares import ClientHandlerType, ClientMiddlewareType
from yarl import URL

__all__ = ["CREDENTIAL_HEADERS", "HopCheck", "HopRefusedError", "origin_guard"]

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

    Put it on a session (``ClientSession(middlewares=(..., guard))``: every request of the session; last in the
    chain, it judges the hop as the other middlewares leave it, an OAuth flow's token included) or on one request
    (``session.request(..., middlewares=(guard,))``, which replaces the session's). aiohttp runs the middlewares for
    each hop of a redirect chain (and for its one retry on a dropped keep-alive connection), once the hop's request
    is built (session and request headers, cookies, basic auth) and before it connects, so the comparison is made
    against the origin the credentials were meant for, not the previous hop, and a refused hop is never sent.
    """
    judge = _Hops(origin, secret_headers, check).judge

    def guard(request: aiohttp.ClientRequest, handler: ClientHandlerType) -> Awaitable[aiohttp.ClientResponse]:
        # Not a coroutine function: the hop is judged when aiohttp calls the middleware, and the handler's own
        # awaitable is returned, so a request pays for no frame of the guard's.
        judge(request)
        return handler(request)

    return guard
