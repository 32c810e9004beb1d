"""A client of a DBOS journal's runs: :class:`DbosClient` puts runs on a queue, reads and cancels them, answers their
questions, without running anything itself (``kavalai runs``, ``kavalai answer``, ``kavalai run --submit``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, Final, Literal

import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSPortableJSONSerializer, EnqueueOptions
from dbos import error as dbos_errors  # DBOS's public alias of its exception module

from kavalai.durable._answer_log import SqlAnswerLog
from kavalai.durable._answers import checked_answer
from kavalai.durable._dbos_database import (
    JOURNAL_VERSION,
    WORKFLOW,
    checked_step_log,
    make_engine,
    redacted,
    sqlalchemy_url,
)
from kavalai.durable._dbos_journal import PENDING as _PENDING
from kavalai.durable._dbos_journal import dbos_steps_in_doubt, topic
from kavalai.durable._doubt import doubt_key, doubt_resolution
from kavalai.durable._journal_io import first_line
from kavalai.durable._json import engine_read, engine_value
from kavalai.durable._runner import (
    RunInfo,
    RunState,
    UnknownRunError,
    checked_run_id,
    existing_run_id,
    lost_answer,
    not_pending,
)
from kavalai.durable._step_log import SqlStepLog
from kavalai.errors import AlreadyAnsweredError, DurableRunError, RunCancelledError
from kavalai.kernel import required_seconds

__all__ = ["DbosClient", "answer_first", "claimed_not_taken", "run_info", "undelivered"]


class DbosClient:
    """Puts runs on a queue that workers (``kavalai worker``, :meth:`DbosRunner.serve`) serve, and reads their
    results, without running anything itself. Synchronous; :meth:`close` when done.

    Args:
        db: the workers' system database.
        queue: the workers' queue.
        step_log: where the steps of the runs it submits are recorded (see :class:`DbosRunner`).
        application_version: the DBOS application version of the runs it submits: for workers of
            ``DbosRunner(versioned=True)``, ``definition_version(target)`` of the definition they serve.
    """

    def __init__(
        self,
        db: str,
        *,
        queue: str = "kavalai",
        step_log: Literal["kavalai", "dbos"] = "kavalai",
        application_version: str | None = None,
    ) -> None:
        self.application_version = application_version or JOURNAL_VERSION  # versioned workers': definition_version
        self.db = db
        self.queue_name = queue
        self.step_log = checked_step_log(step_log)
        DBOS.migrate(db)  # the journal's tables, if no worker has made them yet
        self._client = DBOSClient(system_database_url=db, serializer=DBOSPortableJSONSerializer())
        self._engine = make_engine(sqlalchemy_url(db))
        self._answers = SqlAnswerLog(engine=self._engine)

    def submit(self, target: str, payload: Any, *, run_id: str | None = None) -> str:
        """Put a run of the target named ``target`` (``"workflow:<name>"``, ``"agent:<name>"``) on the queue,
        deduplicated by ``run_id``; return the run id."""
        options: EnqueueOptions = {
            "queue_name": self.queue_name,
            "workflow_name": WORKFLOW,
            "workflow_id": checked_run_id(run_id),
            "app_version": self.application_version,
        }
        return self._client.enqueue(options, target, engine_value(payload), self.step_log).get_workflow_id()

    def result(self, run_id: str, *, polling: float = 0.1) -> Any:
        """Wait for the run ``run_id`` and return its JSON outcome.

        Raises:
            UnknownRunError: no run has this id in the journal.
            ValueError: ``polling`` is not positive seconds (the one rule, ``kavalai.kernel.limit_seconds``).
        """
        every = required_seconds(polling, what="polling")
        if self.status(run_id) is None:
            raise UnknownRunError(run_id, f"dbos ({redacted(self.db)})")
        return engine_read(self._client.retrieve_workflow(run_id).get_result(polling_interval_sec=every))

    def status(self, run_id: str) -> str | None:
        """The run's DBOS status, or ``None`` when there is no such run."""
        found = self._client.list_workflows(workflow_ids=[existing_run_id(run_id)], load_input=False, load_output=False)
        return str(found[0].status) if found else None

    def describe(self, run_id: str) -> RunInfo:
        """Where the run ``run_id`` is, with its outcome once finished.

        Raises:
            UnknownRunError: no run has this id in the journal.
        """
        found = self._client.list_workflows(workflow_ids=[existing_run_id(run_id)], load_input=True)
        if not found:
            raise UnknownRunError(run_id, f"dbos ({redacted(self.db)})")
        log = SqlStepLog(self._engine)
        kavalai_log = any(position != 0 for position in log.recorded(run_id))  # else its steps are DBOS steps
        doubts = log.in_doubt(run_id) if kavalai_log else self._dbos_in_doubt(run_id)
        in_doubt = [{"position": position, "name": name, "state": state} for position, name, state in doubts]
        info = run_info(found[0], with_outcome=True, interrupted=log.interrupted([run_id]))
        return dataclasses.replace(info, in_doubt=in_doubt)

    def _dbos_in_doubt(self, run_id: str) -> list[tuple[int, str, str]]:
        """The steps in doubt of a run whose steps are DBOS steps (``step_log="dbos"``; none in the kavalai log)."""
        steps = [(step["function_name"], step["output"]) for step in self._client.list_workflow_steps(run_id)]

        def answered(position: int) -> Any:
            found, value = self._answers.lookup_now(run_id, doubt_key(position))
            return value if found else None

        return dbos_steps_in_doubt(steps, answered)

    def list_runs(self, *, limit: int = 20) -> list[RunInfo]:
        """The newest ``limit`` runs of the journal (every queue), newest first."""
        found = self._client.list_workflows(
            name=WORKFLOW, limit=limit, sort_desc=True, load_input=True, load_output=False
        )
        interrupted = SqlStepLog(self._engine).interrupted([status.workflow_id for status in found]) if found else set()
        return [run_info(status, with_outcome=False, interrupted=interrupted) for status in found]

    def cancel(self, run_id: str) -> None:
        """Cancel the run ``run_id``: it stops at its next step, wherever it runs, and is not resumed.

        Raises:
            UnknownRunError: no run has this id in the journal.
            DurableRunError: the run has ended (finished or failed): there is nothing to cancel, and it keeps its
                outcome. (A cancelled run may be cancelled again.)
        """
        status = self.status(run_id)
        if status is None:
            raise UnknownRunError(run_id, f"dbos ({redacted(self.db)})")
        if STATES.get(status) not in ("finished", "failed"):
            self._client.cancel_workflow(run_id)  # DBOS leaves an ended run as it is, without a word
            status = self.status(run_id)  # it may have ended meanwhile: the cancel then changed nothing
        state = STATES.get(str(status))
        if state in ("finished", "failed"):
            raise DurableRunError(f"Run {run_id} has ended ({state}): there is nothing to cancel.", run_id=run_id)

    def pending(self, run_id: str) -> dict[str, Any]:
        """The questions run ``run_id`` waits to have answered, by key (see :meth:`DbosRunner.pending`)."""
        run_id = existing_run_id(run_id)
        found = self._client.get_event(run_id, _PENDING, timeout_seconds=0)
        return {**(dict(found) if isinstance(found, dict) else {}), **self._answers.open_now(run_id)}

    def answer(self, run_id: str, key: str, value: Any) -> None:
        """Answer question ``key`` of run ``run_id`` (see :meth:`DbosRunner.answer`). A run that does not exist, or
        has ended, is refused saying so (:class:`UnknownRunError`, :class:`LookupError`): nothing is sent."""
        status = self.status(run_id)
        if status is None:
            raise UnknownRunError(run_id, f"dbos ({redacted(self.db)})")
        if status == "CANCELLED":
            raise RunCancelledError(f"Run {run_id} is cancelled: the answer {key!r} is refused.", run_id=run_id)
        ended = STATES.get(status) if STATES.get(status) in ("finished", "failed") else None
        pending = self.pending(run_id)
        try:
            in_step, kept = answer_first(self._answers, run_id, key, pending, value, ended=ended)
        except AlreadyAnsweredError as lost:
            if claimed_not_taken(self._answers, run_id, key, pending):  # the winner's message may never have gone
                self._deliver(run_id, key, lost.answer)
            raise
        if not in_step:  # the run's own question: the answer kept, never another form of it
            self._deliver(run_id, key, kept)

    def _deliver(self, run_id: str, key: str, kept: Any) -> None:
        try:
            self._client.send(run_id, kept, topic=topic(key), idempotency_key=f"{run_id}.{key}")
        except (sa.exc.SQLAlchemyError, dbos_errors.DBOSException) as exc:
            raise undelivered(run_id, key, exc) from exc

    def resolve(self, run_id: str, step: int, *, done: bool, result: Any = None) -> None:
        """Settle step ``step`` of run ``run_id``, in doubt, that the run asks about (``on_doubt="ask"``): it happened
        (``done``, with ``result``), or send it again. See :meth:`answer` for the errors."""
        self.answer(run_id, doubt_key(step), doubt_resolution(done, result))

    def close(self) -> None:
        """Close the client's connections."""
        self._client.destroy()
        self._engine.dispose()


#: DBOS's statuses in the words of :class:`RunInfo`.
STATES: Final[dict[str, RunState]] = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "SUCCESS": "finished",
    "ERROR": "failed",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
    "CANCELLED": "cancelled",
}


def run_info(status: Any, *, with_outcome: bool, interrupted: Collection[str] = ()) -> RunInfo:
    engine_status = str(status.status)
    inputs = status.input
    args = inputs.get("args") if isinstance(inputs, dict) else getattr(inputs, "args", None)
    target = str(args[0]) if args else None
    return RunInfo(
        run_id=status.workflow_id,
        state="interrupted"
        if engine_status == "PENDING" and status.workflow_id in interrupted
        else STATES.get(engine_status, "running"),
        engine_status=engine_status,
        target=target,
        created_at=_time(status.created_at),
        updated_at=_time(status.updated_at),
        outcome=engine_read(status.output) if with_outcome and engine_status == "SUCCESS" else None,
    )


def _time(epoch_ms: int | None) -> datetime | None:
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, UTC)


def claimed_not_taken(answers: SqlAnswerLog, run_id: str, key: str, pending: dict[str, Any]) -> bool:
    """Whether the run still waits for its own question ``key`` (not one asked during a step), which an answer has
    claimed already (blocking). An answer is two writes, the claim of the question's row then DBOS's message to the
    run; a sender that died, or whose journal failed, between them leaves a claim the run never got. So a later answer
    to the question, while the run still waits for it, sends the winner's message again (under the same DBOS
    idempotency key: a message that did go is not sent twice) before it is told it lost."""
    return key in pending and key not in answers.open_now(run_id)


def undelivered(run_id: str, key: str, exc: BaseException) -> DurableRunError:
    """The error of an answer that won (its claim kept) but whose message could not be sent to the run."""
    return DurableRunError(
        f"Run {run_id}: the answer to {key!r} is kept, but it could not be sent to the run ({type(exc).__name__}: "
        f"{first_line(exc)}). Answer the question again once the journal is back: that sends the kept answer.",
        run_id=run_id,
    )


def answer_first(
    answers: SqlAnswerLog, run_id: str, key: str, pending: dict[str, Any], value: Any, *, ended: str | None = None
) -> tuple[bool, Any]:
    """Take ``value`` as the answer to ``key`` if it is the first (blocking): exactly one of racing answers wins,
    whatever the process; a loser, or an answer to a question answered before, raises
    :class:`~kavalai.errors.AlreadyAnsweredError` naming the winner. Returns whether the question was one asked
    during a step (then the recorded answer is all it needs; a question of the run itself also needs its message),
    and the answer as it was kept (checked: JSON, in its kind's form), which is what the message must carry.
    ``ended``: the run's state when it has finished or failed, named when a new answer is refused."""
    if key not in pending:
        found, winner = answers.lookup_now(run_id, key)
        if found:
            raise lost_answer(run_id, key, winner)
        if ended is not None:  # the run has finished or failed: it waits for nothing any more
            raise LookupError(f"Run {run_id} has {ended}: it waits for no answer; {key!r} is refused.")
        raise not_pending(run_id, key, pending)
    in_step = key in answers.open_now(run_id)
    checked = checked_answer(pending[key], value)
    won, winner = answers.claim_now(run_id, key, pending[key], checked)
    if not won:
        raise lost_answer(run_id, key, winner)
    return in_step, checked
