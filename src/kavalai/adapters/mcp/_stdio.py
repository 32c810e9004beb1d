"""The stdio transport: an MCP server as a child process, newline-delimited JSON-RPC over its stdin and stdout.

Unlike the SDK's own ``stdio_client`` it exposes what the supervisor needs to explain a failure (the exit code
and the last lines the server wrote to stderr), and it notices a dead server even when a grandchild still holds
its stdout open. Shutdown follows the MCP specification: close stdin, wait, SIGTERM, SIGKILL. The server runs in
its own session (process group); :mod:`kavalai.adapters.mcp._reaper` ends it and everything it started.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, cast

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._reaper import LIVE_GROUPS, MARK_VAR, signal_group, stop_process
from kavalai.errors import ConfigurationError
from kavalai.secrets import Redactor, mask_edges

__all__ = ["StdioProcess", "open_stdio"]

#: Environment variables a server inherits; everything else must be given in ``McpServer.env``.
_INHERITED_ENV: Final = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
_KILL_GRACE: Final = 2.0  # seconds for the kernel to carry out SIGKILL
_EXIT_POLL: Final = 0.05  # how often the exit watcher looks at the process
_EOF_GRACE: Final = 0.2  # time for stdout to drain after the process exited
_STDERR_LINES: Final = 20
_STDERR_LINE_CHARS: Final = 500
_NOISE_LINES: Final = 3
_SHIM: Final = str(Path(__file__).with_name("_shim.py"))
_PARSE_OFF_LOOP: Final = 256 * 1024  # bytes above which a message is parsed in a worker thread
#: Requests that stay open for the connection's life by design (2026-07-28's subscription stream): never "busy".
_STREAMS: Final = frozenset({"subscriptions/listen"})
_MAX_AWAITED: Final = 10_000  # request ids remembered as unanswered (a server that never answers cannot grow it)


@dataclass(eq=False)
class StdioProcess:
    """What the supervisor may know about a running stdio server.

    Attributes:
        pid: the process id of what the kernel started (also the process group and session id): on Linux the
            shim the server runs under, elsewhere the server itself. :attr:`server_pid` is the server's.
        exited: set once the process has exited.
        stdout_closed: set once its stdout reached end of file.
        stderr_closed: set once its stderr reached end of file.
        stopped_by_kernel: whether it was still running when the kernel began to stop it.
        stdout_noise: the last lines it wrote to stdout that are not JSON-RPC (a server must write only
            protocol messages there).
        protocol_error: why the kernel gave up on the server's output (a message over the size limit), or
            ``None``.
        on_stray: told (with why) of each message that answers no request: one that cannot be read and names no
            request, or an answer whose id is null or not that of a request awaiting one. Such a message is
            dropped; the session goes on.
    """

    pid: int
    process: anyio.abc.Process = field(repr=False)
    exited: anyio.Event = field(default_factory=anyio.Event, repr=False)
    stdout_closed: anyio.Event = field(default_factory=anyio.Event, repr=False)
    stderr_closed: anyio.Event = field(default_factory=anyio.Event, repr=False)
    stopped_by_kernel: bool = False
    protocol_error: str | None = None
    marker: str = ""
    stdout_noise: deque[str] = field(default_factory=lambda: deque(maxlen=_NOISE_LINES), repr=False)
    _stderr: deque[str] = field(default_factory=lambda: deque(maxlen=_STDERR_LINES), repr=False)
    _partial: str = field(default="", repr=False)
    shimmed: bool = False
    on_stray: Callable[[str], None] = field(default=lambda why: None, repr=False)
    _server_pid: int | None = field(default=None, repr=False)
    _awaited: dict[str, str] = field(default_factory=dict, repr=False)  # requests sent, not yet answered: id -> method

    def _sent(self, message: SessionMessage) -> None:
        inner = message.message
        # by exact class first: isinstance() of a pydantic model class is an ABC check, once a message
        if type(inner) is mcp_types.JSONRPCRequest or isinstance(inner, mcp_types.JSONRPCRequest):
            self._awaited[str(inner.id)] = inner.method
            if len(self._awaited) > _MAX_AWAITED:
                del self._awaited[next(iter(self._awaited))]  # the oldest: a request given up on long ago

    def _answers_a_request(self, message: SessionMessage) -> bool:
        """Whether ``message`` may go to the session: anything but an answer to no request awaiting one."""
        inner = message.message
        kind = type(inner)
        answer = kind is mcp_types.JSONRPCResponse or kind is mcp_types.JSONRPCError  # the usual, without the ABC check
        if not answer and not isinstance(inner, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            return True
        answer_id = cast("mcp_types.JSONRPCResponse | mcp_types.JSONRPCError", inner).id
        key = str(answer_id)
        if answer_id is not None and key in self._awaited:
            del self._awaited[key]
            return True
        self.on_stray(f"an answer with id {answer_id!r}, which is no request awaiting one")
        return False

    @property
    def busy(self) -> bool:
        """Whether requests sent to the server are still unanswered (work it does that nobody may await)."""
        return any(method not in _STREAMS for method in self._awaited.values())

    @property
    def server_pid(self) -> int:
        """The server's own process id (the shim's only child, read once from /proc), else :attr:`pid`."""
        if not self.shimmed:
            return self.pid
        if self._server_pid is None:
            try:
                with open(f"/proc/{self.pid}/task/{self.pid}/children") as file:
                    children = file.read().split()
            except OSError:
                return self.pid
            if not children:
                return self.pid
            self._server_pid = int(children[0])
        return self._server_pid

    @property
    def returncode(self) -> int | None:
        """The exit code, or ``None`` while it runs (negative: killed by that signal)."""
        return self.process.returncode

    @property
    def exit_code(self) -> int | None:
        """The exit code if the server exited by itself; ``None`` while it runs or once the kernel stopped it
        (then the code says nothing about what went wrong)."""
        return None if self.stopped_by_kernel else self.process.returncode

    def stderr_tail(self, also: Redactor | None = None) -> str:
        """The last lines the server wrote to stderr (at most 20), through the secret gate: every registered secret
        and ``also``'s (the server's own) masked, and the pieces of one at the cuts too (a line is kept to 500
        characters, a line still being written to its last 500, the tail to its last 20 lines: each cut may go
        through a secret, a multi-line one such as a private key too), by :func:`kavalai.secrets.mask_edges`."""
        lines = [*self._stderr, self._partial] if self._partial else list(self._stderr)
        whole = mask_edges("\n".join(lines), also)  # a multi-line secret whose beginning lines were dropped
        return "\n".join(mask_edges(line, also) for line in whole.split("\n")).strip()

    def _feed_stderr(self, chunk: str) -> None:
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()[-_STDERR_LINE_CHARS:]
        self._stderr.extend(line.rstrip("\r")[:_STDERR_LINE_CHARS] for line in lines)


class StdinWriter:
    """The stream the session writes: each message is serialised and written to the server's stdin by the task that
    sends it, with no writer task and no memory stream in between (one task switch less a message). A message is
    written whole: asyncio's stream writer buffers all of a ``write`` before anything else runs, so messages sent
    by several tasks at once never interleave; a sender cancelled while the pipe drains has sent its message.

    When the server stops reading (its stdin closed or broken), the session's stream is ended, so the supervisor
    learns at once that the connection is gone and the requests awaiting answers fail instead of hanging; the
    message that found the pipe broken is dropped (its request fails with the session), later ones are refused
    with ``BrokenResourceError``. Once the transport shuts down (:meth:`close`), sends raise
    ``ClosedResourceError``, as a closed memory stream's do.
    """

    __slots__ = ("_broken", "_closed", "_info", "_stdin", "_to_session")

    def __init__(self, info: StdioProcess, to_session: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        stdin = info.process.stdin
        assert stdin is not None
        self._info = info
        self._stdin = stdin
        self._to_session = to_session
        self._closed = False
        self._broken = False

    async def send(self, message: SessionMessage, /) -> None:
        """Write ``message`` as one line of JSON to the server's stdin."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        self._info._sent(message)
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            await self._stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._broken = True
            self._to_session.close()  # the server stopped reading: end the session rather than hang its requests

    def close(self) -> None:
        """Refuse every later message (the transport is shutting down)."""
        self._closed = True

    async def aclose(self) -> None:
        """:meth:`close`, as an async resource closes."""
        self.close()


Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], StdinWriter]


@asynccontextmanager
async def open_stdio(
    server: McpServer, on_stray: Callable[[str], None] | None = None
) -> AsyncIterator[tuple[Streams, StdioProcess]]:
    """Start ``server``'s process and yield the session's streams and the process (``on_stray``: see
    :attr:`StdioProcess.on_stray`).

    When the process exits, the stream the session reads ends. Leaving the block stops the process and its
    group, even when the caller is cancelled.

    Raises:
        OSError: the command could not be started.
    """
    if server.command is None:
        raise ConfigurationError(f"MCP server {server.name!r} has no command to start.")
    # Every process the server starts inherits this marker, so descendants that leave its process group and
    # session (setsid, a double fork) are still found and ended on close (see _marked_processes).
    marker = secrets.token_hex(8)
    env = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ} | server.env | {MARK_VAR: marker}
    # Shielded: a cancellation inside the spawn would orphan a process that is already running; delivered
    # after it, the cancellation finds the process in the hands of the shutdown below.
    command = _command_line(server, env)
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            command,
            env=env,
            cwd=server.cwd,
            start_new_session=True,
        )
    info = StdioProcess(pid=process.pid, process=process, marker=marker, shimmed=_SHIM in command[:4])
    if on_stray is not None:
        info.on_stray = on_stray
    LIVE_GROUPS.add(process.pid)
    to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_writes = StdinWriter(info, to_session)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_stdout, info, to_session, server.max_message_bytes)
            tg.start_soon(_read_stderr, process, info)
            tg.start_soon(_watch_exit, info, to_session)
            try:
                yield (session_reads, session_writes), info
            finally:
                with anyio.CancelScope(shield=True):
                    session_writes.close()
                    session_reads.close()
                    await stop_process(info)
                tg.cancel_scope.cancel()
    finally:
        LIVE_GROUPS.discard(process.pid)
        with anyio.CancelScope(shield=True):
            await _release(process)
            session_writes.close()
            for stream in (to_session, session_reads):
                stream.close()


def _command_line(server: McpServer, env: dict[str, str]) -> list[str]:
    """The server's command line; on Linux under the shim (:mod:`kavalai.adapters.mcp._shim`), which ends whatever
    the server leaves behind. The command is looked up first, so a missing one fails as it would unshimmed."""
    command = [server.command or "", *server.args]
    if sys.platform != "linux":
        return command
    if os.sep not in command[0] and shutil.which(command[0], path=env.get("PATH")) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    return [sys.executable, "-I", "-S", _SHIM, *command]


async def _read_stdout(
    info: StdioProcess, to_session: MemoryObjectSendStream[SessionMessage | Exception], limit: int
) -> None:
    """Hand each line to the session; once the session is gone, keep draining so the server never blocks.

    A line longer than ``limit`` bytes is never buffered whole: the server is stopped and the connection fails
    with an error naming the limit (``max_message_bytes``), so one message cannot exhaust memory.
    """
    stdout = info.process.stdout
    assert stdout is not None
    partial: list[bytes] = []  # the pieces of the line being received: a long message costs linear time
    size = 0
    deliver = True
    try:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            async with to_session:
                async for chunk in stdout:
                    *lines, rest = chunk.split(b"\n")
                    if lines:
                        lines[0] = b"".join([*partial, lines[0]])
                        partial.clear()
                        size = 0
                    if rest:
                        partial.append(rest)
                        size += len(rest)
                    if size > limit or (lines and max(map(len, lines)) > limit):  # C loops: once a chunk
                        _give_up(info, f"sent a message over the limit of {limit:,} bytes (max_message_bytes)")
                        return
                    for line in lines:
                        if not deliver or not line.strip():
                            continue
                        # A large message is parsed off the loop: a 10,000-tool listing must not stall it.
                        big = len(line) > _PARSE_OFF_LOOP
                        message = await anyio.to_thread.run_sync(_parse, info, line) if big else _parse(info, line)
                        if message is None:
                            continue
                        if isinstance(message, str):
                            info.on_stray(message)
                            continue
                        if not info._answers_a_request(message):
                            continue
                        try:
                            await to_session.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            deliver = False
    finally:
        info.stdout_closed.set()


def _give_up(info: StdioProcess, why: str) -> None:
    """Stop reading a server whose output cannot be trusted: record why and kill its process group. The exit
    watcher then ends the session's stream, which fails every call in flight with ``why``."""
    info.protocol_error = why
    signal_group(info, kill=True)


_ID_RE: Final = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")')


def _parse(info: StdioProcess, line: bytes) -> SessionMessage | str | None:
    """The message on ``line``; ``None`` for a line that is not JSON-RPC at all (a log line: kept as noise); or,
    for a line that looks like JSON-RPC but cannot be read, an error response failing the request it names, or
    when it names none (``"id": null``, or no id at all), what it is (a ``str``: a stray message, dropped)."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        if not line.lstrip().startswith(b"{"):  # not JSON-RPC (a server that logs to stdout): kept as noise
            info.stdout_noise.append(line[:_STDERR_LINE_CHARS].decode(errors="replace").strip())
            return None
        reason = f"a message that could not be read ({_first_line(exc)})"
        found = _ID_RE.search(line)
        if found is None:
            return f"{reason}, naming no request"
        raw_id = found.group(1).decode()
        request_id: int | str = int(raw_id) if raw_id[0] != '"' else raw_id.strip('"')
        error = mcp_types.ErrorData(code=mcp_types.PARSE_ERROR, message=f"The server sent {reason}.")
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


async def _read_stderr(process: anyio.abc.Process, info: StdioProcess) -> None:
    assert process.stderr is not None
    try:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            async for chunk in process.stderr:
                info._feed_stderr(chunk.decode(errors="replace"))
    finally:
        info.stderr_closed.set()


async def _watch_exit(info: StdioProcess, to_session: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
    # Polling returncode, not process.wait(): asyncio's wait() also waits for the pipes, which a grandchild
    # holding stdout would keep open, and then a dead server would look alive.
    while info.returncode is None:  # noqa: ASYNC110 - the exit is only observable by polling (see above)
        await anyio.sleep(_EXIT_POLL)
    info.exited.set()
    with anyio.move_on_after(_EOF_GRACE):
        await info.stdout_closed.wait()
        await info.stderr_closed.wait()
    to_session.close()  # the session's stream ends: the supervisor learns that the server is gone


async def _release(process: anyio.abc.Process) -> None:
    """Close the pipes and reap the process, so no file descriptor or transport outlives the server."""
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()
    if process.returncode is None:  # pragma: no cover - only a process that survived SIGKILL
        return
    with anyio.move_on_after(_KILL_GRACE):
        await process.wait()
    # asyncio keeps the subprocess transport open (and warns at garbage collection) until closed explicitly.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        close()
