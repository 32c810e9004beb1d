"""The Temporal side of a kavalai run: the workflow ``kavalai.run`` (a :class:`DurableRun` whose journal makes each
step an activity, and the signal, update and query that answer its questions) and the activity ``kavalai.step``
that redoes one step on whichever worker takes it, heartbeating so that a cancel of the run reaches it.

These run inside a Temporal worker; :class:`~kavalai.durable.temporal.TemporalRunner` (the client side: starting,
answering, describing, cancelling runs, and the worker's life) registers them and finds itself here by task queue
(:data:`serving`).
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.exceptions import CancelledError as TemporalCancelledError
from temporalio.workflow import ActivityCancellationType

from kavalai.durable._definition import Definition, changed, definition_of
from kavalai.durable._doubt import ask_about, doubt_policy, in_doubt_result
from kavalai.durable._run import DurableRun, JsonValue, bind_run, cancelled_error
from kavalai.durable._runner import DurableTarget
from kavalai.durable._steps import run_tool_step
from kavalai.durable._temporal_origin import check_origin, moved_by
from kavalai.errors import DefinitionChangedError, FunctionKernelException, RunCancelledError
from kavalai.secrets import get_logger

if TYPE_CHECKING:
    from kavalai.durable.temporal import TemporalRunner

__all__ = [
    "ACTIVITY",
    "ANSWER",
    "ANSWER_FIRST",
    "HEARTBEAT_EVERY",
    "PENDING",
    "WORKFLOW",
    "KavalaiRun",
    "run_step",
    "runner_of",
    "serving",
]

WORKFLOW: Final = "kavalai.run"
ACTIVITY: Final = "kavalai.step"
ANSWER: Final = "kavalai.answer"  # the signal that answers a question of a run
PENDING: Final = "kavalai.pending"  # the query listing a run's unanswered questions
ANSWER_FIRST: Final = "kavalai.answer_first"  # the update that answers a question and says whether it won

logger = get_logger("kavalai.durable")

serving: dict[str, TemporalRunner] = {}  # by task queue: the runners whose worker runs in this process


def runner_of(task_queue: str) -> TemporalRunner:
    """The runner whose worker serves ``task_queue`` in this process."""
    runner = serving.get(task_queue)
    if runner is None:
        raise LookupError(f"No TemporalRunner serves task queue {task_queue!r} in this process.")
    return runner


class _TemporalJournal:
    """A run's steps as activities of the workflow."""

    def __init__(self, runner: TemporalRunner, target: str, run_id: str, run: KavalaiRun) -> None:
        self.runner, self.target, self.run_id, self.run = runner, target, run_id, run
        #: Why no step may begin any more: the run was cancelled (Temporal cancels the step in flight).
        self.stopped: FunctionKernelException | None = None

    def _cancelled(self) -> RunCancelledError:
        self.stopped = self.stopped or cancelled_error(self.run_id)
        assert isinstance(self.stopped, RunCancelledError)
        return self.stopped

    async def wait_for_answer(self, position: int, key: str, question: Any, timeout: float | None) -> Any:
        answers, pending = self.run.answers, self.run.pending
        pending[key] = question
        try:
            limit = None if timeout is None else timedelta(seconds=timeout)
            await workflow.wait_condition(lambda: key in answers, timeout=limit)
        except TimeoutError:
            return None
        finally:
            del pending[key]
        return answers.pop(key)

    async def record(self, position: int, name: str, execute: Any, request: JsonValue = None) -> JsonValue:
        if request is None:
            raise RuntimeError(
                f"Step {name!r} of run {self.run_id} cannot run on Temporal: it has no JSON form to run as an "
                "activity (a step made with kavalai.durable.step needs request=...)."
            )
        policy = doubt_policy(request, self.runner.on_doubt)  # None: the step may be tried again safely
        timeout = request.get("timeout") if isinstance(request, dict) else None
        made, store = request, self.runner.store
        if store is not None:  # written again on each replay: a content hash, stored once
            request = store.keep_now(request, self.runner.inline_limit)
        task = {"target": self.target, "run_id": self.run_id, "position": position, "request": request}
        limit = timedelta(seconds=float(timeout or self.runner.step_timeout))
        try:
            return await self._activity(task, name, limit, retry=policy in (None, "replay"))
        except ActivityError as exc:
            move = moved_by(exc)  # an attempt after the first found the tool's server moved (the origin rule)
            if move is not None:
                policy = "ask" if policy == "ask" else "fail"
            elif policy is None or policy == "replay" or not isinstance(made, dict):
                raise
        # The activity started and ended without a result (its worker died, it timed out): nobody knows whether
        # the effect happened. The failure is in the history, so a replay of the run takes the same branch.
        if policy == "fail":
            return in_doubt_result(self.run_id, position, name, made, move)

        async def again() -> JsonValue:  # the operator says it did not happen: sent again, once, with its key
            try:
                return await self._activity(task, f"{name} (retry)", limit, retry=False)
            except ActivityError:
                return in_doubt_result(self.run_id, position, name, made)

        return await ask_about(self.run_id, position, name, made, self.wait_for_answer, again, move)

    async def _activity(self, task: dict[str, Any], name: str, limit: timedelta, *, retry: bool) -> JsonValue:
        try:
            result = await workflow.execute_activity(
                ACTIVITY,
                task,
                start_to_close_timeout=limit,
                # a worker that died mid-step is noticed by its missing heartbeats, not after the whole limit: the
                # step is then retried, or in doubt (its policy), promptly
                heartbeat_timeout=timedelta(seconds=self.runner.heartbeat_timeout),
                retry_policy=RetryPolicy(maximum_attempts=self.runner.max_attempts if retry else 1),
                # the step's identity: on replay Temporal matches each activity to its history by this id, so a
                # step that is not the one recorded there fails the workflow task (non-determinism), never takes
                # another step's result
                activity_id=name,
                # a cancel reaches the activity (through its heartbeats) and the run waits for its end, recorded
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=name,
            )
        except asyncio.CancelledError:  # the run's cancel, delivered while it waited for the step
            raise self._cancelled() from None
        except ActivityError as exc:  # the step, cancelled with its run: the run's cancel, never the step's result
            if isinstance(exc.cause, TemporalCancelledError):
                raise self._cancelled() from None
            raise
        running = asyncio.current_task()
        if running is not None and running.cancelling():  # cancelled while the step ended anyway: recorded, the last
            self._cancelled()
        return result


class _NoJournal:
    """The journal of the run an activity sees: a step inside an activity is part of that step, never its own."""

    async def record(self, position: int, name: str, execute: Any, request: JsonValue = None) -> JsonValue:
        raise RuntimeError(f"Step {name!r} cannot begin inside another step (a Temporal activity).")


_NO_JOURNAL: Final = _NoJournal()


#: The definition of a run begun without one among its arguments (by an earlier kavalai, or by hand).
_EARLIER: Final[Definition] = {"earlier": True}


@workflow.defn(name=WORKFLOW, sandboxed=False)
class KavalaiRun:
    """The Temporal workflow of every kavalai run."""

    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}
        self.answers: dict[str, Any] = {}
        self.taken: dict[str, Any] = {}  # every answer the run took, by key: the first one to each question

    @workflow.signal(name=ANSWER)
    def answer(self, key: str, value: Any) -> None:
        """An answer to the question ``key``: the first one wins (one not waited for is dropped: the run asks by
        key)."""
        self._take(key, value)

    @workflow.update(name=ANSWER_FIRST)
    def answer_first(self, key: str, value: Any) -> dict[str, Any]:
        """An answer to the question ``key``, told whether it won: ``{"state": "won"}``, ``{"state": "lost",
        "answer": <the winner>}``, or ``{"state": "not_pending"}``. Updates run one at a time in the run's history,
        so of answers racing exactly one wins."""
        return self._take(key, value)

    def _take(self, key: str, value: Any) -> dict[str, Any]:
        if key in self.taken:
            return {"state": "lost", "answer": self.taken[key]}
        if key not in self.pending:
            return {"state": "not_pending"}
        self.answers[key] = self.taken[key] = value
        return {"state": "won"}

    @workflow.query(name=PENDING)
    def questions(self) -> dict[str, Any]:
        """The questions the run waits to have answered, by key."""
        return dict(self.pending)

    @workflow.run
    async def run(self, target: str, payload: Any, definition: Definition | None = _EARLIER) -> Any:
        """Run the target's payload inside a :class:`DurableRun` whose steps are activities. A run this worker may
        not take up (begun under another definition, or by an earlier kavalai that keyed its steps by position) is
        ended by the worker with the :class:`DefinitionChangedError` recorded (:mod:`._temporal_refusal`), never
        left failing its workflow task for ever; with ``versioned=True`` each run stays on workers of its own."""
        info = workflow.info()
        runner = runner_of(info.task_queue)
        found = runner.target(target)
        if found is None:
            raise LookupError(f"This worker serves {', '.join(runner.targets) or 'nothing'}, not {target!r}.")
        if definition is _EARLIER:  # no definition among its arguments: begun by an earlier kavalai (or by hand)
            definition = None
            if workflow.unsafe.is_replaying():  # its history is checked for steps keyed by position
                runner.refuse(info.workflow_id, info.run_id, None)
        refused = changed(info.workflow_id, definition, definition_of(found))
        if refused is not None:
            runner.refuse(info.workflow_id, info.run_id, refused)
            raise refused
        journal = _TemporalJournal(runner, target, info.workflow_id, self)
        store, limit = runner.store, runner.inline_limit
        run = DurableRun(
            info.workflow_id, journal, store=store, inline_limit=limit, engine="temporal", steps_elsewhere=True
        )
        with bind_run(run):
            outcome = await found.run_journaled(payload)
        if isinstance(run.stopped, RunCancelledError):
            raise asyncio.CancelledError(str(run.stopped))  # Temporal records the run CANCELED, not completed
        if isinstance(run.stopped, DefinitionChangedError):  # a step's tool gone here (tool_gone): the workflow
            raise run.stopped  # task fails, and is tried again until a worker with the tool takes it: resumable
        return outcome if store is None else store.keep_now(outcome, limit)


@activity.defn(name=ACTIVITY)
async def run_step(task: dict[str, Any]) -> Any:
    """Redo one step from its request with this worker's targets: a tool call through the target's kernel (with
    the step's idempotency key), anything else through ``target.execute_step``."""
    runner = runner_of(activity.info().task_queue)
    target = runner.target(str(task["target"]))
    if target is None:
        raise LookupError(f"This worker does not serve {task['target']!r}.")
    store = runner.store
    request = task["request"] if store is None else await store.load(task["request"])
    run = DurableRun(str(task["run_id"]), _NO_JOURNAL, answers=runner.answers, engine="temporal")
    beats = asyncio.ensure_future(_heartbeats())  # how a cancel of the run reaches the step in flight
    try:
        result = await _redo(target, str(task["target"]), request, run, int(task["position"]))
    finally:
        await _ended(beats)  # on every path: nothing of the step outlives its activity
    return result if store is None else await store.keep(result, runner.inline_limit)


#: How often a step in flight heartbeats (and the worker passes its heartbeats on): how soon a cancel reaches it.
HEARTBEAT_EVERY: Final = timedelta(seconds=0.5)


async def _heartbeats(every: float = HEARTBEAT_EVERY.total_seconds()) -> None:
    """The activity's heartbeats, until the step ends: Temporal delivers a cancel of the run to an activity that
    heartbeats (as ``CancelledError``), which cuts the tool call in flight; the activity then ends cancelled in the
    run's history, which waits for that end."""
    while True:
        await asyncio.sleep(every)
        activity.heartbeat()


async def _ended(beats: asyncio.Future[None]) -> None:
    """Stop the step's heartbeats and wait until they have stopped (a cancel of the activity meanwhile still
    propagates)."""
    beats.cancel()
    await asyncio.wait([beats])
    if not beats.cancelled() and beats.exception() is not None:  # a heartbeat that failed: the step's end says more
        logger.debug("The heartbeats of a step ended with %r", beats.exception())


async def _redo(target: DurableTarget, name: str, request: dict[str, Any], run: DurableRun, position: int) -> Any:
    if request.get("kind") == "tool":
        kernel = target.durable_kernel
        if kernel is None:
            raise LookupError(f"{name!r} has no kernel to call {request.get('uri')!r} on.")
        if activity.info().attempt > 1 and request.get("origin") is not None:  # an earlier attempt may have sent it
            await check_origin(kernel, request)
        answers = getattr(target, "step_answers", None)  # who answers a server's requests for input meanwhile
        with nullcontext() if answers is None else answers(run, position):
            return await run_tool_step(kernel, request)
    execute_step = getattr(target, "execute_step", None)
    if execute_step is None:
        raise LookupError(f"{name!r} cannot redo a step of kind {request.get('kind')!r}.")
    return await execute_step(request)
