"""Ending a stdio MCP server and everything it started, within bounded waits.

Shutdown follows the MCP specification: close stdin, wait, SIGTERM, wait, SIGKILL. The server runs in its own
session (process group), and the whole group is signalled, so its own children go too. Descendants that left the
group (``setsid``, a double fork) are found two ways: by walking the process tree while the server still links
them, and by a marker variable (:data:`MARK_VAR`) every process the server starts inherits in its environment.
Both are read from ``/proc`` on Linux; elsewhere the process group alone is ended (documented in docs/safety.md).

Written by hand rather than with psutil: the reading is a few lines over ``/proc``, and psutil would read the same
files (it has no view of another process's environment on other systems either).
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import anyio

from kavalai.secrets import get_logger

if TYPE_CHECKING:
    from kavalai.adapters.mcp._stdio import StdioProcess

__all__ = ["LIVE_GROUPS", "MARK_VAR", "kill_now", "process_group_alive", "signal_group", "stop_process"]

logger = get_logger(__name__)

#: The environment variable that marks every process a stdio server starts (its value is per server).
MARK_VAR: Final = "KAVALAI_MCP_SERVER"
#: Process groups of the stdio servers running now, for :func:`kill_now`.
LIVE_GROUPS: set[int] = set()

_STDIN_GRACE: Final = 2.0  # seconds a server has to exit after its stdin closes
# ... and a server still working on requests nobody awaits any more (a call cut by its timeout): many servers keep
# running while a timer or a task of theirs is pending, so closing stdin alone would cost the whole grace; SIGTERM
# (still a graceful stop, _TERM_GRACE before SIGKILL) follows sooner.
_BUSY_STDIN_GRACE: Final = 0.25
_TERM_GRACE: Final = 2.0  # seconds between SIGTERM and SIGKILL
_KILL_GRACE: Final = 2.0  # seconds for the kernel to carry out SIGKILL
_POLL: Final = 0.01  # how often an exit is looked for


async def stop_process(info: StdioProcess) -> None:
    """Stop the server as the MCP specification says (close stdin, wait, SIGTERM, wait, SIGKILL), then what it
    leaves behind: the rest of its process group, and descendants that left the group (``setsid``, a detached
    child), found while the server still linked them. Every wait is bounded."""
    process = info.process
    info.stopped_by_kernel = info.returncode is None and not info.stdout_closed.is_set()
    escaped = _escaped_descendants(info.pid) if info.returncode is None else {}
    escaped |= _marked_processes(info)
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    grace = _STDIN_GRACE
    if info.busy and info.returncode is None:
        grace = _BUSY_STDIN_GRACE
        logger.debug("MCP server process %d still works on requests nobody awaits: SIGTERM in %s s", info.pid, grace)
    if not await _wait_exit(info, grace):
        signal_group(info, kill=False)
        if not await _wait_exit(info, _TERM_GRACE):
            signal_group(info, kill=True)
            await _wait_exit(info, _KILL_GRACE)

    def leftovers() -> bool:
        if sys.platform != "linux":  # pragma: no cover - no /proc: the group alone
            return process_group_alive(info.pid)
        return any(p.alive and (p.pgrp == info.pid or escaped.get(p.pid) == p.start) for p in _process_table())

    escaped |= _marked_processes(info)  # and those that detached while it ran
    if leftovers():
        _signal_leftovers(info, escaped, signal.SIGTERM)
        with anyio.move_on_after(_TERM_GRACE):
            while leftovers():  # noqa: ASYNC110 - no event tells when they are gone
                await anyio.sleep(_POLL)
        if leftovers():
            _signal_leftovers(info, escaped, signal.SIGKILL)


def _signal_leftovers(info: StdioProcess, escaped: dict[int, str], signum: int) -> None:
    signal_group(info, kill=signum == signal.SIGKILL)
    current = {p.pid: p.start for p in _process_table()}
    for pid, start in escaped.items():
        if current.get(pid) == start:  # the same process, not a reused pid
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


async def _wait_exit(info: StdioProcess, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while info.returncode is None:  # noqa: ASYNC110 - see _watch_exit
            await anyio.sleep(_POLL)
    return info.returncode is not None


def signal_group(info: StdioProcess, *, kill: bool) -> None:
    """SIGTERM (or SIGKILL) the server's whole process group, which is also its session."""
    if sys.platform == "win32":  # pragma: no cover - no process groups: stop the server itself
        with suppress(ProcessLookupError, OSError):
            if kill:
                info.process.kill()
            else:
                info.process.terminate()
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(info.pid, signal.SIGKILL if kill else signal.SIGTERM)


def process_group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in process group ``pgid``."""
    if sys.platform == "win32":  # pragma: no cover - see signal_group
        return False
    if sys.platform != "linux":  # pragma: no cover - /proc is Linux-only
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return any(p.alive and p.pgrp == pgid for p in _process_table())


@dataclass(frozen=True, slots=True)
class _Proc:
    pid: int
    ppid: int
    pgrp: int
    start: str  # the start time, which tells a reused pid from the process seen before
    alive: bool  # not a zombie


def _process_table() -> list[_Proc]:
    """Every process this user can see, from /proc (empty where there is no /proc)."""
    if sys.platform != "linux":  # pragma: no cover
        return []
    table = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as file:
                stat = file.read()
        except OSError:
            continue
        # After the command name (which may hold spaces and parentheses): state ppid pgrp ... starttime is the 20th.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 19:
            table.append(_Proc(int(name), int(fields[1]), int(fields[2]), fields[19], fields[0] not in ("Z", "X")))
    return table


def kill_now() -> None:
    """SIGKILL every running stdio server's process group at once, without waiting: for a process about to exit
    without clean-up (a second Ctrl-C), so that no server outlives it."""
    for pgid in list(LIVE_GROUPS):
        with suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(pgid, signal.SIGKILL)


def _marked_processes(info: StdioProcess) -> dict[int, str]:
    """The live processes carrying the server's marker in their environment (its descendants, however detached),
    outside its process group, with their start times. Linux only; elsewhere the process group alone is ended.

    Written by hand: reading /proc/<pid>/environ is all it takes, and psutil would read the same files."""
    if sys.platform != "linux" or not info.marker:  # pragma: no cover - no /proc
        return {}
    needle = f"{MARK_VAR}={info.marker}".encode()
    found: dict[int, str] = {}
    for proc in _process_table():
        if not proc.alive or proc.pgrp == info.pid or proc.pid == os.getpid():
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found[proc.pid] = proc.start
    return found


def _escaped_descendants(pid: int) -> dict[int, str]:
    """The live descendants of ``pid`` outside its process group, with their start times."""
    table = _process_table()
    children: dict[int, list[_Proc]] = {}
    for proc in table:
        children.setdefault(proc.ppid, []).append(proc)
    found: dict[int, str] = {}
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            pending.append(child.pid)
            if child.alive and child.pgrp != pid:
                found[child.pid] = child.start
    return found
