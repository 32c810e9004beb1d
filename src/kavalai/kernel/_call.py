"""One tool call as the middleware chain sees it, the per-call context a tool can read, and deadlines.

A :class:`ToolCall` is built by :meth:`Kernel.call_tool` after the arguments are validated, handed down the kernel's
middleware chain and finally to the tool's adapter. The same object is the call's context and its record in the
kernel's in-flight registry:

- **Context.** While the call runs it is the value of a :class:`~contextvars.ContextVar`, set when the call starts
  and reset in ``finally``, so :func:`current_call` is a plain look-up. The value travels the way every context
  variable does: into what the tool awaits, into tasks started inside the call (``asyncio.create_task``,
  ``asyncio.shield``, ``asyncio.wait_for`` copy the context), and into worker threads started with a copy of the
  context (``asyncio.to_thread``, ``contextvars.copy_context().run``; the adapters do this for sync tools).
- **Ownership.** The call knows the task it runs in and that task's cancellation count when it started. The kernel
  cuts *the call's own work* (``close()``: :data:`CLOSED`; its deadline: :data:`TIMED_OUT`) by cancelling that task
  on its own event loop, and the call turns that one cancellation into its own error, taking back the request (see
  :mod:`kavalai.kernel._cancel`), so a caller that is itself cancelled still sees ``CancelledError``.
- **Deadlines.** A call's :attr:`ToolCall.deadline` is the smaller of its own timeout and what remains of whatever
  contains it: the call it is made from, or a :class:`Deadline` block (an agent run, a code-mode snippet, a workflow
  run, the ``io.kavalai/deadline`` an MCP client sent to ``kavalai serve``). Nested calls inherit it without an
  argument; adapters pass :meth:`ToolCall.remaining` downstream.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import heapq
import inspect
import itertools
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

from pydantic import BaseModel

from kavalai.errors import DeadlineExceededError
from kavalai.kernel._cancel import running_task, withdraw_cut
from kavalai.kernel._seconds import limit_seconds
from kavalai.secrets import get_logger

if TYPE_CHECKING:
    from kavalai.kernel._definition import ToolDefinition

__all__ = [
    "CLOSED",
    "TIMED_OUT",
    "CallNext",
    "Deadline",
    "Middleware",
    "ProgressCallback",
    "ToolCall",
    "bind_current_call",
    "current_call",
    "current_deadline",
    "deadline",
    "deadline_paused",
]

logger = get_logger("kavalai")

R = TypeVar("R")

#: Why a call's work was cut: the kernel was closed, or the call's deadline passed.
CLOSED: Final = "kernel closed"
TIMED_OUT: Final = "deadline passed"

_next_id = itertools.count(1).__next__
_monotonic: Final = time.monotonic
# The innermost context: the ToolCall running, or a Deadline block (which knows the call around it).
_current: ContextVar[ToolCall | Deadline | None] = ContextVar("kavalai_current_call", default=None)


class _Scope:
    """What a tool call and a deadline block share: an absolute deadline, the task whose work they can cut, and
    the scope whose deadline they inherited (``_source``; ``None`` when their own limit is the nearer one, so that
    no scope refers to itself and an ended one is freed at once, not by the cycle collector)."""

    # Slots, all written at construction: reads of them are the interpreter's fastest attribute reads, and a
    # call builds no instance dict.
    __slots__ = ("__weakref__", "_baseline", "_cut", "_done", "_source", "_task", "_timer", "deadline", "parent")

    deadline: float | None
    parent: ToolCall | Deadline | None
    _source: _Scope | None
    _task: asyncio.Task[Any] | None
    _baseline: int
    _cut: str | None
    _timer: set[_Scope] | None  # the timer slot this scope waits in (see _arm), until it ends
    _done: bool  # the work has ended: nothing may cut the task for it any more

    def __init__(self) -> None:
        self.deadline = self.parent = self._source = self._task = self._cut = self._timer = None
        self._baseline = 0
        self._done = False

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never below 0), or ``None`` when there is none."""
        deadline = self.deadline
        if deadline is None:
            return None
        return max(0.0, deadline - _monotonic())

    @property
    def expired(self) -> bool:
        """Whether this scope's deadline has passed and its work was cut for it."""
        return self._cut == TIMED_OUT

    def cut(self, reason: str) -> bool:
        """Interrupt the work of this scope: its task receives ``CancelledError`` at its next suspension, which
        the scope turns into its own error. Call it on the task's own event loop. Return whether it did."""
        task = self._task
        if self._cut is not None or self._done or task is None or task.done():
            return False
        self._cut = reason
        task.cancel(reason)
        return True

    def _bind(self, outer: ToolCall | Deadline | None, limit: float | None) -> None:
        """Take the nearer of ``limit`` (seconds from now) and the outer scope's deadline, and arm a timer that
        cuts this scope's work at it. Raises nothing; a deadline already passed is the caller's to refuse."""
        self.parent = outer
        inherited = outer.deadline if outer is not None else None
        if limit is not None:
            own = _monotonic() + limit
            if inherited is None or own < inherited:
                self.deadline, self._source = own, None
                return
        if inherited is not None and outer is not None:
            self.deadline, self._source = inherited, outer._origin()

    def _arm(self, own: float | None) -> None:
        """Arm the timer that cuts this scope at its deadline: ``own`` seconds from now when the scope's own limit
        is the nearer (given as is, so an event loop whose clock is its own, as a Temporal workflow's is, gets the
        same timer on every replay), else what is left of the deadline it inherited."""
        deadline = self.deadline
        source = self._source
        if source is not None and (entry := source._timer) is not None:
            if source._task is self._task:
                return  # one timer per deadline: the scope it comes from, in this same task, cuts it (see _cut_around)
            task, origin = self._task, source._task
            if task is not None and origin is not None and task.get_loop() is origin.get_loop():
                # Another task on the same loop (a shielded or spawned call under a block): it waits in the entry
                # of the scope its deadline comes from, so both are cut in one callback. With a timer of its own,
                # a tick earlier by rounding, the call could end and its error reach the block before the block's
                # own cut, which then never came (round 9 case 15, 1 run in 3,000 on a loaded machine).
                self._timer = entry
                entry.add(self)
                return
        if deadline is not None and self._task is not None:
            loop = self._task.get_loop()
            delay = own if own is not None and source is None else deadline - _monotonic()
            self._timer = _slot(loop, loop.time() + delay) if delay >= _EXACT else _own_timer(loop, delay)
            self._timer.add(self)

    def _origin(self) -> _Scope:
        """The scope whose limit this one's deadline is: the one it inherited it from, or itself."""
        source = self._source
        return self if source is None else source

    def _enter_task(self) -> None:
        task = self._task = running_task()  # None outside asyncio: nothing can be cut, the deadline is inherited
        if task is not None:
            self._baseline = task.cancelling()

    def _withdraw(self) -> bool:
        """After the work ended: take back this scope's cut; whether the task's cancellation was ours alone."""
        task = self._task
        return task is not None and withdraw_cut(task, self._baseline)

    def _cut_around(self) -> str | None:
        """Why the nearest scope around this one *in the same task* was cut (then a cancellation seen here is that
        cut, and this scope ends with the same kind of error), or ``None``. Walks the scopes' own parent links."""
        task = self._task
        scope = self.parent
        while scope is not None and scope._task is task:
            if scope._cut is not None:
                return scope._cut
            scope = scope.parent
        return None


class ToolCall(_Scope):
    """One call of one tool, with its validated arguments; also the context a running tool reads.

    Attributes:
        definition: the tool being called.
        arguments: the validated input model instance (a middleware may hand a new one to ``call_next``).
        deadline: the ``time.monotonic()`` time by which the call must end (on asyncio's own event loops that is
            ``loop.time()``), or ``None`` for no limit: the nearer of the call's own timeout and the deadline of
            the call, run or block around it.
        parent: the call (or :class:`Deadline` block) this call was made inside, or ``None``.
        metadata: a dict for middleware and tools to share facts about this call (an idempotency key, a span, ...).
        call_id: a string unique to this call within the process.
        progress: the caller's progress callback (``call_tool(..., progress=...)``), or ``None``; a tool reports
            through :meth:`report_progress`, an MCP server through its progress notifications.
    """

    __slots__ = (
        "_ended",
        "_held",
        "_id",
        "_limit",
        "_lingering",
        "_metadata",
        "_released",
        "arguments",
        "definition",
        "progress",
    )

    definition: ToolDefinition
    arguments: BaseModel
    progress: ProgressCallback | None
    _id: int
    _metadata: dict[str, Any] | None
    _limit: float | None  # the call's own timeout, for its error message
    _ended: concurrent.futures.Future[None] | None  # set when close() waits for this call to end
    _held: int  # pieces of the call's work running where nothing can cut them (a sync tool's worker thread)
    _lingering: set[ToolCall] | None  # the kernel's set of ended calls still held, once this one is in it
    _released: concurrent.futures.Future[None] | None  # set when close() waits for the holds to end

    def __init__(
        self, definition: ToolDefinition, arguments: BaseModel, progress: ProgressCallback | None = None
    ) -> None:
        # _Scope.__init__ inlined: one frame less per call.
        self.deadline = self.parent = self._source = self._task = self._cut = self._timer = None
        self._baseline = self._held = self._id = 0
        self._done = False
        self.definition = definition
        self.arguments = arguments
        self.progress = progress
        self._metadata = self._limit = self._ended = self._lingering = self._released = None

    @property
    def uri(self) -> str:
        """The URI of the tool being called."""
        return self.definition.name

    @property
    def call_id(self) -> str:
        """A string unique to this call within the process (``"call-17"``); made when first read."""
        if not self._id:
            self._id = _next_id()
        return f"call-{self._id}"

    @property
    def metadata(self) -> dict[str, Any]:
        """Facts about this call that middleware and tools share; empty until something writes to it."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the call runs on (``None`` for a call driven outside any task)."""
        return self._task.get_loop() if self._task is not None else None

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the caller how far the call is (``progress`` of ``total``, with an optional message); nothing
        happens when the caller gave no progress callback. A callback that fails is logged, not raised."""
        callback = self.progress
        if callback is None:
            return
        try:
            outcome = callback(progress, total, message)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # the caller's display failing must not fail the tool
            logger.warning("The progress callback of %s failed", self.uri, exc_info=True)

    def close_from_outside(self, ended: concurrent.futures.Future[None], inflight: set[ToolCall]) -> None:
        """Cut this call because its kernel is closing, and resolve ``ended`` once the call has ended. Run on the
        call's own event loop (``loop.call_soon_threadsafe``), where the call itself adds itself to ``inflight``
        (its kernel's registry) and takes itself out: a call no longer there has ended."""
        if self not in inflight:
            if not ended.done():
                ended.set_result(None)
            return
        self.cut(CLOSED)  # a call cut already (a deadline, another close()) is waited for all the same
        first = self._ended
        if first is None:
            self._ended = ended
        else:  # a second close() at once: it returns when the call has ended too, not at once
            first.add_done_callback(lambda _: _resolve(ended))

    def hold(self) -> Callable[[], None]:
        """Count a piece of this call's work that nothing can cut (a sync tool's worker thread) until the function
        returned is called, once, from any thread. A call that ends (cut by its deadline or ``close()``) while
        held is listed by its kernel's ``threads_in_flight()`` until then, and ``close()`` waits for it."""
        self._held += 1
        released: list[bool] = []

        def release() -> None:
            if released:
                return
            released.append(True)
            self._held -= 1
            if not self._held:  # read after the write: _finish() writes _lingering, then reads _held
                lingering = self._lingering
                if lingering is not None:
                    lingering.discard(self)
                _resolve(self._released)

        return release

    def _finish(self, lingering: set[ToolCall]) -> None:
        """The call has ended (its ``finally``): disarm its timer, tell a waiting ``close()``, and while work of it
        still runs (:meth:`hold`), stay in ``lingering``, its kernel's set of such calls."""
        self._done = True
        timer = self._timer
        if timer is not None:
            timer.discard(self)
        _resolve(self._ended)
        if self._held:
            self._lingering = lingering
            lingering.add(self)
            if not self._held:  # released in between, by the worker thread
                lingering.discard(self)

    def await_release(self) -> concurrent.futures.Future[None]:
        """A future resolved once no work of this call is held any more (at once if none is)."""
        released = self._released
        if released is None:
            released = self._released = concurrent.futures.Future()
        if not self._held:  # read after the write: release() writes _held, then reads _released
            _resolve(released)
        return released

    def __repr__(self) -> str:
        return f"<ToolCall {self.uri} {self.call_id}>"


class Deadline(_Scope):
    """A block of work with a deadline that the tool calls inside it inherit: ``with deadline(2.0): ...``.

    Entered inside a task (it is a cancel scope, like ``asyncio.timeout``): when the deadline passes, the block is
    cut; the calls inside it end with :class:`~kavalai.errors.ToolTimeoutError` naming their tool, and the block
    itself with :class:`~kavalai.errors.DeadlineExceededError` when the cut reaches its end as ``CancelledError``.
    Its exit follows ``asyncio.timeout``'s rules: a body that caught its cut (or a tool call's timeout error) and
    finished normally ends normally, one that raised something else ends with that, and a cancellation of the task
    by anyone else goes on as ``CancelledError``. Read :attr:`expired` to learn whether the deadline passed.
    A block is entered once (a second ``with`` on the same object raises ``RuntimeError``, as ``asyncio.timeout``
    does): make a new one for each block. It is left in the task that entered it: leaving it in another raises
    ``RuntimeError`` saying so (it then cuts nothing any more), and undoes what the entry did in the entering task,
    as ``asyncio.timeout``'s exit does: the block is no longer current there, and its cut of that task is
    withdrawn. ``async with`` works too, the same block.
    A block inside another call or block gets the nearer of its own limit and theirs. Agents
    (``Agent.run(timeout=)``), code mode (``CodeMode(max_seconds=)``), workflow runs and ``kavalai serve`` (an MCP
    client's ``io.kavalai/deadline``) are such blocks.

    Args:
        seconds: the block's own limit from now; ``None`` for none of its own (it still carries the deadline of
            what contains it).
        what: what the block is, for the error message (``"agent run"``, ``"code-mode snippet"``).
    """

    __slots__ = ("_left", "_token", "call", "seconds", "what")

    def __init__(self, seconds: float | None, *, what: str = "block") -> None:
        super().__init__()
        self.seconds = limit_seconds(seconds, what="deadline", remaining=True)
        self.what = what
        self.call: ToolCall | None = None  # the tool call this block runs inside, for current_call()
        self._token: contextvars.Token[ToolCall | Deadline | None] | None = None
        self._left = False  # left in another task: the entering task's context still holds it (see open_scope)

    def __enter__(self) -> Deadline:
        if self._done or self._token is not None:  # its deadline was fixed at the first entry, as asyncio.timeout's
            raise RuntimeError(f"This deadline ({self.what}) was already entered: make a new one for each block.")
        outer = _open_scope()
        self.call = outer if isinstance(outer, ToolCall) else (outer.call if outer is not None else None)
        self._bind(outer, self.seconds)
        self._enter_task()
        self._token = _current.set(self)
        self._arm(self.seconds)  # a deadline already passed cuts the block at its first suspension (due at once)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done = True
        if self._timer is not None:
            self._timer.discard(self)
        token, self._token = self._token, None
        if self._task is not None and running_task() is not self._task:
            # Left in another task than the one that entered it (an `async with` split across tasks): undo what the
            # entry did there, as asyncio.timeout's exit does wherever it runs. The entering task's context variable
            # cannot be reset from here (a token belongs to its context), so the block is marked left and every read
            # of the variable skips it (_open_scope): that task sees what it saw before the entry. A cut the block
            # made of that task is withdrawn. The misuse is still refused, saying so; it cuts nothing any more.
            self._left = True
            if self._cut is not None:
                withdraw_cut(self._task, self._baseline)
            raise RuntimeError(
                f"This deadline ({self.what}) was entered in one task and left in another task: enter and leave a "
                "block in the same task (as asyncio.timeout assumes)"
            )
        if token is not None:
            try:
                _current.reset(token)
            except ValueError:  # entered outside any task, left in another context (another thread's, a task's)
                self._left = True  # every read of the variable skips it: the entering context sees what it saw
                raise RuntimeError(
                    f"This deadline ({self.what}) was entered in one context and left in another (another thread, "
                    "or a task the entering code did not run in): enter and leave a block in the same thread or task"
                ) from None
        if self._cut is None:
            return
        # asyncio.timeout's rules: the block's own cut, seen as CancelledError, becomes its error; a block that
        # caught its cut and finished (or raised something else) ends as it ended.
        sole = self._withdraw()
        if exc_type is not None and issubclass(exc_type, asyncio.CancelledError) and sole:
            raise self.error() from None

    async def __aenter__(self) -> Deadline:
        """``async with deadline(2.0):`` as ``async with asyncio.timeout(2.0):`` is written: the same block."""
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def error(self) -> DeadlineExceededError:
        """The error this block ends with when its deadline passes."""
        shown = "" if self.seconds is None else f" of {self.seconds:g} s"
        return DeadlineExceededError(f"The {self.what} ran past its deadline{shown}.", timeout=self.seconds)


# Timers: the scopes whose deadlines fall in the same slot of _SLOT seconds on a loop share one loop timer, armed at
# the slot's end (a scope is cut at most _SLOT late, never early). A scope joins its slot's set when armed and
# leaves it when it ends: a set add and discard instead of a TimerHandle built, pushed on the heap and cancelled per
# scope. A loop's slots live in a dict the loop holds weakly; the last loop's is cached for the next scope.
# A deadline less than _EXACT away gets a loop timer of its own, at the deadline itself: 4 ms late is nothing to a
# REST call's 30 s but would let a call with a timeout of 1 ms that takes 3 ms finish (a short limit is a test's,
# or a probe's, that means it); the lateness a slot adds is then at most 4% of the limit.
_SLOT: Final = 0.004
_EXACT: Final = 0.1
_ceil: Final = math.ceil
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, set[_Scope]]] = weakref.WeakKeyDictionary()
# The last loop that armed a timer (weakly: a global holding a loop would keep a closed loop, and all it references,
# alive), its slots, and whether its clock is time.monotonic (asyncio's own loops) rather than one of its own.
_last: tuple[weakref.ref[asyncio.AbstractEventLoop] | None, dict[int, set[_Scope]], bool] = (None, {}, True)


def _slots_of(loop: asyncio.AbstractEventLoop) -> tuple[dict[int, set[_Scope]], bool]:
    """``loop``'s timer slots and whether its clock is ``time.monotonic`` (asyncio's own loops), cached."""
    global _last
    cached, slots, monotonic = _last  # one read: another thread's loop may replace it meanwhile
    if cached is None or cached() is not loop:
        slots = _slots.get(loop) or _slots.setdefault(loop, {})
        monotonic = isinstance(loop, asyncio.BaseEventLoop) and type(loop).time is asyncio.BaseEventLoop.time
        _last = (weakref.ref(loop), slots, monotonic)
    return slots, monotonic


def _slot(loop: asyncio.AbstractEventLoop, when: float) -> set[_Scope]:
    """The set of scopes cut at the end of the slot holding ``when`` (a time of ``loop``), armed if new."""
    slots = _slots_of(loop)[0]
    number = _ceil(when / _SLOT)
    scopes = slots.get(number)
    if scopes is None:
        scopes = _open(loop, slots, number)
    return scopes


def arm_own_limit(call: ToolCall, loop: asyncio.AbstractEventLoop, limit: float) -> None:
    """A call in a task, with nothing around it, whose own ``limit`` (seconds from now, above 0) is its deadline:
    :meth:`_Scope._bind` and :meth:`_Scope._arm` for that common case (every REST and MCP call has a timeout),
    reading the clock once on asyncio's own loops."""
    if limit < _EXACT:
        call.deadline = _monotonic() + limit
        call._limit = limit
        call._timer = _own_timer(loop, limit)
        call._timer.add(call)
        return
    slots, monotonic = _slots_of(loop)
    now = _monotonic()
    call.deadline = now + limit
    call._limit = limit
    number = _ceil(((now if monotonic else loop.time()) + limit) / _SLOT)
    scopes = slots.get(number)
    if scopes is None:
        scopes = _open(loop, slots, number)
    scopes.add(call)
    call._timer = scopes


class _Exact:
    """A loop's deadlines less than :data:`_EXACT` away, each cut at its own time, and the one loop timer armed at the
    first. Deadlines set in the order they fall (calls with the same short timeout, one after another: the usual)
    are ``(time, set of the one scope)`` tuples appended to a deque, in order by construction; one that falls
    before the last appended goes to a heap of ``(time, number, set)`` tuples compared in C. A TimerHandle per
    deadline (``loop.call_later``) cost about 1.2 µs more a call: built in Python, and pushed and popped on the
    loop's heap with a comparison method of Python each step. The deque takes and gives each entry with no
    comparison: on the heap every entry cost a pop of some twenty tuple comparisons among the short calls of the
    last 0.1 s. A scope that ends first leaves its set; its entry, empty, is dropped when due or when it comes
    first as the timer is armed again, holding no scope meanwhile."""

    __slots__ = ("armed", "handle", "heap", "run")

    def __init__(self) -> None:
        self.run: collections.deque[tuple[float, set[_Scope]]] = collections.deque()
        self.heap: list[tuple[float, int, set[_Scope]]] = []
        self.armed: float | None = None  # the time the loop timer is armed for
        self.handle: weakref.ref[asyncio.Handle] | None = None  # the loop holds its timer; this does not


_exact: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Exact] = weakref.WeakKeyDictionary()
# The last loop that armed a short deadline (weakly, as _last) and its _Exact.
_last_exact: tuple[weakref.ref[asyncio.AbstractEventLoop] | None, _Exact] = (None, _Exact())
_entry_number = itertools.count().__next__  # orders deadlines due at the same time (a set is not comparable)
_NEVER: Final = math.inf


def _own_timer(loop: asyncio.AbstractEventLoop, delay: float) -> set[_Scope]:
    """The timer of a scope whose deadline is ``delay`` seconds away (less than :data:`_EXACT`): a set, as a slot
    is, whose scope is cut at the deadline itself (on the loop's clock), never early (see :class:`_Exact`)."""
    global _last_exact
    cached, exact = _last_exact  # one read: another thread's loop may replace it meanwhile
    if cached is None or cached() is not loop:
        exact = _exact.get(loop) or _exact.setdefault(loop, _Exact())
        _last_exact = (weakref.ref(loop), exact)
    scopes: set[_Scope] = set()
    now = loop.time()
    when = now + delay
    run = exact.run
    if not run or run[-1][0] <= when:
        run.append((when, scopes))
    else:
        heapq.heappush(exact.heap, (when, _entry_number(), scopes))
    armed = exact.armed
    if armed is None or when < armed:
        _cancel(exact.handle)
        exact.armed = when
        context = contextvars.Context()
        # Due at once (the delay is below the clock's step): run next, as asyncio.timeout does; a timer would run
        # only after the steps already queued, the tool's next one among them, which could then finish uncut.
        timer = loop.call_soon(_fire_exact, loop, exact, context=context) if when <= now else None
        exact.handle = weakref.ref(timer or loop.call_at(when, _fire_exact, loop, exact, context=context))
    return scopes


def _fire_exact(loop: asyncio.AbstractEventLoop, exact: _Exact) -> None:
    """The first short deadline is due: cut the scopes of every entry due by now, in the order of their deadlines,
    and arm the loop timer at the next entry that still holds a scope (a loop may run a timer a clock tick early:
    an entry not due yet by the loop's clock waits for it)."""
    exact.armed = exact.handle = None
    run, heap = exact.run, exact.heap
    now = loop.time()
    while True:
        first = run[0][0] if run else _NEVER
        if heap and heap[0][0] < first:
            if heap[0][0] > now:
                break
            scopes = heapq.heappop(heap)[2]
        elif first <= now:
            scopes = run.popleft()[1]
        else:
            break
        for scope in list(scopes):
            scope.cut(TIMED_OUT)
    if exact.armed is None:  # a cut that armed an earlier timer meanwhile keeps it
        _arm_exact(loop, exact)


def _arm_exact(loop: asyncio.AbstractEventLoop, exact: _Exact) -> None:
    """Arm ``exact``'s loop timer at its first entry that still holds a scope, dropping those before it."""
    run, heap = exact.run, exact.heap
    while run and not run[0][1]:  # ended before their deadlines: nothing to cut at them
        run.popleft()
    while heap and not heap[0][2]:
        heapq.heappop(heap)
    when = min(run[0][0] if run else _NEVER, heap[0][0] if heap else _NEVER)
    if when < _NEVER:
        exact.armed = when
        exact.handle = weakref.ref(loop.call_at(when, _fire_exact, loop, exact, context=contextvars.Context()))


class _Due:
    """A loop's open slots in the order they end (a heap of slot numbers), and the one loop timer armed at the end
    of the first: a slot opened later than it is a number pushed on this heap of ints, not a TimerHandle pushed on
    the loop's heap, where it would wait out its whole timeout (every REST and MCP call's default: thousands of
    handles, each push and pop comparing them with a method of Python)."""

    __slots__ = ("armed", "handle", "numbers")

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.armed: int | None = None  # the slot the loop timer is armed for
        self.handle: weakref.ref[asyncio.Handle] | None = None  # the loop holds its timer; this does not


_due: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Due] = weakref.WeakKeyDictionary()


def _open(loop: asyncio.AbstractEventLoop, slots: dict[int, set[_Scope]], number: int) -> set[_Scope]:
    """A new slot: its set of scopes, its number on the loop's heap of slots, and the loop timer moved to its end
    when it is the first to end (in a context of its own: it holds no scope)."""
    scopes = slots[number] = set()
    due = _due.get(loop) or _due.setdefault(loop, _Due())
    heapq.heappush(due.numbers, number)
    if due.armed is None or number < due.armed:
        _cancel(due.handle)
        due.armed = number
        due.handle = weakref.ref(loop.call_at(number * _SLOT, _fire, loop, slots, due, context=contextvars.Context()))
    return scopes


def _fire(loop: asyncio.AbstractEventLoop, slots: dict[int, set[_Scope]], due: _Due) -> None:
    """The end of the first slot: cut its scopes (and those of any slot ending no later), and arm the loop timer at
    the end of the next."""
    numbers, armed = due.numbers, due.armed
    if armed is None:  # pragma: no cover - armed whenever its timer is
        return
    while numbers and numbers[0] <= armed:
        for scope in list(slots.pop(heapq.heappop(numbers), ())):
            scope.cut(TIMED_OUT)
    if due.armed == armed:  # not moved meanwhile (a cut that opened an earlier slot arms the timer itself)
        due.armed = due.handle = None
        if numbers:
            due.armed = numbers[0]
            handle = loop.call_at(numbers[0] * _SLOT, _fire, loop, slots, due, context=contextvars.Context())
            due.handle = weakref.ref(handle)


def _cancel(handle: weakref.ref[asyncio.Handle] | None) -> None:
    """Cancel the loop timer ``handle`` refers to, if it is still there. The per-loop timer state holds its timer
    weakly (the timer holds its loop, and that state is a value of a dict keyed weakly by the loop: a strong
    reference would keep every loop with a timer pending alive, closed or not)."""
    timer = handle() if handle is not None else None
    if timer is not None:
        timer.cancel()


def _resolve(future: concurrent.futures.Future[None] | None) -> None:
    if future is not None and not future.done():
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # resolved by another thread in between
            future.set_result(None)


def deadline(seconds: float | None, *, what: str = "block") -> Deadline:
    """A :class:`Deadline` block: ``with deadline(2.0): await kernel.call_tool(...)`` (see :class:`Deadline`)."""
    return Deadline(seconds, what=what)


#: ``callback(progress, total, message)``, sync or async: how a caller follows a long call.
ProgressCallback: TypeAlias = Callable[[float, "float | None", "str | None"], "Awaitable[None] | None"]

#: The rest of the chain: the next middleware, or at its end the adapter. Returns the tool's raw value.
CallNext: TypeAlias = Callable[[ToolCall], Awaitable[Any]]

#: A middleware: ``async def middleware(call, call_next) -> raw value``. It may read or replace ``call.arguments``,
#: record facts in ``call.metadata``, wrap ``await call_next(call)`` in whatever it needs (a span, a journal step,
#: a policy check), or answer without calling the tool at all. What it returns is coerced by the tool's output model.
Middleware: TypeAlias = Callable[[ToolCall, CallNext], Awaitable[Any]]


def current_call() -> ToolCall | None:
    """The call being run in this context (a tool reads its call id, deadline and metadata here), or ``None``."""
    scope = _open_scope()
    if scope is None or isinstance(scope, ToolCall):
        return scope
    return scope.call


def current_deadline() -> float | None:
    """The deadline (``time.monotonic()`` time) of the innermost call or block around this code, or ``None``."""
    scope = _open_scope()
    return scope.deadline if scope is not None else None


def bind_current_call(func: Callable[[], R]) -> Callable[[], R]:
    """``func`` made to run in a copy of this context, wherever it runs (a thread of your own, an executor), so
    that :func:`current_call` and inherited deadlines work there too. ``asyncio.to_thread`` does this already."""
    context = contextvars.copy_context()

    def bound() -> R:
        return context.run(func)

    return bound


@contextlib.contextmanager
def deadline_paused(call: ToolCall | None = None) -> Iterator[None]:
    """The clock of the current call's own deadline stops while the ``with`` block runs, and goes on from where it
    stopped after it: time the call spends waiting for a person (an operator asked whether an effect happened) is
    not the tool's time. A deadline the call inherited (a run's, a block's around it) still runs: only the call's
    own timeout is paused. Outside a call, or in a call whose deadline is inherited, the block runs as it is. A sync
    tool may pause from its worker thread: the timer is the event loop's, so it is stopped and armed again there.
    Pauses of one call are counted, wherever they run (nested, in two tasks or threads of the call at once): the
    clock stops at the first and runs again, from what was left then, when the last one ends.
    ``call``: the call to pause instead of the current one (a person asked on its behalf from another task, such as
    an MCP session's reader relaying a server's elicitation)."""
    current = _open_scope() if call is None else call
    if not isinstance(current, ToolCall) or current._task is None:
        yield
        return
    loop = current._task.get_loop()
    if _loop_here() is loop:
        _pause(current)
        try:
            yield
        finally:
            _resume(current)
        return
    if current._done or not loop.is_running():  # a cut call's thread going on: nothing to pause, no loop to wait for
        yield
        return
    _on_loop(loop, _pause, current)  # a worker thread: the loop's timers (and the pause counts) are the loop thread's
    try:
        yield
    finally:
        _on_loop(loop, _resume, current)


def _loop_here() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# The calls whose own deadline is paused now: [pauses running, seconds left at the first]. Read and written on the
# call's loop thread only; weak, so a call that ended while paused is not kept.
_paused: weakref.WeakKeyDictionary[ToolCall, list[Any]] = weakref.WeakKeyDictionary()


def _pause(call: ToolCall) -> None:
    """One more pause of ``call``: the first stops its own deadline (the one around it goes on), keeping what was
    left of it; ``None`` is kept when it has no deadline of its own to pause (inherited, none, cut or ended)."""
    pauses = _paused.get(call)
    if pauses is not None:
        pauses[0] += 1
        return
    if call._source is not None or call._timer is None or call._cut is not None or call._done:
        _paused[call] = [1, None]
        return
    left, outer = call.remaining(), call.parent
    _paused[call] = [1, left]
    _disarm(call)
    call._bind(outer, None)  # meanwhile the deadline around the call, if there is one
    call._arm(None)


def _resume(call: ToolCall) -> None:
    """One pause of ``call`` fewer: after the last, arm its own deadline again with what was left at the first."""
    pauses = _paused.get(call)
    if pauses is None:
        return
    pauses[0] -= 1
    if pauses[0]:
        return
    del _paused[call]
    left: float | None = pauses[1]
    if left is None:
        return
    _disarm(call)
    if call._done:  # it ended meanwhile: nothing to cut any more
        return
    call._bind(call.parent, left)
    call._arm(left)


def _on_loop(loop: asyncio.AbstractEventLoop, func: Callable[..., R], *args: Any) -> R | None:
    """Run ``func(*args)`` on ``loop``'s thread and wait for its result (``None`` when the loop is closed)."""
    done: concurrent.futures.Future[R] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(func(*args))
        except BaseException as exc:  # handed to the waiting thread
            done.set_exception(exc)

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:  # the loop is closed: the call ended with it
        return None
    return done.result()


def _disarm(scope: _Scope) -> None:
    """Take ``scope`` out of its timer slot and forget its deadline."""
    timer = scope._timer
    if timer is not None:
        timer.discard(scope)
    scope._timer = scope.deadline = scope._source = None


def enter_call(call: ToolCall) -> contextvars.Token[ToolCall | Deadline | None]:
    """Make ``call`` the current context (the kernel does this; reset the token when the call ends)."""
    return _current.set(call)


def exit_call(token: contextvars.Token[ToolCall | Deadline | None]) -> None:
    """Undo :func:`enter_call`."""
    _current.reset(token)


def calls_around() -> set[ToolCall]:
    """The call running in this context and every call it was made inside (a tool that closes its own kernel,
    from its task or from its worker thread, runs inside them: ``close()`` leaves them to finish)."""
    calls: set[ToolCall] = set()
    scope = _open_scope()
    while scope is not None:
        if isinstance(scope, ToolCall):
            calls.add(scope)
        scope = scope.parent
    return calls


def outer_scope() -> ToolCall | Deadline | None:
    """The innermost call or deadline block around this code (what a new call inherits from), or ``None``."""
    return _open_scope()


def _open_scope() -> ToolCall | Deadline | None:
    """The value of the context variable, past the blocks that are over without their entering task having left
    them: what the context held before such a block was entered (a task's variable is reset only in its context)."""
    return open_scope(_current.get())


def open_scope(scope: ToolCall | Deadline | None) -> ToolCall | Deadline | None:
    """``scope`` (a value of the context variable), or, when it is a block that is over though its entering task
    did not leave it (left in another task, or its task ended first, in a context another task runs in next: an
    ``asyncio.Runner``'s, a ``create_task(context=)``), the first scope around it still open. A hot path tests
    ``type(scope) is Deadline`` first and calls this only then."""
    while isinstance(scope, Deadline) and (scope._left or (scope._task is not None and scope._task.done())):
        scope = scope.parent
    return scope
