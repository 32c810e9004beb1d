"""The one place the project makes a listening TCP socket (the gateway, the OAuth redirect listener, the demo
servers, the test servers), so that every connection it accepts sends small writes at once.

A socket created with protocol 0 accepts connections whose ``proto`` is 0, and asyncio sets ``TCP_NODELAY`` only on
``IPPROTO_TCP`` sockets: Nagle's algorithm then holds a response's second segment (an SSE event after its headers)
until the client's delayed ACK, about 40 ms a call. Here the socket is made as ``IPPROTO_TCP`` and ``TCP_NODELAY``
is set on it too (Linux copies it to the connections it accepts), so neither asyncio nor the kernel can leave a
connection with Nagle on. ``tests/test_listen.py`` finds every ``listen()`` in the source and fails when one is
made anywhere else, and checks the accepted connections of every kind of server the project starts.

A server given a host and port instead of a socket (aiohttp's ``TCPSite``, asyncio's ``create_server``) makes its
own socket from ``getaddrinfo``, which answers ``IPPROTO_TCP``: asyncio sets ``TCP_NODELAY`` there by itself.

How long an accepted connection may stay idle is :data:`KEEP_ALIVE`: longer than clients keep theirs.
"""

from __future__ import annotations

import socket

__all__ = ["KEEP_ALIVE", "family_of", "listening_socket"]

#: Seconds the gateway's HTTP server (``kavalai serve``) keeps an idle keep-alive connection open (uvicorn's own
#: default is 5 s). Longer than the idle time of the clients that reuse connections (node's ``fetch``/undici 4 s,
#: httpx 5 s, aiohttp 15 s, Go's ``net/http`` 90 s) and of load balancers' idle timeouts (AWS ALB 60 s), so that
#: the client always closes an idle connection first: were the server to close it first, a request the client
#: sends on it in that same instant is met by a reset (node's ``ECONNRESET``), and a ``POST`` is not retried.
KEEP_ALIVE = 120


def family_of(host: str) -> socket.AddressFamily:
    """``AF_INET6`` for an IPv6 literal such as ``::1``, else ``AF_INET``."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def listening_socket(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A non-blocking TCP socket listening on ``host`` and ``port`` (``0``: a free one), with ``TCP_NODELAY``.

    Connections made before a server runs on it wait in the backlog rather than being refused. The caller owns
    the socket and closes it.

    Args:
        host: the address to listen on (an IPv4 or IPv6 literal, or a name).
        port: the port; ``0`` picks a free one.
        backlog: the length of the queue of connections not yet accepted; uvicorn's default, so that a burst of
            new connections (many sessions opening at once) is not dropped.

    Raises:
        OSError: the address cannot be listened on.
    """
    sock = socket.socket(family_of(host), socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
