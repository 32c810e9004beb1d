"""The run a durable engine is executing, as the code inside it sees it: its id, its journal and its step counter.

An engine (DBOS, Temporal) starts a run by binding a :class:`DurableRun` to the context (:func:`bind_run`) and then
running the workflow or agent as usual. Every journaled thing the run does (a tool call, a model call, the tool
discovery at its start, an approval) asks :meth:`DurableRun.step` for its turn: the step gets its **identity**, and
the engine's :class:`Journal` either returns what it recorded under that identity in an earlier attempt of the run
or runs the step and records its JSON result. Code outside a durable run sees :func:`current_run` return ``None``
and runs as it always did.

A step's identity is where it is in the run's code, not how many steps came before it: the scope it runs in (a
workflow node and its visit, ``"b#2"``, set by :func:`step_scope`; nested for an agent node's agent), the step's
name (``"tool python://pay"``, ``"model openai/gpt-4.1"``) and how many steps of that name the scope began before
it: ``"b#2/tool python://pay#1"``. An agent outside a workflow has no scope: its call path is its steps' names and
counts (``"model openai/gpt-4.1#3"``). The idempotency key is made from the identity too, so a node added before
``b`` changes neither ``b``'s record nor its key.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from kavalai.durable._store import ResultStore
from kavalai.errors import FunctionKernelException, RunCancelledError
from kavalai.kernel import limit_seconds, required_seconds

__all__ = [
    "AnswerLog",
    "AnswerWaiter",
    "DurableRun",
    "Journal",
    "bind_run",
    "call_options",
    "cancelled_error",
    "current_run",
    "inside_step",
    "replayed",
    "step_key",
    "step_scope",
]

#: A step's result as journaled: JSON-ready data (dicts, lists, strings, numbers, booleans, ``None``).
JsonValue = Any

_current: ContextVar[DurableRun | None] = ContextVar("kavalai_durable_run", default=None)
_in_step: ContextVar[bool] = ContextVar("kavalai_durable_in_step", default=False)
_scope: ContextVar[str] = ContextVar("kavalai_durable_scope", default="")


class Journal(Protocol):
    """How an engine records steps: ``record(position, name, execute, request)`` returns the JSON result recorded
    for the step whose identity is ``name`` (see the module docstring), running the step first (and recording its
    result) when there is none. ``position`` is the step's rank in this attempt of the run: where an engine that
    numbers its steps (DBOS's own step log, Temporal's history) puts it, never what a recorded step is found by.

    An engine that runs the step in the run's own process awaits ``execute()``. One that runs steps elsewhere (a
    Temporal activity, possibly on another worker) sends ``request`` instead: JSON from which the run's target
    redoes the step (:meth:`DurableTarget.execute_step`); ``None`` when the step has no such form.
    """

    async def record(
        self, position: int, name: str, execute: Callable[[], Awaitable[JsonValue]], request: JsonValue = None
    ) -> JsonValue:
        """The result of the step whose identity is ``name``: recorded earlier, or run now."""
        ...


class AnswerWaiter(Protocol):
    """How an engine waits, durably, for an answer given from outside the run (see
    :meth:`DurableRun.wait_for_answer`): the question is published where :meth:`DurableRunner.pending` finds it, the
    answer (:meth:`DurableRunner.answer`) is kept by the engine until the run takes it, and the wait itself is
    journaled, so a run resumed after a crash waits on (or replays the answer it got)."""

    async def wait_for_answer(
        self, position: int, key: str, question: JsonValue, timeout: float | None
    ) -> JsonValue | None:
        """The answer to ``question`` (published under ``key``), or ``None`` when none came within ``timeout``."""
        ...


class AnswerLog(Protocol):
    """Answers given during a step (an MCP server's request for user input in the middle of a tool call), kept
    where the step's next attempt finds them: the step cannot journal them itself, since it is recorded only when it
    ends. Keys are the run id and ``"<kind>-<step position>-<n>"``. A question published and not yet answered is
    listed by :meth:`DurableRunner.pending` and answered by :meth:`DurableRunner.answer`."""

    async def lookup(self, run_id: str, key: str) -> tuple[bool, JsonValue]:
        """``(True, answer)`` when ``key`` is answered, else ``(False, None)``."""
        ...

    async def keep(self, run_id: str, key: str, question: JsonValue, answer: JsonValue) -> None:
        """Record ``answer`` to ``question`` under ``key``."""
        ...

    async def publish(self, run_id: str, key: str, question: JsonValue) -> None:
        """Put ``question`` up for an answer from outside (kept if it is there already)."""
        ...

    async def open_questions(self, run_id: str) -> dict[str, JsonValue]:
        """The run's published questions not answered yet, by key."""
        ...


class DurableRun:
    """One durable run, bound to the context while the engine executes it.

    Attributes:
        run_id: the run's id: the engine's workflow id, the same in every attempt of the run.
        journal: the engine's journal of steps.
        store: where results over ``inline_limit`` bytes are kept; the journal holds a reference.
        inline_limit: the largest result, in bytes of JSON, journaled inline.
        engine: the engine's name (``"dbos"``, ``"temporal"``), for messages.
        steps_elsewhere: whether the engine runs steps outside the run's code (Temporal activities): a tool's
            timeout then limits each attempt of the step where it runs, not the wait for it in the run's code.
            Such an engine keeps large results in the store where the step runs; the run's code only loads them,
            blocking (no thread can be started in Temporal's workflow loop).
    """

    def __init__(
        self,
        run_id: str,
        journal: Journal,
        *,
        store: ResultStore | None = None,
        inline_limit: int = 64 * 1024,
        engine: str = "durable",
        steps_elsewhere: bool = False,
        answers: AnswerLog | None = None,
    ) -> None:
        self.answers = answers
        self.run_id = run_id
        self.steps_elsewhere = steps_elsewhere
        self.journal = journal
        self.store = store
        self.inline_limit = inline_limit
        self.engine = engine
        self._position = 0
        self._counts: dict[tuple[str, str], int] = {}  # steps begun per (scope, name): the identity's count
        self._refused: FunctionKernelException | None = None  # why this process may not carry the run on (refuse)

    @property
    def steps(self) -> int:
        """How many steps the run has begun so far (in this attempt, replayed ones included)."""
        return self._position

    async def step(
        self, name: str, execute: Callable[[], Awaitable[JsonValue]], *, request: JsonValue = None
    ) -> JsonValue:
        """Journal one step: the next position is taken now, before anything is awaited, so concurrent steps
        take positions in the order they begin. Returns the JSON result, recorded or fresh.

        ``request`` is the step as JSON, for engines that run steps in another process (see :class:`Journal`).
        A result larger than ``inline_limit`` is put in the :attr:`store` and journaled as a reference; what this
        returns is always the value itself.
        """
        self.check()
        self._position += 1
        position = self._position
        identity = self._identity(name)
        store, limit = self.store, self.inline_limit

        async def run_and_keep() -> JsonValue:
            token = _in_step.set(True)
            try:
                value = await execute()
            finally:
                _in_step.reset(token)
            if store is None:
                return value
            return await store.keep(value, limit)

        recorded = await self.journal.record(position, identity, run_and_keep, request)
        if store is None:
            return recorded
        return store.load_now(recorded) if self.steps_elsewhere else await store.load(recorded)

    async def wait_for_answer(
        self, kind: str, question: Mapping[str, Any], *, timeout: float | None = None
    ) -> JsonValue | None:
        """Wait for an answer to ``question`` from outside the run, durably: the engine publishes the question
        under a key (``"<kind>-<position>"``) that :meth:`DurableRunner.pending` lists, and
        :meth:`DurableRunner.answer` (or ``kavalai answer``) delivers the answer, from any process. The wait takes a
        position like a step: a run resumed after a crash waits again for an unanswered question, and gets the
        recorded answer of one answered before. Returns the answer (JSON), or ``None`` after ``timeout`` seconds.

        Raises:
            RuntimeError: the engine cannot wait for answers from outside.
            ValueError: ``timeout`` is not ``None`` nor positive seconds (the one rule of
                ``kavalai.kernel.limit_seconds``: ``math.inf`` and more than a year are clamped to a year).
        """
        seconds = limit_seconds(timeout)
        self.check()
        self._position += 1
        key = f"{kind}-{self._position}"
        waiter = getattr(self.journal, "wait_for_answer", None)
        if waiter is None:
            raise RuntimeError(f"The {self.engine} engine cannot wait for an answer from outside the run.")
        published = {"key": key, "kind": kind, **question}
        answer: JsonValue | None = await waiter(self._position, key, published, seconds)
        return answer

    async def answer_in_step(
        self,
        key: str,
        question: Mapping[str, Any],
        ask: Callable[[], Awaitable[JsonValue]] | None,
        *,
        timeout: float | None = None,
        poll: float = 0.2,
    ) -> JsonValue | None:
        """An answer asked for during a step, kept in the engine's :class:`AnswerLog` so that the step's next
        attempt (after a crash) gets it again instead of asking again. ``ask`` answers in this process; without it
        the question is published and answered from outside (:meth:`DurableRunner.answer`), polled every ``poll``
        seconds for at most ``timeout`` (``None``: no limit; then ``None`` is returned). An engine without an answer
        log (Temporal) asks every time.

        Raises:
            RuntimeError: ``ask`` is ``None`` and the engine has no answer log.
            ValueError: ``timeout`` is not ``None`` nor positive seconds, or ``poll`` is not positive seconds (the one
                rule, ``kavalai.kernel.limit_seconds``).
        """
        seconds = limit_seconds(timeout)
        every = required_seconds(poll, what="poll")
        log = self.answers
        if log is None:
            if ask is None:
                raise RuntimeError(f"The {self.engine} engine cannot wait for an answer from outside during a step.")
            return await ask()
        found, value = await log.lookup(self.run_id, key)
        if found:
            return value
        if ask is not None:
            value = await ask()
            await log.keep(self.run_id, key, dict(question), value)
            return value
        await log.publish(self.run_id, key, dict(question))
        value = await _poll(log, self.run_id, key, seconds, every)
        if value is None:  # no answer in time: so it stays, in this attempt and the next
            await log.keep(self.run_id, key, dict(question), None)
        return value

    @property
    def stopped(self) -> FunctionKernelException | None:
        """Why the run may begin no more steps in this attempt (a :class:`~kavalai.errors.RunCancelledError`, a
        :class:`~kavalai.errors.RunInterruptedError`), or ``None``: the journal's verdict."""
        if self._refused is not None:
            return self._refused
        found = getattr(self.journal, "stopped", None)
        return found if isinstance(found, FunctionKernelException) else None

    def refuse(self, error: FunctionKernelException) -> FunctionKernelException:
        """Stop the run here, resumable: no step of it begins any more in this attempt, and the runner leaves it
        without an outcome (a :class:`~kavalai.errors.DefinitionChangedError`: a step's tool is missing here).
        Returns ``error``, for the caller to raise."""
        self._refused = self._refused or error
        return self._refused

    def check(self) -> None:
        """Raise why the run may begin no more steps, if it may not (checked before every step and wait)."""
        stopped = self.stopped
        if stopped is not None:
            raise stopped

    def _identity(self, name: str) -> str:
        """The identity of a step named ``name`` beginning now (counted: call it once per step)."""
        scope = _scope.get()
        count = self._counts[scope, name] = self._counts.get((scope, name), 0) + 1
        return f"{scope}/{name}#{count}" if scope else f"{name}#{count}"

    def next_identity(self, name: str) -> str:
        """The identity the next step named ``name`` will have here (nothing counted)."""
        scope = _scope.get()
        count = self._counts.get((scope, name), 0) + 1
        return f"{scope}/{name}#{count}" if scope else f"{name}#{count}"

    def next_key(self, payload: Any, name: str) -> str:
        """The idempotency key of the step named ``name`` about to begin here with ``payload`` as arguments."""
        return step_key(self.run_id, self.next_identity(name), payload)

    def __repr__(self) -> str:
        return f"<DurableRun {self.run_id} on {self.engine}, {self._position} steps>"


async def _poll(log: AnswerLog, run_id: str, key: str, timeout: float | None, poll: float) -> JsonValue | None:
    """Look for the answer every ``poll`` seconds, until ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        found, value = await log.lookup(run_id, key)
        if found:
            return value
        if deadline is not None and loop.time() >= deadline:
            return None
        await asyncio.sleep(poll if deadline is None else max(0.0, min(poll, deadline - loop.time())))


def replayed(position: int, recorded: tuple[str, JsonValue], name: str) -> JsonValue:
    """The result of step ``position`` as a journal recorded it, checked to be the step the run takes now.

    Raises:
        RuntimeError: the recorded step has another name: the run does not take the same path again.
    """
    recorded_name, value = recorded
    if recorded_name != name:
        raise RuntimeError(
            f"Step {position} of the run was {recorded_name!r} and is {name!r} on replay: the run does not "
            "take the same path again (is it deterministic outside its steps?)."
        )
    return value


def cancelled_error(run_id: str) -> RunCancelledError:
    """The error of a step not begun because its run is cancelled."""
    return RunCancelledError(
        f"Run {run_id} is cancelled: no step of it begins any more, and it is not resumed.", run_id=run_id
    )


def step_key(run_id: str, identity: str, payload: Any) -> str:
    """An idempotency key: the run id, the step's identity (spaces as ``-``) and a hash of its arguments (canonical
    JSON), so the same logical call has the same key in every attempt of the run, whatever steps were added or
    removed before it, and a different call a different one."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    digest = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:16]  # a lone surrogate hashes too
    return f"{run_id}.{identity.replace(' ', '-')}.{digest}"


@contextmanager
def step_scope(name: str) -> Iterator[str]:
    """The steps begun inside the ``with`` block are identified within the scope ``name`` (a workflow node and its
    visit, ``"b#2"``), nested in the scope around it; yields the scope's full name."""
    outer = _scope.get()
    scope = f"{outer}/{name}" if outer else name
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def current_run() -> DurableRun | None:
    """The durable run executing in this context, or ``None`` outside one (and inside a step, where the calls a
    step makes are part of it, not steps of their own)."""
    if _in_step.get():
        return None
    return _current.get()


def call_options() -> dict[str, Any]:
    """Extra ``call_tool`` options for code that calls tools inside a durable run: on an engine that runs steps
    elsewhere, ``{"timeout": None}`` (the step's own attempts are limited where they run; a deadline in the run's
    code would count the time a dead worker takes to be replaced); otherwise nothing."""
    run = current_run()
    return {"timeout": None} if run is not None and run.steps_elsewhere else {}


def inside_step() -> bool:
    """Whether this code runs inside a journaled step."""
    return _in_step.get()


@contextmanager
def bind_run(run: DurableRun) -> Iterator[DurableRun]:
    """Make ``run`` the current run for the code inside the ``with`` block (and the tasks it starts)."""
    token = _current.set(run)
    try:
        yield run
    finally:
        _current.reset(token)


def jsonable_mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping's JSON round trip: what the journal would hand back (tuples become lists, keys strings)."""
    loaded: dict[str, Any] = json.loads(json.dumps(value, ensure_ascii=False))
    return loaded
