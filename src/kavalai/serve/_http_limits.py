"""The gateway's bounds on a request's head: its size, and the time its client takes to send it.

uvicorn's httptools protocol reads a request's line and headers without any limit of size or time: a client that
sent 32 MB of headers had them all held in memory (the process grew by as much), and one that sends its head a
byte at a time (slowloris), or opens a connection and sends nothing, holds a connection and its memory for good
(uvicorn's keep-alive timer runs only between requests). Here:

- a request's line and headers are at most :data:`HEAD_BYTES` (64 KiB; nginx's default allows 32 KiB, node's
  16 KiB): past it the client is answered ``431`` and the connection closed, before more is held;
- a request's head must arrive within :data:`HEAD_SECONDS` of its first byte: past it the client is answered
  ``408`` and the connection closed;
- a new connection that sends nothing is closed after the keep-alive time, as an idle one between requests is.

The body is bounded by the MCP SDK (4 MiB, ``413``). uvicorn's h11 protocol, used when httptools is missing,
bounds a head's size itself (16 KiB) but not its time; it is then used as it is.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from kavalai.serve._quickack import QuickAckProtocol

__all__ = ["HEAD_BYTES", "HEAD_SECONDS", "BoundedProtocol"]

#: The most bytes a request's target and headers may take (names and values).
HEAD_BYTES: Final = 64 * 1024
#: Seconds a client has, from a request's first byte, to send the rest of its line and headers.
HEAD_SECONDS: Final = 30.0

_TOO_LARGE: Final = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TIMED_OUT: Final = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
#: Seconds a refused connection is still read (and what is read dropped) after the answer, before it is closed: a
#: socket closed with unread data is reset, and the reset can reach the client before the answer (nginx's
#: "lingering close").
_LINGER: Final = 2.0


class _Bounded(QuickAckProtocol):  # type: ignore[misc,valid-type]  # a variable: httptools' protocol here
    """:data:`QuickAckProtocol` (httptools'), with each request's head bounded in size and time.

    A head's size is counted twice, and either count past :data:`HEAD_BYTES` refuses it: the target and the headers
    the parser has handed over (exact), and the reads that fell wholly within a head (the parser keeps a header
    still incomplete to itself: one endless header line is counted this way)."""

    _in_head = False
    _head_seen = 0
    _head_read = 0
    _head_timer: asyncio.TimerHandle | None = None
    _too_large = False
    _refused = False
    timeout_keep_alive_task: asyncio.TimerHandle | None
    loop: asyncio.AbstractEventLoop
    timeout_keep_alive: float
    transport: asyncio.Transport

    def connection_made(self, transport: Any) -> None:
        """Take the connection; until its first request begins it may stay idle as long as between requests."""
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the head's clock, then let uvicorn end the connection."""
        self._stop_clock()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; a read that began and ended within a head counts toward its size. A refused
        connection's reads are dropped."""
        if self._refused:
            return
        within = self._in_head
        super().data_received(data)
        if within and self._in_head and not self._refused:
            self._head_read += len(data)
            if self._head_read > HEAD_BYTES:
                self._refuse()

    def on_message_begin(self) -> None:
        """A request's first byte: its head's clock starts."""
        super().on_message_begin()
        self._in_head = True
        self._head_seen = self._head_read = 0
        self._stop_clock()
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._timed_out)

    def on_url(self, url: bytes) -> None:
        """Count the target's bytes."""
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count a header's bytes."""
        self._count(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """The head is complete: its clock stops and the request goes on."""
        self._in_head = False
        self._stop_clock()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        """A head past :data:`HEAD_BYTES` is answered 431 (the parser stopped at it); another parser error as
        uvicorn answers it."""
        if self._too_large:
            self._refuse()
        else:
            super().send_400_response(msg)

    def _count(self, size: int) -> None:
        self._head_seen += size
        if self._head_seen > HEAD_BYTES:
            self._too_large = True
            raise OverflowError("request head too large")  # stops the parser: uvicorn calls send_400_response

    def _refuse(self, answer: bytes = _TOO_LARGE) -> None:
        """Answer ``answer``, end the sending side, drop what still comes for :data:`_LINGER` seconds, then close."""
        self._refused = True
        self._in_head = False
        self._stop_clock()
        transport = self.transport
        if transport.is_closing():
            return
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
            self.loop.call_later(_LINGER, transport.close)
        else:
            transport.close()

    def _timed_out(self) -> None:
        self._head_timer = None
        self._refuse(_TIMED_OUT)

    def _stop_clock(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None


#: The HTTP protocol class ``serve_http`` gives uvicorn: :data:`QuickAckProtocol` with bounded request heads (when it
#: is httptools' protocol; else as it is).
BoundedProtocol: Final[type[asyncio.Protocol]] = (
    _Bounded if any(kind.__name__ == "HttpToolsProtocol" for kind in QuickAckProtocol.__mro__) else QuickAckProtocol
)
