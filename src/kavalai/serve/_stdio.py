"""MCP over this process's stdin and stdout, read and written on the event loop.

The SDK's ``stdio_server`` reads each line and writes each message in a worker thread (``anyio.wrap_file``): every
message crosses threads, twice or three times. When stdin and stdout are pipes or sockets (what an MCP host gives
the process it starts), :func:`stdio_streams` reads and writes them without blocking on the loop itself (asyncio's
pipe transports) and serves the SDK's stream protocols directly: a request is parsed where it is received, a
message written where it is sent, no thread and no memory stream in between. Elsewhere (stdin or stdout a regular
file or a terminal, which cannot be polled, or another event loop than asyncio's) it is the SDK's ``stdio_server``.

Like the SDK's, while serving it points descriptor 0 at the null device and descriptor 1 at stderr, so that
children and a tool's stray ``print`` cannot read from or write into the protocol stream; both are put back (with
their blocking mode) at the end.

Flow control both ways: reading pauses while :data:`_READ_AHEAD` lines wait to be received, and a send waits while
the pipe to the host is full.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any, Final, Self

import anyio
import mcp_types as types
import sniffio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

__all__ = ["polls", "stdio_streams"]

_READ_AHEAD: Final = 64  # received lines waiting before reading pauses
_FLUSH_WINDOW: Final = 1.0  # seconds the last messages have to reach a host that stopped reading
_STDIN: Final = 0
_STDOUT: Final = 1


def polls(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (a pipe or a socket; not a regular file nor a terminal; never on
    Windows, whose event loops have no such pipes)."""
    if sys.platform == "win32":  # pragma: no cover
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of an MCP server on stdin and stdout, for ``Server.run`` (see the module)."""
    loop = asyncio.get_running_loop() if sniffio.current_async_library() == "asyncio" else None
    # asyncio's own loops only: uvloop's pipe transports are no asyncio.ReadTransport, and closing one closes the
    # descriptor it was given, which is put back as stdin or stdout at the end (`kavalai serve --loop uvloop`)
    if not (polls(_STDIN) and polls(_STDOUT) and isinstance(loop, asyncio.BaseEventLoop)):
        async with stdio_server() as streams:
            yield streams
        return
    with _claimed(_STDIN, os.O_RDONLY, os.devnull) as wire_in, _claimed(_STDOUT, os.O_WRONLY, None) as wire_out:
        reads = _Reads()
        writes = _Writes()
        await loop.connect_read_pipe(lambda: reads, os.fdopen(wire_in, "rb", buffering=0, closefd=False))
        await loop.connect_write_pipe(lambda: writes, os.fdopen(wire_out, "wb", buffering=0, closefd=False))
        try:
            yield reads, writes
        finally:
            await reads.aclose()
            await writes.aclose()


@contextlib.contextmanager
def _claimed(fd: int, flags: int, diversion: str | None) -> Iterator[int]:
    """A private descriptor of ``fd``'s wire for the block, ``fd`` itself pointed at ``diversion`` (``None``:
    stderr) meanwhile; afterwards ``fd`` is the wire again, in the blocking mode it had."""
    blocking = os.get_blocking(fd)
    wire = os.dup(fd)
    os.set_inheritable(wire, False)
    away = os.dup(2) if diversion is None else os.open(diversion, flags)
    try:
        os.dup2(away, fd)
    finally:
        os.close(away)
    try:
        yield wire
    finally:
        os.dup2(wire, fd)
        os.close(wire)
        with contextlib.suppress(OSError):
            os.set_blocking(fd, blocking)


class _Stream(asyncio.Protocol):
    """A pipe's protocol that is also an SDK stream: closed by ``aclose`` (also as an async context manager)."""

    async def aclose(self) -> None:
        """Stop using the pipe (its descriptor stays open)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Reads(_Stream):
    """The host's messages, one a line, as the SDK's ``ReadStream``: a ``SessionMessage``, or the exception a
    line that is not a JSON-RPC message raised; ``anyio.EndOfStream`` once the host closed stdin."""

    def __init__(self) -> None:
        self._lines: collections.deque[bytes] = collections.deque()
        self._partial = b""
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport (to pause and close it)."""
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        """Split what came into lines (a partial one waits for its end)."""
        if b"\n" not in data:
            self._partial += data
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        self._lines.extend(line for line in lines if line.strip())
        if len(self._lines) >= _READ_AHEAD and self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> None:
        """The host closed stdin: a last line without its newline still counts."""
        self._end()

    def connection_lost(self, exc: Exception | None) -> None:
        """The pipe is gone: the stream ends."""
        self._end()

    async def receive(self) -> SessionMessage | Exception:
        """The next message (or the error of a line that is not one)."""
        while not self._lines:
            if self._ended:
                raise anyio.EndOfStream
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        line = self._lines.popleft()
        if self._paused and len(self._lines) < _READ_AHEAD // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except Exception as exc:  # the SDK's stdio passes a bad line on as its error, for the server to answer
            return exc

    async def aclose(self) -> None:
        """Stop reading (the descriptor stays open: it is put back as stdin)."""
        self._end()
        if self._transport is not None:
            self._transport.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            if self._partial.strip():
                self._lines.append(self._partial)
            self._partial = b""
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _Writes(_Stream):
    """The SDK's ``WriteStream`` of messages to the host, one a line; a send waits while the pipe is full."""

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._closed = False
        self._lost = False
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport (to write and close it)."""
        assert isinstance(transport, asyncio.WriteTransport)
        self._transport = transport

    def pause_writing(self) -> None:
        """The pipe's buffer is full: sends wait."""
        self._paused = True

    def resume_writing(self) -> None:
        """The pipe drained: sends go on."""
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        """The host closed stdout: sends fail from now on."""
        self._lost = True
        self._wake()

    async def send(self, message: SessionMessage, /) -> None:
        """Write ``message`` as one line.

        Raises:
            anyio.ClosedResourceError: the stream was closed.
            anyio.BrokenResourceError: the host closed its end.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        if self._lost or self._transport is None or self._transport.is_closing():
            raise anyio.BrokenResourceError
        line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._transport.write(line.encode() + b"\n")
        while self._paused and not self._lost:
            await self._wait()
        if self._paused:  # lost while waiting for room
            raise anyio.BrokenResourceError

    async def aclose(self) -> None:
        """Close the stream once what was written went out (for a second at most: the host may have stopped
        reading; then the rest is dropped). The descriptor stays open: it is put back as stdout."""
        if self._closed:
            return
        self._closed = True
        if self._transport is None:
            return
        self._transport.close()
        with anyio.move_on_after(_FLUSH_WINDOW):
            while not self._lost:
                await self._wait()
        if not self._lost:
            self._transport.abort()  # nothing is written on the descriptor from here on

    async def _wait(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()
        try:
            await self._drained
        finally:
            self._drained = None

    def _wake(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
