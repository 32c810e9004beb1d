"""The steps of DBOS runs in one SQL table of the journal's database, one row per step.

DBOS records a step in its own tables through SQLAlchemy statements it builds anew for each step, and checks for
an earlier record in another transaction first: about 2 ms per step on SQLite here, most of it Python. A run's
steps are only ever read all at once, when its attempt begins, so this log reads them in one query then and writes
each new step in one prepared ``INSERT``: one transaction per step, the same guarantee (a step's result is
committed before the run goes on), several times cheaper. The same connection then reads the run's DBOS status, so a
cancel (``kavalai runs cancel``, from any process) is seen before the next step begins, at the cost of one indexed
read; a step never begins in a run found cancelled. Every read and write crosses :func:`~._journal_io.journal_io`:
a database outage pauses the run, and is never a step's result. DBOS still owns the run itself: its queue, the run id's
deduplication, recovery, the take-over of runs whose process is gone, and the durable waits for answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from kavalai.durable._cancel_watch import is_cancelled
from kavalai.durable._definition import keyed_by_position
from kavalai.durable._doubt import (
    OnDoubt,
    doubt_key,
    doubt_question,
    in_doubt_result,
    is_in_doubt,
    marked,
    on_finding,
    resolved_result,
    sent_mark,
)
from kavalai.durable._journal_io import DEFAULT_OUTAGE, interrupted_error, journal_io
from kavalai.durable._json import journal_json
from kavalai.durable._run import JsonValue, cancelled_error, replayed
from kavalai.durable._schema import STEPS, ensure_schema
from kavalai.errors import DefinitionChangedError, DurableRunError
from kavalai.kernel import deadline_paused

if TYPE_CHECKING:
    from kavalai.durable._answer_log import SqlAnswerLog

__all__ = ["RecordedStep", "SqlStepLog", "StepLogJournal"]

#: A recorded step: its name and its JSON result.
RecordedStep = tuple[str, JsonValue]

#: Seconds between looks for the operator's answer about a step in doubt (``on_doubt="ask"``).
ASK_POLL: Final = 0.5


class SqlStepLog:
    """The table ``kavalai_steps`` (run id, position, name, JSON result) of an SQL database.

    Args:
        engine: the SQLAlchemy engine of the journal's database; kavalai's tables are made if missing.
        status: DBOS's table of runs (``workflow_status``), whose ``status`` column says whether a run is
            cancelled; ``None``: no cancel is looked for.
    """

    def __init__(self, engine: sa.Engine, status: sa.Table | None = None) -> None:
        self.engine = engine
        self.table = STEPS
        ensure_schema(engine)
        self._insert = self.table.insert()
        # A step's row (or its sent mark) is one INSERT: on a database server it commits by itself (one round trip,
        # where a transaction is three: BEGIN, INSERT, COMMIT), on connections of a pool that does not ping the
        # server at each checkout (one more round trip): every write is retried by journal_io, and one on a
        # connection the server dropped either committed nothing or, retried, meets its own row (IntegrityError:
        # the row is read back, a mark kept). SQLite's writes keep their IMMEDIATE transaction.
        self._by_itself = (
            None if engine.dialect.name == "sqlite" else sa.create_engine(engine.url, isolation_level="AUTOCOMMIT")
        )
        self._status = (
            None
            if status is None
            else sa.select(status.c.status).where(status.c.workflow_uuid == sa.bindparam("run_id"))
        )

    def _writing(self) -> AbstractContextManager[sa.Connection]:
        """A connection for one INSERT, committed when the block ends (at once on a database server)."""
        return self.engine.begin() if self._by_itself is None else self._by_itself.connect()

    def close(self) -> None:
        """Close the connections of its writes (those of ``engine`` are its owner's)."""
        if self._by_itself is not None:
            self._by_itself.dispose()

    def _cancelled(self, connection: sa.Connection, run_id: str) -> bool:
        if self._status is None:
            return False
        return connection.execute(self._status, {"run_id": run_id}).scalar() == "CANCELLED"

    def begin(self, run_id: str) -> tuple[dict[int, RecordedStep], bool]:
        """Every step recorded for ``run_id``, by position, and whether the run is cancelled (blocking)."""
        t = self.table
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.c.position, t.c.name, t.c.result).where(t.c.run_id == run_id))
            recorded = {row.position: (row.name, _decoded(run_id, row)) for row in rows}
            return recorded, self._cancelled(connection, run_id)

    def cancelled_now(self, run_id: str) -> bool:
        """Whether ``run_id`` is cancelled (blocking)."""
        with self.engine.connect() as connection:
            return self._cancelled(connection, run_id)

    def recorded(self, run_id: str) -> dict[int, RecordedStep]:
        """Every step recorded for ``run_id``, by position (blocking)."""
        t = self.table
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.c.position, t.c.name, t.c.result).where(t.c.run_id == run_id))
            return {row.position: (row.name, _decoded(run_id, row)) for row in rows}

    def write(self, run_id: str, position: int, name: str, result: JsonValue) -> tuple[RecordedStep, bool]:
        """Record a step (blocking) and return what is recorded at its position (this step, or the one another
        attempt of the run, a process taken over while it still ran, recorded there first), and whether the run is
        cancelled now."""
        text = journal_json(result, compact=True)
        try:
            with self._writing() as connection:
                connection.execute(self._insert, {"run_id": run_id, "position": position, "name": name, "result": text})
                return (name, result), self._cancelled(connection, run_id)
        except sa.exc.IntegrityError:
            t = self.table
            with self.engine.connect() as connection:
                row = connection.execute(
                    sa.select(t.c.position, t.c.name, t.c.result).where(t.c.run_id == run_id, t.c.position == position)
                ).one()
                return (row.name, _decoded(run_id, row)), self._cancelled(connection, run_id)

    def mark_sent(self, run_id: str, position: int, name: str, mark: JsonValue) -> None:
        """Record (blocking) that step ``position`` is about to be sent (:mod:`._doubt`): a row at ``-position``,
        kept if one is there already."""
        text = journal_json(mark, compact=True)
        try:
            with self._writing() as connection:
                connection.execute(
                    self._insert, {"run_id": run_id, "position": -position, "name": name, "result": text}
                )
        except sa.exc.IntegrityError:
            return

    def mark_interrupted(self, run_id: str, why: str) -> None:
        """Record (blocking) that ``run_id`` was interrupted (its journal away past its patience): a row at position
        0, which ``kavalai runs`` shows as the state ``interrupted`` and the run's next attempt removes."""
        text = journal_json({"state": "interrupted", "why": why})
        try:
            with self.engine.begin() as connection:
                connection.execute(
                    self._insert, {"run_id": run_id, "position": 0, "name": "interrupted", "result": text}
                )
        except sa.exc.IntegrityError:
            return

    def mark_ended(self, run_id: str) -> None:
        """Record (blocking) that the execution of the cancelled run ``run_id`` has ended, its step cut by the cancel
        recorded: a row at position 0 (in place of an interruption's), which :meth:`ended` finds from any process."""
        t = self.table
        text = journal_json({"state": "ended", "why": "cancelled"})
        with self.engine.begin() as connection:
            connection.execute(t.delete().where(t.c.run_id == run_id, t.c.position == 0))
            connection.execute(self._insert, {"run_id": run_id, "position": 0, "name": "ended", "result": text})

    def ended(self, run_id: str) -> bool:
        """Whether :meth:`mark_ended` recorded the end of the cancelled run ``run_id``'s execution (blocking)."""
        t = self.table
        query = sa.select(t.c.name).where(t.c.run_id == run_id, t.c.position == 0, t.c.name == "ended")
        with self.engine.connect() as connection:
            return connection.execute(query).first() is not None

    def clear_interrupted(self, run_id: str) -> None:
        """Remove the mark of :meth:`mark_interrupted` (blocking): the run is resumed."""
        t = self.table
        with self.engine.begin() as connection:
            connection.execute(t.delete().where(t.c.run_id == run_id, t.c.position == 0))

    def interrupted(self, run_ids: list[str]) -> set[str]:
        """Which of ``run_ids`` are marked interrupted (blocking)."""
        t = self.table
        query = sa.select(t.c.run_id).where(t.c.run_id.in_(run_ids), t.c.position == 0, t.c.name == "interrupted")
        with self.engine.connect() as connection:
            return {row[0] for row in connection.execute(query)}

    def steps(self, run_id: str) -> list[tuple[int, str, JsonValue]]:
        """The recorded steps of ``run_id`` in order: ``(position, name, result)`` (blocking)."""
        return [(position, *step) for position, step in sorted(self.recorded(run_id).items()) if position > 0]

    def in_doubt(self, run_id: str) -> list[tuple[int, str, str]]:
        """The steps of ``run_id`` whose outcome is unknown, as ``(position, name, state)`` (blocking): ``in_doubt``
        (found sent without a result, recorded so), ``sent`` (sent, no result yet: in flight, or its worker
        gone) or ``cancelled`` (cut in flight by a cancel of its run)."""
        recorded = self.recorded(run_id)
        found = []
        for position, (name, result) in sorted(recorded.items()):
            if position > 0 and is_in_doubt(result):
                found.append((position, name, "in_doubt"))
            elif position > 0 and is_cancelled(result):
                found.append((position, name, "cancelled"))
            elif position < 0 and -position not in recorded:
                found.append((-position, name, "sent"))
        return sorted(found)

    def __repr__(self) -> str:
        return f"<SqlStepLog {self.engine.url!r}>"


class StepLogJournal:
    """The journal of one attempt of a run over a :class:`SqlStepLog`: what earlier attempts recorded, read once
    when the attempt begins, replayed by each step's identity (its name: node, visit, call; never its position); each
    new step written before the run goes on.

    :attr:`stopped` is why the run may begin no more steps (it was found cancelled, or its journal could not be
    written in time); :class:`~kavalai.durable.DurableRun` looks at it before every step."""

    def __init__(
        self,
        log: SqlStepLog,
        run_id: str,
        recorded: dict[int, RecordedStep],
        *,
        cancelled: bool = False,
        outage: float = DEFAULT_OUTAGE,
        on_doubt: Mapping[str, OnDoubt] | None = None,
        answers: SqlAnswerLog | None = None,
    ) -> None:
        self.answers = answers
        self.log = log
        self.run_id = run_id
        self.recorded = recorded
        self.outage = outage
        self.on_doubt: Mapping[str, OnDoubt] = on_doubt or {}
        self.stopped: DurableRunError | None = cancelled_error(run_id) if cancelled else None
        # Steps are found by their identity (the name), never by position: a position is only where a row goes.
        self.done = {name: position for position, (name, _) in recorded.items() if position > 0}
        self.sent = {name: -position for position, (name, _) in recorded.items() if position < 0}
        self._taken = {abs(position) for position in recorded}

    @classmethod
    async def open(
        cls,
        log: SqlStepLog,
        run_id: str,
        *,
        outage: float = DEFAULT_OUTAGE,
        on_doubt: Mapping[str, OnDoubt] | None = None,
        answers: SqlAnswerLog | None = None,
    ) -> StepLogJournal:
        """The journal of a new attempt of ``run_id``: its recorded steps read, and its cancel looked for."""
        recorded, cancelled = await journal_io(run_id, "read the run's steps", log.begin, run_id, outage=outage)
        if recorded.pop(0, None) is not None:  # resumed after an interruption: no longer interrupted
            await journal_io(run_id, "clear its interruption", log.clear_interrupted, run_id, outage=outage)
        return cls(log, run_id, recorded, cancelled=cancelled, outage=outage, on_doubt=on_doubt, answers=answers)

    def by_position(self) -> DefinitionChangedError | None:
        """Why the run may not be resumed when an earlier release recorded its steps by position (names without an
        identity: :func:`~kavalai.durable._definition.keyed_by_position`), else ``None``."""
        return keyed_by_position(self.run_id, (name for _, (name, _) in sorted(self.recorded.items(), key=_rank)))

    async def record(self, position: int, name: str, execute: Any, request: Any = None) -> JsonValue:
        """See :meth:`kavalai.durable.Journal.record`; a step that may not be repeated safely is marked sent before
        it runs, and one found sent without a result is settled by its ``on_doubt`` policy (:mod:`._doubt`)."""
        found = self.done.get(name)
        if found is not None:
            return replayed(found, self.recorded[found], name)
        position = self._place(position, name)
        marked_at = self.sent.get(name)
        if marked_at is not None:  # sent by an earlier attempt, its outcome unknown: its policy, or its move
            policy, move = on_finding(request, self.on_doubt, self.recorded[-marked_at][1])
            if policy == "fail":
                return await self._keep(position, name, in_doubt_result(self.run_id, position, name, request, move))
            if policy == "ask":
                answer = await self._ask(position, name, request, move)
                if answer.get("action") == "done":
                    return await self._keep(position, name, resolved_result(answer, request))
            # "retry", "replay", or a step that may be repeated safely where it went: sent again, its mark there
        elif marked(request, self.on_doubt):
            what, mark = f"mark step {position} ({name}) sent", sent_mark(request)
            try:
                await journal_io(
                    self.run_id, what, self.log.mark_sent, self.run_id, position, name, mark, outage=self.outage
                )
            except DurableRunError as exc:
                self.stopped = exc
                raise
        return await self._keep(position, name, await execute())

    def _place(self, position: int, name: str) -> int:
        """The row position of a new step: where its sent mark is, else its rank in this attempt when no other
        step's row is there (always so under the definition the run began with), else the next free one."""
        at = self.sent.get(name)
        if at is not None:
            return at
        if position in self._taken:
            position = max(self._taken) + 1
        self._taken.add(position)
        return position

    async def _ask(
        self, position: int, name: str, request: Mapping[str, Any], move: tuple[str, str] | None
    ) -> Mapping[str, Any]:
        """Ask the operator whether step ``position``, found in doubt, happened, and wait for the answer (durably: in
        the answer log; a cancel of the run ends the wait)."""
        answers = self.answers
        if answers is None:
            raise RuntimeError(f"Run {self.run_id}: on_doubt='ask' needs the runner's answer log.")
        key, question = doubt_key(position), doubt_question(self.run_id, position, name, request, move)
        await journal_io(
            self.run_id,
            f"ask about step {position}",
            answers.publish_now,
            self.run_id,
            key,
            question,
            outage=self.outage,
        )
        with deadline_paused():  # the tool call's own timeout bounds its effect, not the operator
            while True:
                (found, answer), cancelled = await journal_io(
                    self.run_id, f"look for the answer about step {position}", self._answered, key, outage=self.outage
                )
                if found and isinstance(answer, Mapping):
                    return answer
                if cancelled:
                    self.stopped = cancelled_error(self.run_id)
                    raise self.stopped
                await asyncio.sleep(ASK_POLL)

    def _answered(self, key: str) -> tuple[tuple[bool, Any], bool]:
        assert self.answers is not None
        return self.answers.lookup_now(self.run_id, key), self.log.cancelled_now(self.run_id)

    async def _keep(self, position: int, name: str, result: JsonValue) -> JsonValue:
        try:
            kept, cancelled = await journal_io(
                self.run_id,
                f"record step {position} ({name})",
                self.log.write,
                self.run_id,
                position,
                name,
                result,
                outage=self.outage,
            )
        except DurableRunError as exc:
            self.stopped = exc
            raise
        except asyncio.CancelledError:  # cut (the call's deadline, a close): the effect is made, not recorded
            self.stopped = self.stopped or interrupted_error(
                self.run_id, f"record step {position}", "before it was cut"
            )
            raise
        if cancelled and self.stopped is None:
            self.stopped = cancelled_error(self.run_id)
        return replayed(position, kept, name)


def _decoded(run_id: str, row: Any) -> JsonValue:
    """A row's recorded result, or, when its text is not JSON (edited by hand, damaged), a refusal naming the run and
    the step: a record no reader can take is neither the step's result nor the run's failure (the run stays as it
    is, resumable once the row is mended or removed)."""
    try:
        value: JsonValue = json.loads(row.result)
    except (TypeError, ValueError) as exc:
        what = "its sent mark" if row.position < 0 else "its interruption mark" if row.position == 0 else "its record"
        raise DurableRunError(
            f"Run {run_id} cannot be read: step {abs(row.position)} ({row.name}) has {what} in kavalai_steps that is "
            f"not JSON ({exc}). The journal was changed by hand or damaged: mend or delete that row (position "
            f"{row.position}), then run the run again under its id.",
            run_id=run_id,
        ) from None
    return value


def _rank(item: tuple[int, RecordedStep]) -> int:
    """A recorded row's place in the run: its position (a sent mark's row is at minus its position)."""
    return abs(item[0])
