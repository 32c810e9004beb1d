"""The parent a stdio MCP server runs under on Linux, so that nothing it starts outlives it.

Run as ``python -I -S _shim.py COMMAND ARGS...`` (a script of the standard library only, so it starts in
milliseconds). It makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): every process the server
starts that is orphaned, however it detached (``setsid``, a double fork, an emptied environment), is re-parented to
this process instead of to init. It starts the server with its own stdin, stdout and stderr, lets go of its copies
of stdin and stdout, forwards SIGTERM, SIGINT and SIGHUP to the server, and when the server has exited it ends every
process re-parented to it (SIGTERM, then SIGKILL after a grace period) before it exits the way the server did.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
TERM_GRACE = 2.0  # seconds the leftovers have between SIGTERM and SIGKILL
GIVE_UP = 5.0  # seconds after which the shim exits even if something still will not die
POLL = 0.02


def main(argv: list[str]) -> int:
    """Run ``argv`` as the server; return the exit code to leave with (see :func:`_exit_like`)."""
    if not argv:
        print("usage: _shim.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    _become_subreaper()
    try:
        server = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        print(f"kavalai: cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # the server's stdout must end when the server's writers are gone, not when the shim is
    os.close(devnull)

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    status = _wait_for(server)
    _end_leftovers()
    return os.waitstatus_to_exitcode(status) if status is not None else 1


def _become_subreaper() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux, or no prctl: the kernel's other nets still apply
        pass


def _wait_for(server: int) -> int | None:
    """Reap children (re-parented orphans included) until the server has exited; return its wait status."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return None
        if pid == server:
            return status


def _children() -> list[int]:
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as file:
                fields = file.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 1 and int(fields[1]) == me and fields[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _end_leftovers() -> None:
    """End everything re-parented to the shim; killing one may orphan its own children to us, so repeat."""
    started = time.monotonic()
    while True:
        _reap()
        leftovers = _children()
        elapsed = time.monotonic() - started
        if not leftovers or elapsed > GIVE_UP:
            return
        signum = signal.SIGTERM if elapsed < TERM_GRACE else signal.SIGKILL
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        time.sleep(POLL)


def _exit_like(code: int) -> None:
    """Exit as the server did: with its code, or killed by the same signal."""
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    _exit_like(main(sys.argv[1:]))
