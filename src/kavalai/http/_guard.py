"""Keeping credentials at their origin on every hop of a request, redirects included."""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
    home_url = URL(origin)
    home = (home_url.scheme, home_url.host, home_url.port)  # an origin: scheme, host, port (the default if unsaid)
    names = tuple(dict.fromkeys([*CREDENTIAL_HEADERS, *secret_headers]))

    async def guard(request: aiohttp.ClientRequest, handler: ClientHandlerType) -> aiohttp.ClientResponse:
        url = request.url
        if check is not None:
            try:
                check(url)
            except PermissionError as exc:
                raise HopRefusedError(str(exc)) from None
        if (url.scheme, url.host, url.port) != home:
            for name in names:
                request.headers.popall(name, None)
        return await handler(request)

    return guard
