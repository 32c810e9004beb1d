"""The gateway's bounds on a connection: a request's head (its size and time), its body's time, and how long a
write to a client that does not read may wait.

uvicorn's httptools protocol reads a request's line and headers without any limit of size or time: a client that
sent 32 MB of headers had them all held in memory (the process grew by as much), and one that sends its head a
byte at a time (slowloris), or opens a connection and sends nothing, holds a connection and its memory for good
(uvicorn's keep-alive timer runs only between requests). A body trickled a byte at a time held its request (a task)
as long as the client liked, and a response written to a client that never reads (an event stream left unread)
waited for the client for ever, holding its task and what was written. Here:

- a request's line and headers are at most :data:`HEAD_BYTES` (64 KiB; nginx's default allows 32 KiB, node's
  16 KiB): past it the client is answered ``431`` and the connection closed, before more is held;
- a request's head must arrive within :data:`HEAD_SECONDS` of its first byte: past it the client is answered
  ``408`` and the connection closed;
- a request's body must arrive within :attr:`Bounds.body_seconds` of its head (30 s by default): past it the
  client is answered ``408`` and the connection closed, and the request sees its client gone;
- a write the client does not take (the connection's send buffer full) may wait :attr:`Bounds.send_seconds`
  (30 s by default; nginx's ``send_timeout`` is 60 s): past it the connection is reset, and the response's task
  sees its client gone. A client that reads slowly but reads is not cut: the clock restarts whenever it takes data;
- a new connection that sends nothing is closed after the keep-alive time, as an idle one between requests is;
- the probe paths (:attr:`Bounds.probes`: ``/healthz`` and ``/readyz`` for ``serve_http``) are served even past
  ``limit_connections``, which uvicorn checks before the application and answers ``503`` for any path: a replica
  at its limit is busy, not unhealthy, and a load balancer reading its probe's 503 would take it out of service
  (and put the load on the others). A probe is answered at once, with nothing awaited, so this lets no work in.

A clock starts only when a read leaves a request incomplete (a request whose head and body come in one read, the
usual case, starts none), and a write's clock only when the transport's buffer passes its high-water mark. The
body's size is bounded by the MCP SDK (4 MiB, ``413``). uvicorn's h11 protocol, used when httptools is missing,
bounds a head's size itself (16 KiB) but not its time; it is then used as it is. Both seconds go through the one
seconds rule (:func:`~kavalai.kernel.required_seconds`).

Each request's scope also carries :data:`CLIENT_GONE`, by which the request's task learns at once that its client
is gone (the connection lost, reset or refused) without a task of its own waiting for ``http.disconnect``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import uvicorn

from kavalai.kernel import required_seconds
from kavalai.serve._quickack import QuickAckProtocol

__all__ = [
    "BODY_SECONDS",
    "CLIENT_GONE",
    "HEAD_BYTES",
    "HEAD_SECONDS",
    "SEND_SECONDS",
    "BoundedProtocol",
    "Bounds",
    "bound",
]

#: The most bytes a request's target and headers may take (names and values).
HEAD_BYTES: Final = 64 * 1024
#: Seconds a client has, from a request's first byte, to send the rest of its line and headers.
HEAD_SECONDS: Final = 30.0
#: Seconds a client has by default, from a request's head, to send its body.
BODY_SECONDS: Final = 30.0
#: Seconds a write may wait by default for a client that takes none of it.
SEND_SECONDS: Final = 30.0

_TOO_LARGE: Final = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TIMED_OUT: Final = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
#: Seconds a refused connection is still read (and what is read dropped) after the answer, before it is closed: a
#: socket closed with unread data is reset, and the reset can reach the client before the answer (nginx's
#: "lingering close").
_LINGER: Final = 2.0
#: ``SO_LINGER`` on, 0 seconds: closing the socket resets the connection.
_RESET: Final = struct.pack("ii", 1, 0)
#: The scope extension telling a request that its client is gone: a function taking a callback (``None`` takes it
#: back), which is called once when the connection is lost or refused, or at once when it already is.
CLIENT_GONE: Final = "kavalai.client_gone"
#: The attribute of a uvicorn config :func:`bound` sets.
_ATTRIBUTE: Final = "kavalai_bounds"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The seconds a connection of the gateway is given (each under the one seconds rule: a positive number, more
    than a year clamped to a year).

    Attributes:
        body_seconds: from a request's head to the end of its body.
        send_seconds: a write may wait this long for a client that takes none of it.
        probes: paths served even past the connection limit (answered by the application at once: probes).
    """

    body_seconds: float = BODY_SECONDS
    send_seconds: float = SEND_SECONDS
    probes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "body_seconds", required_seconds(self.body_seconds, what="body_timeout"))
        object.__setattr__(self, "send_seconds", required_seconds(self.send_seconds, what="send_timeout"))


def bound(config: uvicorn.Config, bounds: Bounds) -> uvicorn.Config:
    """``config``, whose connections (of :data:`BoundedProtocol`) are given ``bounds``."""
    setattr(config, _ATTRIBUTE, bounds)
    return config


_DEFAULT: Final = Bounds()


class _Bounded(QuickAckProtocol):  # type: ignore[misc,valid-type]  # a variable: httptools' protocol here
    """:data:`QuickAckProtocol` (httptools'), with each request's head bounded in size and time, its body in time,
    and a write's wait for a client that does not read in time.

    A head's size is counted twice, and either count past :data:`HEAD_BYTES` refuses it: the target and the headers
    the parser has handed over (exact), and the reads that fell wholly within a head (the parser keeps a header
    still incomplete to itself: one endless header line is counted this way). The exact count is made only when
    the reads a head overlaps add up to more than :data:`HEAD_BYTES` (a head is no larger than they are): a request
    arriving in one read of less is never counted, header by header."""

    _in_head = False
    _in_body = False
    _head_read = 0
    _head_bound = 0
    _reading = 0
    url: bytes
    headers: list[tuple[bytes, bytes]]
    _clock: asyncio.TimerHandle | None = None
    _send_clock: asyncio.TimerHandle | None = None
    _too_large = False
    _refused = False
    _bounds: Bounds = _DEFAULT
    _watching: dict[Any, Callable[[], None]] | None = None  # a request's cycle: its client-gone callback
    scope: dict[str, Any]
    limit_concurrency: int | None
    connections: set[Any]
    tasks: set[Any]
    root_path: str
    timeout_keep_alive_task: asyncio.TimerHandle | None
    loop: asyncio.AbstractEventLoop
    timeout_keep_alive: float
    transport: asyncio.Transport
    config: uvicorn.Config
    cycle: Any

    def connection_made(self, transport: Any) -> None:
        """Take the connection; until its first request begins it may stay idle as long as between requests."""
        super().connection_made(transport)
        self._bounds = getattr(self.config, _ATTRIBUTE, _DEFAULT)
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clocks, then let uvicorn end the connection; a request watching its client is told."""
        self._stop_clock()
        self._stop_send_clock()
        super().connection_lost(exc)
        self._tell_gone()

    def _watching_for(self, cycle: Any) -> Callable[[Callable[[], None] | None], None]:
        """The :data:`CLIENT_GONE` of ``cycle``'s request (a pipelined request has its own)."""

        def watch(callback: Callable[[], None] | None) -> None:
            watching = self._watching = self._watching or {}
            if callback is None:
                watching.pop(cycle, None)
            elif cycle.disconnected or self.transport.is_closing():
                callback()
            else:
                watching[cycle] = callback

        return watch

    def _tell_gone(self) -> None:
        """Every request watching its client is told it is gone (once)."""
        watching, self._watching = self._watching, None
        for callback in (watching or {}).values():
            callback()

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; a read that began and ended within a head counts toward its size. A read that leaves a
        request incomplete starts its head's or its body's clock (when none runs). A refused connection's reads
        are dropped."""
        if self._refused:
            return
        within = self._in_head
        self._reading = len(data)
        if within:
            self._head_bound += len(data)
        super().data_received(data)
        if not self._refused:  # (the parser may have refused it)
            self._read(len(data) if within else 0)

    def _read(self, within_head: int) -> None:
        """After a read (``within_head`` bytes of it began within a head): count them if the head goes on, and
        start the clock of a request left incomplete."""
        if self._in_head:
            self._head_read += within_head
            if self._head_read > HEAD_BYTES or (self._head_bound > HEAD_BYTES and self._head_size() > HEAD_BYTES):
                self._refuse()
                return
        if self._clock is None and (self._in_head or self._in_body):
            seconds = HEAD_SECONDS if self._in_head else self._bounds.body_seconds
            self._clock = self.loop.call_later(seconds, self._timed_out)

    def on_message_begin(self) -> None:
        """A request's first byte: its head begins."""
        super().on_message_begin()
        self._in_head = True
        self._head_read = 0
        self._head_bound = self._reading  # the head's part of this read is no larger than the read

    def on_headers_complete(self) -> None:
        """The head is complete: past :data:`HEAD_BYTES` it is refused (the parser stops at it); else its clock
        stops, the body's begins (at the end of the read), and the request goes on."""
        if self._head_bound > HEAD_BYTES and self._head_size() > HEAD_BYTES:
            self._too_large = True
            raise OverflowError("request head too large")  # stops the parser: uvicorn calls send_400_response
        self._in_head = False
        self._in_body = True
        self._stop_clock()
        limit = self.limit_concurrency
        exempt = limit is not None and self._at_limit(limit) and self._probe()
        if exempt:  # uvicorn reads the limit in the call below: a probe is let past it (see the module's notes)
            self.limit_concurrency = None
        try:
            super().on_headers_complete()
        finally:
            self.limit_concurrency = limit
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # (not: an upgrade, which makes no cycle)
            self.scope["extensions"] = {CLIENT_GONE: self._watching_for(cycle)}

    def _at_limit(self, limit: int) -> bool:
        """Whether uvicorn would answer this request 503 (its own test)."""
        return len(self.connections) >= limit or len(self.tasks) >= limit

    def _probe(self) -> bool:
        """Whether this request's path (as uvicorn will put it in the scope) is one of :attr:`Bounds.probes`."""
        import httptools  # present: this protocol is httptools' (see BoundedProtocol)

        try:
            raw = httptools.parse_url(self.url).path
        except httptools.HttpParserInvalidURLError:
            return False  # uvicorn refuses it as it would
        path = raw.decode("ascii", "replace")
        if "%" in path:
            path = urllib.parse.unquote(path)
        return self.root_path + path in self._bounds.probes

    def on_message_complete(self) -> None:
        """The body is complete: its clock stops."""
        self._in_body = False
        self._stop_clock()
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        """A head past :data:`HEAD_BYTES` is answered 431 (the parser stopped at it); another parser error as
        uvicorn answers it."""
        if self._too_large:
            self._refuse()
        else:
            super().send_400_response(msg)

    def pause_writing(self) -> None:
        """The client takes no more for now: a write may wait :attr:`Bounds.send_seconds` for it."""
        super().pause_writing()
        if self._send_clock is None:
            self._send_clock = self.loop.call_later(self._bounds.send_seconds, self._stalled)

    def resume_writing(self) -> None:
        """The client took what was written: the write's clock stops."""
        self._stop_send_clock()
        super().resume_writing()

    def _head_size(self) -> int:
        """The bytes of the target and the headers the parser has handed over."""
        return len(self.url) + sum(len(name) + len(value) for name, value in self.headers)

    def _refuse(self, answer: bytes = _TOO_LARGE) -> None:
        """Answer ``answer``, end the sending side, drop what still comes for :data:`_LINGER` seconds, then close.
        A request already handed to the application sees its client gone at once."""
        self._refused = True
        self._in_head = self._in_body = False
        self._stop_clock()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the application's next receive is http.disconnect, its sends are dropped
            cycle.message_event.set()
            self._tell_gone()
            if cycle.response_started:  # an answer is on its way: no other can be written before it ends
                self.transport.abort()
                return
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
        self._clock = None
        self._refuse(_TIMED_OUT)

    def _stalled(self) -> None:
        """A write waited :attr:`Bounds.send_seconds` for a client that took none of it: the connection is reset."""
        self._send_clock = None
        self._refused = True
        sock = self.transport.get_extra_info("socket")
        if sock is not None:  # a reset, not a close: the unsent bytes are dropped, not kept by the system to send
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        self.transport.abort()  # connection_lost follows: the response's task sees its client gone

    def _stop_clock(self) -> None:
        if self._clock is not None:
            self._clock.cancel()
            self._clock = None

    def _stop_send_clock(self) -> None:
        if self._send_clock is not None:
            self._send_clock.cancel()
            self._send_clock = None


#: The HTTP protocol class ``serve_http`` gives uvicorn: :data:`QuickAckProtocol` with bounded requests and writes
#: (when it is httptools' protocol; else as it is).
BoundedProtocol: Final[type[asyncio.Protocol]] = (
    _Bounded if any(kind.__name__ == "HttpToolsProtocol" for kind in QuickAckProtocol.__mro__) else QuickAckProtocol
)
