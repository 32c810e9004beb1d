"""Closing a kernel: its *closing* state, the cut of every call in flight, and the bounded wait for what the cut
calls leave running.

:meth:`Kernel.close() <kavalai.kernel.Kernel.close>` marks the kernel closing for as long as it runs (a call that
starts meanwhile, or a tool whose server is connecting for a call then, ends with
:class:`~kavalai.errors.KernelClosedError`), cuts every call of the in-flight registry on that call's own event loop
and waits, within :data:`_CLOSE_WAIT`, for them to end and for the worker threads of cut sync tools to return; the
calls and threads still running then are named by tool URI in one log line each. The calls around the code that
closes (a tool closing its own kernel, from its task or its worker thread) are left to finish. The kernel's hot path
reads only the closing marks (a ``set``: its add and discard are atomic across threads); the rest runs once per
``close()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final

from kavalai.errors import KernelClosedError, ServerConnectionError
from kavalai.kernel._call import ToolCall
from kavalai.kernel._cancel import running_task
from kavalai.secrets import get_logger

__all__ = ["Closing"]

logger = get_logger("kavalai")

_CLOSE_WAIT: Final = 5.0  # how long close() waits for the calls it cut to end (a tool may ignore cancellation)


class Closing:
    """The closing state of one kernel: the marks of the ``close()`` running now (truthy while one runs) and how
    many have started, so that work begun before one can tell that a close came meanwhile."""

    __slots__ = ("marks", "started")

    def __init__(self) -> None:
        self.marks: set[object] = set()  # a set: its add and discard are atomic across threads
        self.started = 0

    @contextmanager
    def running(self) -> Iterator[None]:
        """Mark the kernel closing for the ``with`` block (one ``close()``)."""
        mark = object()
        self.started += 1
        self.marks.add(mark)
        try:
            yield
        finally:
            self.marks.discard(mark)

    @contextmanager
    def refusing_connects(self, uri: object) -> Iterator[None]:
        """Around connecting a server for a call of ``uri``: a connection that fails because a ``close()`` ran
        meanwhile (it closed the server being connected) is :class:`~kavalai.errors.KernelClosedError` naming
        ``uri``, the connection error as its cause, as a call cut by ``close()`` ends."""
        started = self.started
        try:
            yield
        except KernelClosedError:
            raise
        except ServerConnectionError as exc:
            if not self.marks and self.started == started:
                raise
            name = str(uri)
            raise KernelClosedError(f"The kernel was closed while {name} was connecting.", uri=name) from exc


async def end_calls_in_flight(inflight: set[ToolCall], own: set[ToolCall]) -> None:
    """Cut every call in ``inflight`` (a kernel's registry; each on its own event loop) and wait, boundedly, until
    they have ended with :class:`~kavalai.errors.KernelClosedError`. A call made by the task running ``close()``,
    or one of ``own`` (a tool closing its own kernel), is left to finish."""
    me = running_task()
    running = asyncio.get_running_loop()
    waits: dict[asyncio.Future[None], ToolCall] = {}
    for call in list(inflight):
        task = call._task
        if task is None or task is me or call in own:
            continue
        ended: concurrent.futures.Future[None] = concurrent.futures.Future()
        loop = task.get_loop()
        if loop is running:
            call.close_from_outside(ended, inflight)
        else:
            try:
                loop.call_soon_threadsafe(call.close_from_outside, ended, inflight)
            except RuntimeError:  # that loop is closed: nothing runs there any more
                continue
        waits[asyncio.wrap_future(ended)] = call
    if not waits:
        return
    _, pending = await asyncio.wait(waits, timeout=_CLOSE_WAIT)
    if pending:  # tools that caught their cut and went on: named, as the threads left are (wait_for_threads)
        logger.warning(
            "close() returns with %d call(s) still running (a tool that went on after its cut, or a blocked loop): %s",
            len(pending),
            _counted(waits[wait].uri for wait in pending),
        )


async def wait_for_threads(lingering: set[ToolCall], until: float, own: set[ToolCall]) -> None:
    """Wait, until the loop's time ``until``, for the worker threads of the calls cut so far (``lingering``, but
    ``own``'s); name in one log line the tools whose threads still run then."""
    cut = [call for call in lingering if call not in own]
    if not cut:
        return
    waits = [asyncio.wrap_future(call.await_release()) for call in cut]
    left = until - asyncio.get_running_loop().time()
    _, pending = await asyncio.wait(waits, timeout=max(left, 0.0))
    for wait in pending:
        wait.cancel()
    still = [call.uri for call in lingering if call not in own]
    if still:
        logger.warning(
            "close() returns with %d worker thread(s) of cut sync tools still running: %s", len(still), _counted(still)
        )


def _counted(uris: Iterable[str]) -> str:
    """``"python://a (2), python://b (1)"``: each URI once, in order, with how many times it came."""
    counts = Counter(sorted(uris))
    return ", ".join(f"{uri} ({count})" for uri, count in counts.items())


def close_wait() -> float:
    """How long ``close()`` waits for what it cut, in seconds (read at each close: tests shorten it)."""
    return _CLOSE_WAIT
