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

Workers (``kavalai serve --workers N``) listen each on a socket of their own where the kernel spreads connections
over such sockets (Linux's ``SO_REUSEPORT``, :data:`REUSE_PORT`): the parent holds the port with a socket bound but
not listening (:func:`port_for_workers`), and each worker makes its listening socket on that address
(:func:`worker_listening_socket`). Elsewhere the parent's listening socket is shared by the workers.
"""

from __future__ import annotations

import socket
import sys

__all__ = [
    "KEEP_ALIVE",
    "LIMIT_CONNECTIONS",
    "REUSE_PORT",
    "family_of",
    "listening_socket",
    "port_for_workers",
    "worker_listening_socket",
]

#: Seconds the gateway's HTTP server (``kavalai serve``) keeps an idle keep-alive connection open (uvicorn's own
#: default is 5 s). Longer than the idle time of the clients that reuse connections (node's ``fetch``/undici 4 s,
#: httpx 5 s, aiohttp 15 s, Go's ``net/http`` 90 s) and of load balancers' idle timeouts (AWS ALB 60 s), so that
#: the client always closes an idle connection first: were the server to close it first, a request the client
#: sends on it in that same instant is met by a reset (node's ``ECONNRESET``), and a ``POST`` is not retried.
KEEP_ALIVE = 120
#: Connections the gateway's HTTP server serves at once by default (each worker of ``--workers``): a request on one
#: more, or past as many requests in flight (an event stream is one), is answered 503. Below the usual limit of open
#: files (1024) that the process's backends share.
LIMIT_CONNECTIONS = 1000


def family_of(host: str) -> socket.AddressFamily:
    """``AF_INET6`` for an IPv6 literal such as ``::1``, else ``AF_INET``."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def listening_socket(host: str, port: int, *, backlog: int = 2048, reuse_port: bool = False) -> socket.socket:
    """A non-blocking TCP socket listening on ``host`` and ``port`` (``0``: a free one), with ``TCP_NODELAY``.

    Connections made before a server runs on it wait in the backlog rather than being refused. The caller owns
    the socket and closes it.

    Args:
        host: the address to listen on (an IPv4 or IPv6 literal, or a name).
        port: the port; ``0`` picks a free one.
        backlog: the length of the queue of connections not yet accepted; uvicorn's default, so that a burst of
            new connections (many sessions opening at once) is not dropped.
        reuse_port: with ``SO_REUSEPORT``, beside other such sockets of this user on the same address (workers):
            the kernel gives each new connection to one of them.

    Raises:
        OSError: the address cannot be listened on.
    """
    sock = _bound(host, port, reuse_port=reuse_port)
    try:
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


#: Whether workers listen each on a socket of their own: Linux's ``SO_REUSEPORT`` spreads new connections over
#: the listening sockets bound to one address (by a hash of the connection's addresses), each with its own queue,
#: so no worker waits on a queue that another one empties. Elsewhere the option does not balance (BSD, macOS: the
#: last socket bound gets every connection) or is missing.
REUSE_PORT: bool = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


def port_for_workers(host: str, port: int) -> socket.socket:
    """The socket the parent of workers holds on ``host`` and ``port`` (``0``: a free one) and hands to each.

    With :data:`REUSE_PORT` it is bound with ``SO_REUSEPORT`` but not listening: it holds the port (no other user
    can take it) and receives no connection; each worker listens on a socket of its own
    (:func:`worker_listening_socket`). Otherwise it is the listening socket the workers share.

    Raises:
        OSError: the address cannot be bound.
    """
    if not REUSE_PORT:
        return listening_socket(host, port)
    return _bound(host, port, reuse_port=True)


def worker_listening_socket(given: socket.socket) -> socket.socket:
    """A worker's listening socket from the one its parent gave (:func:`port_for_workers`): that one itself when
    it listens (shared), else a new one with ``SO_REUSEPORT`` on its address, ``given`` closed. The caller owns
    the socket and closes it.

    Raises:
        OSError: the address cannot be listened on.
    """
    if given.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        return given
    host, port = given.getsockname()[:2]
    try:
        return listening_socket(host, port, reuse_port=True)
    finally:
        given.close()


def _bound(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(family_of(host), socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock
