"""The gateway acknowledges what it reads at once, so that a client with Nagle's algorithm on is not held up.

A client that writes a request in two pieces (its headers, then its body) on a socket without ``TCP_NODELAY``
sends the second piece only once the first is acknowledged. A server that has been answering on the connection is
in Linux's "ping-pong" mode, where it delays that acknowledgement (40 ms or more) in the hope of sending it with
data; it has no data to send until the body comes: each call then stalls for the delayed-ACK timer, against any
server (FastMCP's too). Setting ``TCP_QUICKACK`` after each read leaves that mode and sends a pending
acknowledgement at once (Linux clears the option again by itself, hence after every read), so the body follows
without waiting. The cost is one ``setsockopt`` a read. Elsewhere than Linux the option does not exist and the
protocol is uvicorn's own.

``serve_http`` runs uvicorn with :data:`QuickAckProtocol`; ``tests/serve/test_quickack.py`` looks at the accepted
connection's state while a request is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any, Final

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["QuickAckProtocol"]

_QUICKACK: Final[int | None] = getattr(socket, "TCP_QUICKACK", None)  # Linux only
_INET: Final = (socket.AF_INET, socket.AF_INET6)


class _QuickAck(AutoHTTPProtocol):  # type: ignore[misc,valid-type]  # uvicorn's choice of protocol, a variable
    """uvicorn's HTTP protocol (httptools' or h11's, as uvicorn picks), acknowledging each read at once."""

    _acking: Any = None  # the connection's socket (asyncio's TransportSocket), when it is a TCP one

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Note the connection's TCP socket, then let uvicorn take the connection."""
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in _INET:
            self._acking = sock
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        """Acknowledge what was read (a delayed acknowledgement goes now), then let uvicorn parse it."""
        if self._acking is not None:
            with contextlib.suppress(OSError):  # a connection already reset: uvicorn learns it from the transport
                self._acking.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        super().data_received(data)


#: The HTTP protocol class ``serve_http`` gives uvicorn: acknowledging each read at once where Linux allows it.
QuickAckProtocol: Final[type[asyncio.Protocol]] = _QuickAck if _QUICKACK is not None else AutoHTTPProtocol
