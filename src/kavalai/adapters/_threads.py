"""Worker threads for sync Python tools: a call handed to a thread and its result handed back, and nothing more.

``anyio.to_thread.run_sync`` costs about 85 µs a hop here and ``asyncio.to_thread`` about 60 µs; most of either is
layers (a capacity limiter with checkpoints, a cancel scope, a concurrent ``Future`` chained to an asyncio one). A
hop here is one ``SimpleQueue.put`` to an idle thread and one ``call_soon_threadsafe`` back, about 35 µs
(``bench/python_tools.py`` prints it against both).

The semantics are anyio's ``run_sync(..., abandon_on_cancel=True)``, but for the turn a cut call keeps:

- the function runs in a copy of the caller's context (its context variables, an OpenTelemetry span);
- at most :data:`MAX_THREADS` calls per event loop run on a thread at a time; more wait for a turn;
- a call whose awaiting task is cancelled (a timeout, ``close()``) returns at once, but its thread runs the function
  to the end, since Python cannot stop a thread, and *keeps its turn* until then: a hung tool cut again and again
  never holds more than :data:`MAX_THREADS` threads of a loop (the kernel lists such calls in
  ``kernel.threads_in_flight()``, through ``on_return``);
- threads are daemons, reused most-recently-idle first, and end after :data:`IDLE_SECONDS` without work;
- at the interpreter's exit the idle ones are ended and joined (:func:`_stop_idle`): a daemon thread still waiting
  when the interpreter finalizes is stopped by force, which aborts the process now and then (seen with
  pydantic-monty loaded).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final, TypeVar

__all__ = ["IDLE_SECONDS", "MAX_THREADS", "run_in_thread"]

R = TypeVar("R")

#: How many calls of one event loop may wait on a worker thread at a time (anyio's default limit too).
MAX_THREADS: Final = 40
#: How long an idle worker thread waits for work before it ends.
IDLE_SECONDS: Final = 10.0

_Job = tuple[
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[[], Any],
    "_Turns",
    Callable[[], object] | None,
]
_idle: list[_Worker] = []  # LIFO: the thread idle the shortest time is the warmest
_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def run_in_thread(func: Callable[[], R], on_return: Callable[[], object] | None = None) -> R:
    """Run ``func()`` in a worker thread and return its result (or raise its exception) on the event loop.

    The call holds one of its loop's turns until ``func`` has returned, even when the awaiting task was cancelled
    first: a thread that cannot be stopped still counts. ``on_return()`` is called once ``func`` has returned (in
    the worker thread), or at once if ``func`` never started (cancelled while waiting for a turn)."""
    loop = asyncio.get_running_loop()
    turns = _turns.get(loop)
    if turns is None:
        turns = _turns[loop] = _Turns()
    if turns.free and not turns.waiting:
        turns.free -= 1
    else:
        try:
            await turns.wait(loop)
        except BaseException:
            if on_return is not None:
                on_return()
            raise
    future: asyncio.Future[R] = loop.create_future()
    try:
        worker = _idle.pop()
    except IndexError:
        worker = _Worker()
        worker.start()
    worker.jobs.put((loop, future, contextvars.copy_context(), func, turns, on_return))
    return await future  # cancelled: the thread runs on, holding the turn, and gives it back when func returns


class _Turns:
    """The turns of one event loop: a semaphore that, unlike ``asyncio.Semaphore``, keeps no reference to its loop
    once nobody waits (it is kept by the loop, weakly)."""

    __slots__ = ("free", "waiting")

    def __init__(self) -> None:
        self.free = MAX_THREADS
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def wait(self, loop: asyncio.AbstractEventLoop) -> None:
        turn = loop.create_future()
        self.waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given a turn just as it was cancelled: pass it on
                self.give_back()
            else:
                with contextlib.suppress(ValueError):  # already passed over by give_back()
                    self.waiting.remove(turn)
            raise

    def give_back(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


class _Worker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="kavalai-tool", daemon=True)
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()

    def run(self) -> None:
        jobs = self.jobs
        while True:
            try:
                job = jobs.get(timeout=IDLE_SECONDS)
                if job is None:  # the interpreter is exiting
                    return
            except queue.Empty:
                try:
                    _idle.remove(self)  # atomic: either this thread leaves, or a caller took it and a job is coming
                except ValueError:
                    job = jobs.get()
                    if job is None:
                        return
                else:
                    return
            loop, future, context, func, turns, on_return = job
            del job
            try:
                result, error = context.run(func), None
            except BaseException as exc:  # handed to the awaiting task, whatever it is
                result, error = None, exc
            if on_return is not None:
                on_return()
            _idle.append(self)
            with contextlib.suppress(RuntimeError):  # the loop closed while the call ran: nobody is waiting
                loop.call_soon_threadsafe(_settle, future, result, error, turns)
            del loop, future, context, func, result, error, turns, on_return


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None, turns: _Turns) -> None:
    turns.give_back()  # the thread is free again: its turn too
    if future.done():  # cancelled: its caller has gone on
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


_EXIT_WAIT: Final = 1.0  # seconds the exit waits, in all, for idle threads to end


@atexit.register
def _stop_idle() -> None:
    """End the idle worker threads and wait for them (briefly): see the module's docstring."""
    workers = list(_idle)
    _idle.clear()
    for worker in workers:
        worker.jobs.put(None)
    for worker in workers:
        worker.join(_EXIT_WAIT / max(len(workers), 1))
