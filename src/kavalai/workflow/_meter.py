"""The meter of workflow evaluation: every template rendering and expression evaluation runs under one.

Sizes are bounded per operation (:mod:`kavalai.workflow._sizes`); the meter bounds the *work*. The sandbox counts its
operations here (a loop step, a ``+`` weighted by the items it copies, a join by its parts) and every
:data:`CHECK_EVERY` counted operations the meter checks, at the cost of one subtraction per operation in between:

- the deadline of the run (or call, or agent) around the evaluation: past it, :class:`EvaluationDeadlineError`;
- the evaluation's budget of operations (:data:`MAX_OPERATIONS`): past it, :class:`EvaluationLimitError` (a loop
  that copies what it built, ``{% set ns.x = ns.x + [i] %}``, is quadratic while each of its steps is small);
- the run's memory budget (``RUN_FACTOR`` x ``max_value_size``, :mod:`kavalai.workflow._ledger`) against what its
  operations built in all (each counted when built, what was let go too: an over-estimate of what it holds);
- whether its owner stopped it (the run was cancelled while it ran in a worker thread);
- its slice of the event loop: :func:`evaluate` runs work that may be long (a template with loops) in a worker
  thread, and other work on the loop for at most :data:`SLICE` seconds, begun again in a worker thread when it
  needs longer, or before one operation on more than :data:`HEAVY` items (``sorted()`` of a huge list: one call,
  which no check can cut), so the loop is never held for longer than a slice and one bounded operation.

Comparisons, membership and sorting are charged by what they go over (:mod:`kavalai.workflow._comparing`), so
``big == twin`` or ``x in big`` in a loop reaches the checks as copying does.

The evaluation entry points (:func:`kavalai.workflow._templates.render_metered`,
:meth:`kavalai.workflow._expressions.Expression.evaluate_async` and kaval's ``evaluate_async``; the synchronous
``Expression.evaluate`` for callers off the loop) each start a :class:`Meter`;
``tests/workflow/test_meter.py`` finds them in the source and fails when one evaluates without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Final, TypeVar

import anyio

from kavalai.kernel import current_deadline
from kavalai.workflow._ledger import RUN_FACTOR
from kavalai.workflow._sizes import max_size

__all__ = [
    "CHECK_EVERY",
    "HEAVY",
    "MAX_OPERATIONS",
    "SLICE",
    "EvaluationDeadlineError",
    "EvaluationLimitError",
    "Meter",
    "current_meter",
    "evaluate",
    "tick",
    "weight",
    "work",
]

T = TypeVar("T")

#: Counted operations between two checks of the deadline, the budget and the slice.
CHECK_EVERY: Final = 4096
#: The most counted operations one evaluation may take (a loop step counts 1, a ``+`` of lists the items it copies).
MAX_OPERATIONS: Final = 1_000_000_000
#: Seconds an evaluation may hold the event loop before it is begun again in a worker thread.
SLICE: Final = 0.02
#: An operation on more items or characters than this is never begun on the event loop: one call of ``sorted()``,
#: ``max()`` or ``sum()`` on a huge list is not sliced, so the evaluation is begun again in a worker thread first.
HEAVY: Final = 16 * CHECK_EVERY

_monotonic: Final = time.monotonic
_current: ContextVar[Meter | None] = ContextVar("kavalai_meter", default=None)


class EvaluationDeadlineError(TimeoutError):
    """The deadline of what runs the evaluation (a workflow run, an agent, a call) passed while it ran."""


class EvaluationLimitError(OverflowError):
    """The evaluation took more operations than its budget."""


class _SliceSpent(Exception):
    """The evaluation used its slice of the event loop: :func:`evaluate` begins it again off the loop."""


class Meter:
    """Counts one evaluation's operations and checks its deadline, budget, owner and slice every few thousand.

    Args:
        deadline: ``time.monotonic()`` time past which the evaluation fails, or ``None``.
        budget: the most operations it may count.
        memory: the most characters or items its operations may build in all (default: the run's memory budget,
            ``RUN_FACTOR`` times the size limit in force): what it holds can be no more.
    """

    __slots__ = ("_built", "_countdown", "_spent", "budget", "deadline", "memory", "slice_end", "stopped")

    def __init__(self, *, deadline: float | None, budget: int = MAX_OPERATIONS, memory: int | None = None) -> None:
        self.deadline = deadline
        self.budget = budget
        self.memory = RUN_FACTOR * max_size() if memory is None else memory
        self._built = 0
        self.slice_end: float | None = None
        self.stopped = False
        self._countdown = CHECK_EVERY
        self._spent = 0

    @property
    def spent(self) -> int:
        """Operations counted so far."""
        return self._spent + CHECK_EVERY - self._countdown

    def tick(self, weight: int = 1) -> None:
        """Count ``weight`` operations (past the first, the items or characters an operation built); every
        :data:`CHECK_EVERY` of them, check the limits."""
        self._countdown -= weight
        if weight > 1:
            self._built += weight - 1
            if weight > HEAVY and self.slice_end is not None:  # on the loop: a long operation is not begun here
                self._check()
                raise _SliceSpent
        if self._countdown <= 0:
            self._check()

    def work(self, operations: int) -> None:
        """Count ``operations`` that build nothing (a filter going over its input, an item a filter yields):
        the same checks as :meth:`tick`, nothing added to what the evaluation built."""
        self._countdown -= operations
        if operations > HEAVY and self.slice_end is not None:  # on the loop: a long operation is not begun here
            self._check()
            raise _SliceSpent
        if self._countdown <= 0:
            self._check()

    def _check(self) -> None:
        self._spent += CHECK_EVERY - self._countdown
        self._countdown = CHECK_EVERY
        if self.stopped:
            raise EvaluationDeadlineError("the evaluation was stopped: the run around it ended")
        now = _monotonic()
        if self.deadline is not None and now >= self.deadline:
            raise EvaluationDeadlineError("the evaluation ran past the deadline of the run")
        if self._spent > self.budget:
            raise EvaluationLimitError(f"the evaluation would take more than {self.budget:,} operations")
        if self._built > self.memory:
            raise EvaluationLimitError(
                f"the evaluation would build more than {self.memory:,} characters or items in all (the run's memory "
                "budget); a loop probably copies what it built at every step"
            )
        if self.slice_end is not None and now >= self.slice_end:
            raise _SliceSpent

    def run(self, work: Callable[[], T]) -> T:
        """``work()`` with this meter as the current one (what :func:`tick` counts on)."""
        token = _current.set(self)
        try:
            return work()
        finally:
            _current.reset(token)


def current_meter() -> Meter | None:
    """The meter of the evaluation running in this context, or ``None``."""
    return _current.get()


def tick(weight: int = 1) -> None:
    """Count ``weight`` operations on the current meter (nothing outside an evaluation)."""
    meter = _current.get()
    if meter is not None:
        meter.tick(weight)


def work(operations: int = 1) -> None:
    """Count ``operations`` that build nothing on the current meter (nothing outside an evaluation)."""
    meter = _current.get()
    if meter is not None:
        meter.work(operations)


def weight(*operands: object) -> int:
    """What an operation on ``operands`` counts: 1, plus the items or characters of each text, list or tuple (what
    a ``+`` or a join copies)."""
    total = 1
    for operand in operands:
        if isinstance(operand, str | bytes | list | tuple):
            total += len(operand)
    return total


async def evaluate(work: Callable[[], T], *, again: Callable[[], None] | None = None, long: bool = False) -> T:
    """``work()`` under a new :class:`Meter` with the deadline around it, never holding the event loop for more than
    a :data:`SLICE`: in a worker thread when the caller knows it may be ``long`` (a template with loops), else on the
    loop for at most a slice and, when it needs longer, begun again in a worker thread (``again()`` first undoes
    what the first attempt recorded). If the caller is cancelled, the meter stops the thread's work at its next check
    and the caller waits for that. ``work`` must be free of effects other than those ``again`` undoes."""
    deadline = current_deadline()
    if not long:
        meter = Meter(deadline=deadline)
        meter.slice_end = _monotonic() + SLICE
        try:
            return meter.run(work)
        except _SliceSpent:
            pass
        if again is not None:
            again()
    return await _off_loop(Meter(deadline=deadline), work)


async def _off_loop(meter: Meter, work: Callable[[], T]) -> T:
    """``work()`` under ``meter`` in a worker thread that its caller owns: cancelled, the caller stops the meter and
    waits (shielded) until the thread has ended the work, at its next check, so no evaluation outlives its run (or
    the kernel's ``close()``). Work not begun by then never begins."""
    lock, ended = threading.Lock(), threading.Event()
    begun = False

    def job() -> T:
        nonlocal begun
        with lock:
            if meter.stopped:
                raise EvaluationDeadlineError("the evaluation was stopped before it began")
            begun = True
        try:
            return meter.run(work)
        finally:
            ended.set()

    try:
        return await anyio.to_thread.run_sync(job, abandon_on_cancel=True)
    except BaseException:
        with lock:
            meter.stopped = True
            waiting = begun
        if waiting and not ended.is_set():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ended.wait)
        raise
