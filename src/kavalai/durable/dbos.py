"""DBOS, the default durable engine: in-process, journaled in SQLite (one machine) or Postgres (many workers).

Every run is a DBOS workflow (``kavalai.run``) started through a DBOS queue under the run id, so the id deduplicates
it, the queue bounds how many run at once, and any process serving the queue can take it over. Each journaled
step of the run (a tool call, a model call, the tool listing) is recorded in the journal's database before the run
goes on, as one row of ``kavalai_steps`` (see :mod:`kavalai.durable._step_log`; ``step_log="dbos"``: as a DBOS
step instead, listed by DBOS's own tools, several times dearer); a run resumed after a crash replays the recorded
steps and runs the rest. Waits for answers are DBOS events and messages.

DBOS recovers a crashed process's runs when that process starts again under the same executor id. Workers come and
go, so each runner here has an executor id of its own, writes a heartbeat into ``kavalai_executors`` every
``heartbeat`` seconds, and looks for runs left pending by executors that are gone (a process of this host that no
longer exists, or a heartbeat older than ``stale_after`` seconds): those runs go back on their queue, where one
live worker takes each. A claim row per run and gone executor (``kavalai_takeovers``) admits one taker per run,
which hands the run back with DBOS's public ``resume_workflows``.

Needs the ``dbos`` extra: ``pip install 'kavalai[dbos]'``. DBOS is one per process: one :class:`DbosRunner` may be
started at a time in a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal

import sqlalchemy as sa
from dbos import (
    DBOS,
    DBOSConfig,
    DBOSPortableJSONSerializer,
    Queue,
    SetWorkflowID,
    WorkflowHandleAsync,
)
from dbos import error as dbos_errors  # DBOS's public alias of its exception module

from kavalai.durable._answer_log import SqlAnswerLog
from kavalai.durable._cancel_watch import CancelWatch
from kavalai.durable._dbos_client import DbosClient, answer_first, claimed_not_taken, undelivered
from kavalai.durable._dbos_database import (
    JOURNAL_VERSION,
    WORKFLOW,
    checked_step_log,
    default_journal_url,
    make_engine,
    redacted,
    sqlalchemy_url,
    status_table,
)
from kavalai.durable._dbos_journal import PENDING as _PENDING
from kavalai.durable._dbos_journal import DbosJournal, dbos_steps_by_position, topic
from kavalai.durable._dbos_liveness import HOST, Liveness
from kavalai.durable._dbos_local import UNSETTLED, LocalRuns, QuietCancels, QuietParking
from kavalai.durable._definition import (
    Definition,
    Versions,
    changed,
    definition_of,
    missing_tool,
    recorded_definition,
)
from kavalai.durable._doubt import OnDoubt
from kavalai.durable._journal_io import DEFAULT_OUTAGE
from kavalai.durable._json import engine_read, engine_value
from kavalai.durable._run import DurableRun, bind_run, cancelled_error
from kavalai.durable._runner import (
    DurableRunner,
    DurableTarget,
    UnknownRunError,
    checked_run_id,
    existing_run_id,
)
from kavalai.durable._sqlite_compat import install as sqlite_unixepoch
from kavalai.durable._step_log import SqlStepLog, StepLogJournal
from kavalai.durable._store import ResultStore, SqlResultStore
from kavalai.errors import (
    AlreadyAnsweredError,
    DefinitionChangedError,
    DurableRunError,
    RunCancelledError,
    RunInterruptedError,
)
from kavalai.kernel import required_seconds
from kavalai.secrets import get_logger

__all__ = ["DbosClient", "DbosRunner", "default_journal_url"]

sqlite_unixepoch()  # DBOS's timestamps on SQLite older than 3.42, in every engine (see _sqlite_compat)
logging.getLogger("dbos").addFilter(QuietParking())  # a parked run's task ends cancelled: DBOS need not warn
logging.getLogger("dbos").addFilter(QuietCancels())  # a cancelled run is an outcome, not an ERROR with a traceback

logger = get_logger("kavalai.durable")

_TARGET_WAIT: Final = 5.0  # how long a recovered run waits for its target to be registered in this process

_active: DbosRunner | None = None  # the started runner of this process (DBOS is one per process)


class DbosRunner(DurableRunner):
    """Runs workflows and agents durably on DBOS.

    Args:
        db: the system database: ``sqlite:///path`` (the default, ``kavalai-runs.sqlite`` here) or
            ``postgresql://user:password@host:port/database`` for workers on many machines.
        queue: the DBOS queue runs go through; every process serving the same targets uses the same name.
        concurrency: the most runs of the queue running at once in one process (``None``: no limit).
        inline_limit: results up to this many bytes of JSON are journaled inline; larger ones go to the result
            store (a table of the same database) and the journal keeps a reference.
        store: where large results go instead.
        heartbeat: seconds between this process's heartbeats (and looks for abandoned runs).
        stale_after: seconds without a heartbeat after which another process's runs are taken over.
        polling: seconds between looks at the queue.
        executor_id: this process's DBOS executor id; a new one by default.
        step_log: where the steps of the runs this runner puts on the queue are recorded: ``"kavalai"`` (one
            row of the table ``kavalai_steps`` per step, in one prepared statement) or ``"dbos"`` (one DBOS step
            each, which DBOS's tools list, at several times the cost). A run keeps the step log it began with,
            whichever worker resumes it.
        journal_outage: how long, in seconds, a run waits for its journal's database to come back (an outage,
            SQLite held locked) before it is interrupted; the deadline of the call around the write wins when
            nearer. An interrupted run stays resumable (see ``docs/durable.md``).
        busy_timeout: how long, in seconds, one statement waits for a lock another session holds (SQLite's write
            lock; on Postgres, ``lock_timeout``) before the attempt fails (and ``journal_outage`` decides whether it
            is tried again).
        on_doubt: per tool URI, what a resume does with a step of that tool found sent without a result when the
            tool is neither read-only nor idempotent nor keyed: ``"fail"`` (the default: the step is in doubt and
            the run receives :class:`~kavalai.errors.OutcomeUnknownError`) or ``"replay"`` (send it again).
        versioned: the DBOS application version is the fingerprint of the targets registered when this starts
            (:class:`~kavalai.durable._definition.Versions`): runs begun under an old definition finish on workers
            of the old one (``docs/durable.md``). Off: one version, and a resume under a changed one is refused.
    """

    engine = "dbos"

    def __init__(
        self,
        db: str | None = None,
        *,
        queue: str = "kavalai",
        concurrency: int | None = None,
        inline_limit: int = 64 * 1024,
        store: ResultStore | None = None,
        heartbeat: float = 1.0,
        stale_after: float = 10.0,
        polling: float = 0.05,
        executor_id: str | None = None,
        step_log: Literal["kavalai", "dbos"] = "kavalai",
        journal_outage: float = DEFAULT_OUTAGE,
        busy_timeout: float = 30.0,
        on_doubt: Mapping[str, OnDoubt] | None = None,
        versioned: bool = False,
    ) -> None:
        super().__init__()
        self.versioned = versioned
        self._versions: Versions | None = None  # a versioned runner's, made when it starts
        self.journal_outage = required_seconds(journal_outage, what="journal_outage")
        self.busy_timeout = required_seconds(busy_timeout, what="busy_timeout")
        self.on_doubt = dict(on_doubt or {})
        self._parked = LocalRuns()  # runs stopped in this process, resumable, kept here (not by DBOS)
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.step_log = checked_step_log(step_log)
        self.db = db or default_journal_url()
        self.queue_name = queue
        self.concurrency = concurrency
        self.inline_limit = inline_limit
        self.heartbeat = required_seconds(heartbeat, what="heartbeat")
        self.stale_after = required_seconds(stale_after, what="stale_after")
        self.polling = required_seconds(polling, what="polling")
        self.executor_id = executor_id or f"kavalai-{HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._store = store
        self._queue: Queue | None = None
        self._engine: sa.Engine | None = None
        self._status = status_table(self.db)  # DBOS's table of runs, as much as this runner reads of it
        self._system_engine: sa.Engine | None = None  # the one given to DBOS (SQLite)
        self._liveness: Liveness | None = None
        self._answers: SqlAnswerLog | None = None
        self._steps: SqlStepLog | None = None
        self._watch: CancelWatch | None = None  # cuts the steps and waits of runs cancelled (made on start)
        self._lock = asyncio.Lock()

    @property
    def started(self) -> bool:
        """Whether DBOS is launched for this runner."""
        return self._queue is not None

    @property
    def journal(self) -> str:
        """The journal database's URL, its password masked (for messages)."""
        return redacted(self.db)

    @property
    def store(self) -> ResultStore | None:
        """Where results over the inline limit are kept (made on start)."""
        return self._store

    # --------------------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Launch DBOS in this process (in the running event loop, where the runs it dequeues then run), register
        the queue and start the heartbeat. Idempotent.

        Raises:
            RuntimeError: another runner is started in this process.
        """
        global _active
        async with self._lock:
            if self._queue is not None:
                return
            if _active is not None and _active is not self:
                raise RuntimeError(
                    "DBOS runs one engine per process and another DbosRunner is started here: share that runner "
                    "(engines and agents take the same runner object), or close it first."
                )
            url = sqlalchemy_url(self.db)
            self._engine = make_engine(url, self.busy_timeout)
            try:
                if self._store is None:
                    self._store = SqlResultStore(url, engine=self._engine)
                self._liveness = Liveness(self, self._engine)
                self._liveness.register()
                self._answers = SqlAnswerLog(engine=self._engine, outage=self.journal_outage)
                # made for every runner: it may resume a run that uses it
                self._steps = SqlStepLog(self._engine, status=self._status)
            except BaseException:  # a journal refused (read-only, of a newer version): nothing of it left open
                self._dispose_engines()
                raise
            self._versions = Versions(self._targets) if self.versioned else None
            self._watch = CancelWatch(self._engine, self._status)
            config: DBOSConfig = {
                "name": "kavalai",
                "system_database_url": self.db,
                "application_version": self.application_version,
                "executor_id": self.executor_id,
                "serializer": DBOSPortableJSONSerializer(),
                "log_level": "WARNING",
            }
            if url.startswith("sqlite"):
                # DBOS does not dispose an engine it was given: this runner does, in aclose().
                self._system_engine = config["system_database_engine"] = make_engine(url, self.busy_timeout)
            _active = self
            try:
                DBOS(config=config)
                DBOS.listen_queues([self.queue_name])
                DBOS.launch()
                self._queue = await DBOS.register_queue_async(
                    self.queue_name,
                    worker_concurrency=self.concurrency,
                    polling_interval_sec=self.polling,
                    on_conflict="always_update",
                )
            except BaseException:
                _active = None
                self._liveness.unregister()
                DBOS.destroy()
                self._dispose_engines()
                raise
            self._liveness.start()
            self._watch.start()
            await asyncio.to_thread(self._liveness.sweep)  # runs of a crashed process go back on the queue now

    async def aclose(self) -> None:
        """Stop the heartbeat and DBOS. Runs still going stay pending in the journal; removing this process's
        heartbeat at once lets another process take them over without waiting ``stale_after``."""
        global _active
        async with self._lock:
            if self._queue is None:
                return
            self._queue = None
            if self._liveness is not None:
                self._liveness.stop()
            if self._watch is not None:
                self._watch.stop()
            await asyncio.to_thread(DBOS.destroy)
            # DBOS made its executor the loop's default one and has shut it down: later to_thread calls get a new one
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())
            if self._liveness is not None:
                self._liveness.unregister()
            self._dispose_engines()
            if _active is self:
                _active = None

    def _dispose_engines(self) -> None:
        """Close the pooled connections of the journal's engines (SQLite's would otherwise be left to the GC)."""
        for engine in (self._engine, self._system_engine):
            if engine is not None:
                engine.dispose()
        self._system_engine = None
        if self._steps is not None:
            self._steps.close()

    # ----------------------------------------------------------------------------------------------- running

    async def run(self, target: DurableTarget, payload: Any, *, run_id: str | None = None) -> Any:
        """Run ``payload`` on ``target`` under ``run_id`` (a new id by default) and return its JSON outcome.

        The same run id is the same run: a finished run's outcome comes back from the journal, a run whose
        process died is resumed (here or in another process serving the queue), a run still going elsewhere is
        waited for.
        """
        handle_id = await self.submit(target, payload, run_id=run_id)
        return await self.result(handle_id)

    async def submit(self, target: DurableTarget, payload: Any, *, run_id: str | None = None) -> str:
        """Put the run on the queue (deduplicated by ``run_id``) and return its id without waiting for it."""
        run_id = checked_run_id(run_id)
        name = self.register(target, replace=True)  # first: a versioned runner's version is made of its targets
        await self.start()
        queue = self._queue
        assert queue is not None
        found = await DBOS.get_workflow_status_async(run_id)
        if found is not None and found.status == "CANCELLED":
            raise cancelled_error(run_id)
        if found is not None and self._versions is not None:
            self._versions.check_run(run_id, str(found.app_version), found.input, target)
        if found is not None:  # a run's id names that run, of the definition it began with, settled or not
            refused = changed(run_id, recorded_definition(found.input), definition_of(target))
            if refused is not None:
                raise refused
        if found is None or found.status in UNSETTLED:  # a settled run's outcome is read, nothing runs
            refused = await missing_tool(run_id, target)
            if refused is not None:
                raise refused
        if self._parked.release(run_id):  # stopped here, resumable: handed back to the queue
            await DBOS.resume_workflow_async(run_id)
        with SetWorkflowID(run_id):
            handle = await queue.enqueue_async(
                _kavalai_run, name, engine_value(payload), self.step_log, definition_of(target)
            )
        return handle.get_workflow_id()

    async def result(self, run_id: str) -> Any:
        """Wait for the run ``run_id`` and return its JSON outcome.

        Raises:
            UnknownRunError: no run has this id in the journal.
            RunCancelledError: the run was cancelled; raised once the run's execution has ended (its step cut by
                the cancel recorded), in this process or in the one executing it (its mark in the journal), waiting
                at most 30 s for it, and not for an executor whose heartbeat is gone.
            RunInterruptedError: the run's journal went away for longer than it may wait (in this process); run it
                again under the same id to resume it.
            DefinitionChangedError: the run was begun under another definition than its target's here.
        """
        run_id = existing_run_id(run_id)
        await self.start()
        if await DBOS.get_workflow_status_async(run_id) is None:
            raise UnknownRunError(run_id, f"dbos ({self.journal})")
        handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(run_id, existing_workflow=True)
        assert self._engine is not None
        # not through DBOS's poll, whose thread retries for ever while the database is gone (see _dbos_local)
        await self._parked.until_settled(run_id, self._engine, self._status, self.polling, outage=self.journal_outage)
        parked = self._parked.errors.get(run_id)
        # An interrupted run another process took over and finished (this one frozen meanwhile, its step cut on
        # waking): its outcome, not this process's stale interruption (round 9's fault 1).
        if parked is not None and not (
            isinstance(parked, RunInterruptedError) and await self._parked.settled(run_id, self._engine, self._status)
        ):
            raise parked
        try:
            return engine_read(await handle.get_result(polling_interval_sec=self.polling))  # settled: read once
        except dbos_errors.DBOSAwaitedWorkflowCancelledError:
            # its step cut by the cancel recorded (here, or in the process executing it): the caller reads the
            # run's final state
            if not await self._parked.ended(run_id):
                await self._ended_elsewhere(run_id)
            raise cancelled_error(run_id) from None

    async def _ended_elsewhere(self, run_id: str) -> None:
        """Wait (bounded) until the cancelled run ``run_id``, executing in another process, has ended there: its
        journal says so (:meth:`SqlStepLog.mark_ended`), or the executor holding it is gone."""
        found = await DBOS.get_workflow_status_async(run_id)
        executor = None if found is None else found.executor_id
        steps, liveness = self._steps, self._liveness
        if steps is None or liveness is None or executor == self.executor_id:
            return
        ended = functools.partial(steps.ended, run_id)
        await self._parked.ended_elsewhere(ended, functools.partial(liveness.alive, executor), self.polling)

    @property
    def application_version(self) -> str:
        """This process's DBOS application version: the journal's format, or (versioned) the targets' fingerprint."""
        return JOURNAL_VERSION if self._versions is None else self._versions.name

    def register(self, target: DurableTarget, *, replace: bool = False) -> str:
        """See :meth:`DurableRunner.register`; a started versioned runner refuses a definition its version was not
        made of (:meth:`Versions.check`)."""
        if self._versions is not None:
            self._versions.check(target)
        return super().register(target, replace=replace)

    async def status(self, run_id: str) -> str | None:
        """The run's DBOS status (``"PENDING"``, ``"ENQUEUED"``, ``"SUCCESS"``, ``"ERROR"``, ...), or ``None``."""
        run_id = existing_run_id(run_id)
        await self.start()
        found = await DBOS.get_workflow_status_async(run_id)
        return None if found is None else str(found.status)

    async def recorded_steps(self, run_id: str) -> list[tuple[int, str, Any]]:
        """The steps recorded for run ``run_id`` so far, in order: ``(position, name, JSON result)``; a result
        kept in the result store appears as its reference."""
        run_id = existing_run_id(run_id)
        await self.start()
        assert self._steps is not None
        mine = await asyncio.to_thread(self._steps.steps, run_id)
        if mine:
            return mine
        found = await DBOS.list_workflow_steps_async(run_id)  # a run begun with step_log="dbos"
        kept = [  # neither DBOS's own operations nor the sent marks of steps that may not repeat (_dbos_journal)
            step
            for step in found
            if not step["function_name"].startswith("DBOS.") and not step["function_name"].endswith(" (sent)")
        ]
        return [(position, step["function_name"], step["output"]) for position, step in enumerate(kept, start=1)]

    async def pending(self, run_id: str) -> dict[str, Any]:
        """The questions run ``run_id`` waits to have answered: the run's ``kavalai.pending`` DBOS event, and the
        questions its steps published in ``kavalai_answers``."""
        run_id = existing_run_id(run_id)
        await self.start()
        found = await DBOS.get_event_async(run_id, _PENDING, timeout_seconds=0)
        assert self._answers is not None
        in_steps = await self._answers.open_questions(run_id)
        return {**(dict(found) if isinstance(found, dict) else {}), **in_steps}

    async def answer(self, run_id: str, key: str, value: Any) -> None:
        """Send the answer to question ``key`` of run ``run_id`` (a DBOS message, or a row of ``kavalai_answers``
        for a question asked during a step: kept until the run takes it, by whichever process runs it, after a
        restart too). Answering the same question twice sends it once."""
        if await self.status(run_id) == "CANCELLED":
            raise RunCancelledError(f"Run {run_id} is cancelled: the answer {key!r} is refused.", run_id=run_id)
        pending = await self.pending(run_id)
        assert self._answers is not None
        answers = self._answers
        try:
            in_step, kept = await asyncio.to_thread(answer_first, answers, run_id, key, pending, value)
        except AlreadyAnsweredError as lost:  # its claim's message may never have gone (see claimed_not_taken)
            if await asyncio.to_thread(claimed_not_taken, answers, run_id, key, pending):
                await _deliver(run_id, key, lost.answer)
            raise
        if not in_step:  # the run's own question: a message, with the answer kept (never another form of it)
            await _deliver(run_id, key, kept)

    async def serve(self) -> None:
        """Serve the queue until cancelled: the ``kavalai worker`` loop. Register the targets first."""
        await self.start()
        await asyncio.Event().wait()

    def __repr__(self) -> str:
        state = "started" if self.started else "not started"
        return f"<DbosRunner {redacted(self.db)} queue={self.queue_name!r} {state}>"


@DBOS.workflow(name=WORKFLOW)
async def _kavalai_run(target: str, payload: Any, step_log: str = "dbos", definition: Definition | None = None) -> Any:
    """The DBOS workflow of every kavalai run: the target's run inside a :class:`DurableRun`, its steps recorded
    where the run began recording them (``step_log`` is part of the run's input, so a resumed run keeps it; runs
    enqueued before the argument existed recorded DBOS steps). ``definition`` is the fingerprint of the target's
    definition when the run was submitted (:mod:`._definition`): a resume under another one is refused."""
    runner = _active
    found = runner.target(target) if runner is not None else None
    waited = 0.0
    while found is None and waited < _TARGET_WAIT:  # a run recovered before its target was registered here
        await asyncio.sleep(0.05)
        waited += 0.05
        runner = _active
        found = runner.target(target) if runner is not None else None
    if runner is None or found is None:
        served = ", ".join(runner.targets) if runner is not None else "nothing"
        raise LookupError(f"This process serves {served}, not the target {target!r} of run {DBOS.workflow_id}.")
    run_id = DBOS.workflow_id
    assert run_id is not None
    refused = changed(run_id, definition, definition_of(found)) or await missing_tool(run_id, found)
    if refused is not None:
        runner._parked.park(refused)  # left as it stands (see below)
    log = runner._steps if step_log == "kavalai" else None
    try:
        steps = (
            None
            if log is None
            else await StepLogJournal.open(
                log, run_id, outage=runner.journal_outage, on_doubt=runner.on_doubt, answers=runner._answers
            )
        )
    except DurableRunError as exc:  # its journal away past its patience, or a row no reader can take: as it stands
        runner._parked.park(exc)
    refused = steps.by_position() if steps is not None else await dbos_steps_by_position(run_id)
    if refused is not None:  # recorded by an earlier release: refused as a changed definition, never replayed
        runner._parked.park(refused)
    run = DurableRun(
        run_id,
        DbosJournal(steps, run_id, runner._watch, runner.on_doubt),
        store=runner.store,
        inline_limit=runner.inline_limit,
        engine="dbos",
        answers=runner._answers,
    )
    try:
        with bind_run(run), runner._parked.executing(run_id):
            outcome = await found.run_journaled(engine_read(payload))  # as submit() was given it
    except dbos_errors.DBOSWorkflowCancelledError:
        await _mark_ended(runner, run_id)
        raise
    stopped = run.stopped
    if isinstance(stopped, (RunInterruptedError, DefinitionChangedError)):  # a step's tool gone here (tool_gone)
        # Left as it stands, PENDING, without an outcome: resumed here on its next run, elsewhere once this process
        # is gone; what the target returned after the stop is not its outcome. Kept by this runner, not handed to
        # DBOS's poller of a stopped execution, which would outlive aclose() if the database is gone for good.
        runner._parked.park(stopped)
    if stopped is not None:  # cancelled: DBOS's own way to end the execution, and the run stays CANCELLED
        await _mark_ended(runner, run_id)
        raise dbos_errors.DBOSWorkflowCancelledError(str(stopped))
    return engine_value(outcome)  # DBOS writes it as it is: a lone surrogate failed the write, out of engine.run()


async def _deliver(run_id: str, key: str, kept: Any) -> None:
    """Send the kept answer to question ``key`` as the run's DBOS message (once, by its idempotency key)."""
    try:
        await DBOS.send_async(run_id, kept, topic=topic(key), idempotency_key=f"{run_id}.{key}")
    except (sa.exc.SQLAlchemyError, dbos_errors.DBOSException) as exc:
        raise undelivered(run_id, key, exc) from exc


async def _mark_ended(runner: DbosRunner, run_id: str) -> None:
    """Tell a ``result()`` waiting in another process that the cancelled run's execution has ended here, its step
    cut by the cancel recorded (best effort: without the mark it waits for this executor's heartbeat to go, at most
    30 s)."""
    if runner._steps is not None:
        with contextlib.suppress(sa.exc.SQLAlchemyError):
            await asyncio.to_thread(runner._steps.mark_ended, run_id)
