"""An answer log in an SQL table: where the answers given during a step (an MCP server's requests for user input)
are kept for the step's next attempt, and where questions published for an answer from outside wait for it. Its
reads and writes from async code cross the journal's gate (:func:`~._journal_io.journal_io`): an outage pauses them
for ``outage`` seconds at most."""

from __future__ import annotations

import json
from typing import Any

from kavalai.durable._journal_io import DEFAULT_OUTAGE, journal_io
from kavalai.durable._store import journal_json

__all__ = ["SqlAnswerLog"]


class SqlAnswerLog:
    """An :class:`~kavalai.durable.AnswerLog` in the table ``kavalai_answers`` of an SQL database (SQLite or
    Postgres, through SQLAlchemy, which the ``dbos`` extra brings): one row per question asked during a step, its
    answer once given. DBOS runs keep theirs in the journal's database; give one to a
    :class:`~kavalai.durable.TemporalRunner` (``answers=``) on a database every worker reaches.

    Args:
        url: the database (``sqlite:///path``, ``postgresql+psycopg://...``).
        engine: an SQLAlchemy engine to use instead.
        outage: how long, in seconds, its async reads and writes wait for the database to come back.
    """

    def __init__(self, url: str | None = None, *, engine: Any = None, outage: float = DEFAULT_OUTAGE) -> None:
        import sqlalchemy as sa

        if engine is None:
            if url is None:
                raise ValueError("SqlAnswerLog needs a database: SqlAnswerLog('sqlite:///answers.sqlite').")
            engine = sa.create_engine(url)
        from kavalai.durable._schema import ANSWERS, ensure_schema

        self.engine = engine
        self.outage = outage
        self.table = ANSWERS
        ensure_schema(engine)

    async def lookup(self, run_id: str, key: str) -> tuple[bool, Any]:
        """See :meth:`kavalai.durable.AnswerLog.lookup`."""
        return await journal_io(run_id, f"look up answer {key}", self.lookup_now, run_id, key, outage=self.outage)

    async def keep(self, run_id: str, key: str, question: Any, answer: Any) -> None:
        """See :meth:`kavalai.durable.AnswerLog.keep`."""
        what = f"keep answer {key}"
        await journal_io(run_id, what, self.keep_now, run_id, key, question, answer, outage=self.outage)

    async def publish(self, run_id: str, key: str, question: Any) -> None:
        """See :meth:`kavalai.durable.AnswerLog.publish`."""
        await journal_io(run_id, f"publish question {key}", self.publish_now, run_id, key, question, outage=self.outage)

    async def open_questions(self, run_id: str) -> dict[str, Any]:
        """See :meth:`kavalai.durable.AnswerLog.open_questions`."""
        return await journal_io(run_id, "read the open questions", self.open_now, run_id, outage=self.outage)

    def open_now(self, run_id: str) -> dict[str, Any]:
        """:meth:`open_questions`, blocking."""
        import sqlalchemy as sa

        t = self.table
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.c.key, t.c.question).where(t.c.run_id == run_id, ~t.c.answered))
            return {row.key: json.loads(row.question) for row in rows}

    def keep_now(self, run_id: str, key: str, question: Any, answer: Any) -> None:
        """:meth:`keep`, blocking: an upsert, in one transaction."""
        t = self.table
        values = {"answered": True, "answer": _text(answer)}
        with self.engine.begin() as connection:
            where = (t.c.run_id == run_id) & (t.c.key == key)
            if connection.execute(t.update().where(where).values(**values)).rowcount == 0:
                connection.execute(t.insert().values(run_id=run_id, key=key, question=_text(question), **values))

    def claim_now(self, run_id: str, key: str, question: Any, answer: Any) -> tuple[bool, Any]:
        """Record ``answer`` to ``key`` unless an answer is recorded already, atomically (blocking): ``(True,
        answer)`` when this one won, ``(False, the recorded one)`` when another did. Of answers racing from any
        number of processes exactly one wins."""
        import sqlalchemy as sa

        t = self.table
        text = _text(answer)
        where = (t.c.run_id == run_id) & (t.c.key == key)
        try:
            with self.engine.begin() as connection:
                taken = connection.execute(t.update().where(where & ~t.c.answered).values(answered=True, answer=text))
                if taken.rowcount == 0:
                    connection.execute(
                        t.insert().values(run_id=run_id, key=key, question=_text(question), answered=True, answer=text)
                    )
            return True, answer
        except sa.exc.IntegrityError:  # answered already: the first answer stays
            found, winner = self.lookup_now(run_id, key)
            return False, winner if found else None

    def lookup_now(self, run_id: str, key: str) -> tuple[bool, Any]:
        """:meth:`lookup`, blocking."""
        import sqlalchemy as sa

        t = self.table
        with self.engine.connect() as connection:
            row = connection.execute(
                sa.select(t.c.answered, t.c.answer).where(t.c.run_id == run_id, t.c.key == key)
            ).first()
        if row is None or not row.answered:
            return False, None
        return True, json.loads(row.answer)

    def publish_now(self, run_id: str, key: str, question: Any) -> None:
        """:meth:`publish`, blocking."""
        import sqlalchemy as sa

        t = self.table
        try:
            with self.engine.begin() as connection:
                connection.execute(t.insert().values(run_id=run_id, key=key, question=_text(question), answered=False))
        except sa.exc.IntegrityError:  # published by an earlier attempt of the step: kept as it is
            pass

    def dispose(self) -> None:
        """Close the log's connections."""
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"<SqlAnswerLog {self.engine.url!r}>"


def _text(value: Any) -> str:
    return journal_json(value)
