"""Worker threads for sync Python tools: a call handed to a thread and its result handed back, and nothing more.

``anyio.to_thread.run_sync`` costs about 85 µs a hop here and ``asyncio.to_thread`` about 60 µs; most of either is
layers (a capacity limiter with checkpoints, a cancel scope, a concurrent ``Future`` chained to an asyncio one). A
hop here is one deque append (and, when no thread of the loop is awake, one wake-up) and one
``call_soon_threadsafe`` back, about 35 µs (``bench/python_tools.py`` prints it against both).

Under many concurrent calls the hops of one event loop are shared out, not one thread woken per call: calls wait in
the loop's queue, a thread awake for the loop takes the next one when it is done with its own, and a thread is woken
only when no thread of the loop is awake (or, as it starts a call with more waiting, for the next one: a call that
blocks never holds up the one behind it). The results go back in batches: one ``call_soon_threadsafe`` (one
wake-up of the loop) for all those finished before the loop ran. Each wake-up of a thread or of the loop is a
context switch, and under load the woken thread also waits for the GIL its waker holds: with a thread per call, 32
sessions of ``kavalai serve`` spent a sixth of the GIL's time handing calls over.

The semantics are anyio's ``run_sync(..., abandon_on_cancel=True)``, but for the turn a cut call keeps:

- the function runs in a copy of the caller's context (its context variables, an OpenTelemetry span);
- a ``SystemExit`` or ``KeyboardInterrupt`` it raises is the call's ``RuntimeError`` (its cause): in a thread it
  ends nothing else, where asyncio would re-raise it out of the event loop;
- at most :data:`MAX_THREADS` calls per event loop run on a thread at a time; more wait for a turn;
- a call whose awaiting task is cancelled (a timeout, ``close()``) before a thread took it never starts (as
  ``asyncio.to_thread``'s); one cancelled later returns at once, but its function runs to the end, since Python
  cannot stop a thread, and *keeps its turn* until then: a hung tool cut again and again never holds more than
  :data:`MAX_THREADS` threads of a loop (the kernel lists such calls in ``kernel.threads_in_flight()``, through
  ``on_return``);
- a call that waits :data:`WAIT_WARNING` seconds for a turn is logged once (a warning naming how long, why, and the
  calls holding the loop's turns by the ``name`` each was given, a tool's URI: those cut whose threads run on apart
  from those running): when every turn is held by a cut call whose thread runs on, calls of the loop would otherwise
  wait without a word;
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

from kavalai.secrets import get_logger

__all__ = ["IDLE_SECONDS", "MAX_THREADS", "WAIT_WARNING", "run_in_thread"]

R = TypeVar("R")

#: How many calls of one event loop may wait on a worker thread at a time (anyio's default limit too).
MAX_THREADS: Final = 40
#: How long an idle worker thread waits for work before it ends.
IDLE_SECONDS: Final = 10.0
#: Seconds a call waits for a turn before the wait is logged (once a call).
WAIT_WARNING: Final = 5.0

logger = get_logger("kavalai.threads")

_Job = tuple[
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[[], Any],
    Callable[[], object] | None,
]
_Done = tuple["asyncio.Future[Any]", Any, BaseException | None]
_idle: list[_Worker] = []  # LIFO: the thread idle the shortest time is the warmest
_alive: weakref.WeakSet[_Worker] = weakref.WeakSet()  # every worker thread started and not yet ended
_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def run_in_thread(
    func: Callable[[], R], on_return: Callable[[], object] | None = None, name: str | None = None
) -> R:
    """Run ``func()`` in a worker thread and return its result (or raise its exception) on the event loop.

    The call holds one of its loop's turns until ``func`` has returned, even when the awaiting task was cancelled
    first: a thread that cannot be stopped still counts. ``on_return()`` is called once ``func`` has returned (in
    the worker thread), or at once if ``func`` never started (cancelled while waiting for a turn). ``name`` (a
    tool's URI) is how the log line of a call kept waiting for a turn names this one while it holds its turn."""
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
    turns.holders[future] = name
    turns.submit((loop, future, contextvars.copy_context(), func, on_return))
    return await future  # cancelled: the function runs on, holding the turn, and gives it back when it returns


class _Turns:
    """The threads' work of one event loop: its turns (a semaphore that, unlike ``asyncio.Semaphore``, keeps no
    reference to its loop once nobody waits: it is kept by the loop, weakly), the calls waiting for a thread, and
    the results waiting for the loop.

    ``awake`` counts the threads working for the loop that are not inside a function (they take the next call
    waiting, or go idle): a call submitted while one is awake wakes no thread. ``lock`` makes taking a call (or
    going idle) and submitting one (or not waking anyone) exclusive, so no call is left with nobody to take it.
    """

    __slots__ = ("awake", "calls", "finished", "free", "holders", "lock", "settling", "waiting")

    def __init__(self) -> None:
        self.free = MAX_THREADS
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self.calls: collections.deque[_Job] = collections.deque()
        self.finished: collections.deque[_Done] = collections.deque()
        # The calls holding a turn (submitted, not yet settled) and their names: read and written on the loop only.
        self.holders: dict[asyncio.Future[Any], str | None] = {}
        self.awake = 0
        self.settling = False
        self.lock = threading.Lock()

    async def wait(self, loop: asyncio.AbstractEventLoop) -> None:
        turn = loop.create_future()
        self.waiting.append(turn)
        told = loop.call_later(WAIT_WARNING, _tell_waiting, self, len(self.waiting))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given a turn just as it was cancelled: pass it on
                self.give_back()
            else:
                with contextlib.suppress(ValueError):  # already passed over by give_back()
                    self.waiting.remove(turn)
            raise
        finally:
            told.cancel()

    def give_back(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1

    def submit(self, job: _Job) -> None:
        """Queue ``job`` for a thread (on the loop); wake one when none of the loop's is awake."""
        with self.lock:
            self.calls.append(job)
            wake = not self.awake
            if wake:
                self.awake += 1
        if wake:
            _wake(self)

    def take(self, worker: _Worker) -> _Job | None:
        """The next call for ``worker`` (in its thread), or ``None``: it is then idle (listed before it stops being
        counted awake, so a call submitted from then on may wake it). Taking a call with more waiting and no other
        thread awake wakes one for the next."""
        with self.lock:
            if not self.calls:
                _idle.append(worker)
                self.awake -= 1
                return None
            job = self.calls.popleft()
            wake = bool(self.calls) and self.awake == 1
            if not wake:
                self.awake -= 1
        if wake:  # the thread taking it stays counted awake until it returns, for the one it wakes
            _wake(self)
        return job

    def returned(self) -> None:
        """A thread is done with its call (in the worker thread) and looks for the next."""
        with self.lock:
            self.awake += 1

    def finish(self, loop: asyncio.AbstractEventLoop, done: _Done) -> None:
        """Hand a result to the loop (in a worker thread): one wake-up of the loop for all results finished before
        it runs :meth:`settle`."""
        self.finished.append(done)
        if not self.settling:
            self.settling = True
            try:
                loop.call_soon_threadsafe(self.settle)
            except RuntimeError:  # the loop closed while the call ran: nobody is waiting
                self.finished.clear()

    def settle(self) -> None:
        """Give each finished call's result to its caller and its turn back (on the loop)."""
        self.settling = False  # before taking: a result added from now on schedules another settle
        finished = self.finished
        while finished:
            future, result, error = finished.popleft()
            self.holders.pop(future, None)
            self.give_back()  # the thread is free again: its turn too
            if future.done():  # cancelled: its caller has gone on
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)


_NAMED: Final = 8  # names a waiting call's log line shows of each kind; the rest are counted


def _tell_waiting(turns: _Turns, place: int) -> None:
    """The one line of a call kept waiting for a turn: who holds the turns, the cut calls whose threads run on (they
    keep their turns until they return) apart from those running."""
    cut: collections.Counter[str] = collections.Counter()
    running: collections.Counter[str] = collections.Counter()
    for future, name in turns.holders.items():
        (cut if future.done() else running)[name or "a sync function"] += 1
    logger.warning(
        "a sync tool call has waited %s s for a worker thread (%d in line): all %d of its event loop's are busy; "
        "held by calls cut by a timeout or close() whose threads run on: %s; by calls running: %s "
        "(kernel.threads_in_flight() lists the cut ones)",
        WAIT_WARNING,
        place,
        MAX_THREADS,
        _names(cut),
        _names(running),
    )


def _names(counts: collections.Counter[str]) -> str:
    if not counts:
        return "none"
    shown = counts.most_common(_NAMED)
    text = ", ".join(name if count == 1 else f"{name} x{count}" for name, count in shown)
    rest = len(counts) - len(shown)
    return f"{text} and {rest} more" if rest else text


def _wake(turns: _Turns) -> None:
    """Have a thread (idle, or a new one) work for ``turns``'s loop."""
    try:
        worker = _idle.pop()
    except IndexError:
        worker = _Worker()
        _alive.add(worker)
        worker.start()
    worker.wakes.put(turns)


class _Worker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="kavalai-tool", daemon=True)
        self.wakes: queue.SimpleQueue[_Turns | None] = queue.SimpleQueue()

    def run(self) -> None:
        wakes = self.wakes
        while True:
            try:
                turns = wakes.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                try:
                    _idle.remove(self)  # atomic: either this thread leaves, or a caller took it and a wake is coming
                except ValueError:
                    turns = wakes.get()
                else:
                    return
            if turns is None:  # the interpreter is exiting
                return
            _work(turns, self)
            del turns


def _work(turns: _Turns, worker: _Worker) -> None:
    """Run the loop's waiting calls, one after another, until none is left (``worker`` is then idle)."""
    while (job := turns.take(worker)) is not None:
        loop, future, context, func, on_return = job
        del job
        error: BaseException | None = None
        if future.done():  # its caller was cut (a deadline, close()) before a thread took it: never start it
            result = None
        else:
            try:
                result, error = context.run(func), None
            except Exception as exc:  # handed to the awaiting task
                result, error = None, exc
            except (SystemExit, KeyboardInterrupt) as exc:  # asyncio re-raises them out of the loop: _thread_exit
                result, error = None, _thread_exit(exc)
            except BaseException as exc:  # any other reaches the awaiting task as it was raised, as from a coroutine
                result, error = None, exc
        if on_return is not None:
            on_return()
        turns.returned()
        turns.finish(loop, (future, result, error))
        del loop, future, context, func, result, error, on_return


def _thread_exit(exc: BaseException) -> RuntimeError:
    """A ``SystemExit`` or ``KeyboardInterrupt`` a function raised in a worker thread, as an error of the call: in a
    thread neither ends the process (``sys.exit`` ends only its thread; a real Ctrl-C reaches the main thread only),
    but handed to an asyncio task as it is, asyncio would re-raise it out of the event loop and end the process."""
    error = RuntimeError(f"{exc!r} raised in a worker thread, where it ends nothing but the call")
    error.__cause__ = exc
    return error


_EXIT_WAIT: Final = 1.0  # seconds the exit waits, in all, for idle threads to end


@atexit.register
def _stop_idle() -> None:
    """End the worker threads and wait for them (briefly): see the module's docstring. Every one is told, not only
    those idle: a thread that has just handed back its last result may not have gone idle yet (it would then wait
    for work until the interpreter stops it by force)."""
    workers = list(_alive)
    _idle.clear()
    for worker in workers:
        worker.wakes.put(None)  # an idle thread ends at once; a busy one when its call returns
    for worker in workers:
        worker.join(_EXIT_WAIT / max(len(workers), 1))
