"""The steps of DBOS runs in one SQL table of the journal's database, one row per step.

DBOS records a step in its own tables through SQLAlchemy statements it builds anew for each step, and checks for
an earlier record in another transaction first: about 2 ms per step on SQLite here, most of it Python. A run's
steps are only ever read all at once, when its attempt begins, so this log reads them in one query then and writes
each new step in one prepared ``INSERT``: one transaction per step, the same guarantee (a step's result is
committed before the run goes on), several times cheaper. DBOS still owns the run itself: its queue, the run id's
deduplication, recovery, the take-over of runs whose process is gone, and the durable waits for answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sqlalchemy as sa

from kavalai.durable._run import JsonValue, replayed
from kavalai.durable._schema import STEPS, ensure_schema

__all__ = ["RecordedStep", "SqlStepLog", "StepLogJournal"]

#: A recorded step: its name and its JSON result.
RecordedStep = tuple[str, JsonValue]


class SqlStepLog:
    """The table ``kavalai_steps`` (run id, position, name, JSON result) of an SQL database.

    Args:
        engine: the SQLAlchemy engine of the journal's database; kavalai's tables are made if missing.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.table = STEPS
        ensure_schema(engine)
        self._insert = self.table.insert()

    def recorded(self, run_id: str) -> dict[int, RecordedStep]:
        """Every step recorded for ``run_id``, by position (blocking)."""
        t = self.table
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.c.position, t.c.name, t.c.result).where(t.c.run_id == run_id))
            return {row.position: (row.name, json.loads(row.result)) for row in rows}

    def write(self, run_id: str, position: int, name: str, result: JsonValue) -> RecordedStep:
        """Record a step (blocking) and return what is recorded at its position: this step, or the one another
        attempt of the run (a process taken over while it still ran) recorded there first."""
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
        try:
            with self.engine.begin() as connection:
                connection.execute(self._insert, {"run_id": run_id, "position": position, "name": name, "result": text})
        except sa.exc.IntegrityError:
            t = self.table
            with self.engine.connect() as connection:
                row = connection.execute(
                    sa.select(t.c.name, t.c.result).where(t.c.run_id == run_id, t.c.position == position)
                ).one()
            return row.name, json.loads(row.result)
        return name, result

    def steps(self, run_id: str) -> list[tuple[int, str, JsonValue]]:
        """The recorded steps of ``run_id`` in order: ``(position, name, result)`` (blocking)."""
        return [(position, *step) for position, step in sorted(self.recorded(run_id).items())]

    def __repr__(self) -> str:
        return f"<SqlStepLog {self.engine.url!r}>"


class StepLogJournal:
    """The journal of one attempt of a run over a :class:`SqlStepLog`: what earlier attempts recorded, read once
    when the attempt begins, replayed by position; each new step written before the run goes on."""

    def __init__(self, log: SqlStepLog, run_id: str, recorded: dict[int, RecordedStep]) -> None:
        self.log = log
        self.run_id = run_id
        self.recorded = recorded

    async def record(self, position: int, name: str, execute: Any, request: Any = None) -> JsonValue:
        """See :meth:`kavalai.durable.Journal.record`."""
        found = self.recorded.get(position)
        if found is not None:
            return replayed(position, found, name)
        result = await execute()
        kept = await asyncio.to_thread(self.log.write, self.run_id, position, name, result)
        return replayed(position, kept, name)
