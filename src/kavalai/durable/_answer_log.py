"""An answer log in an SQL table: where the answers given during a step (an MCP server's requests for user input)
are kept for the step's next attempt, and where questions published for an answer from outside wait for it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = ["SqlAnswerLog"]


class SqlAnswerLog:
    """An :class:`~kavalai.durable.AnswerLog` in the table ``kavalai_answers`` of an SQL database (SQLite or
    Postgres, through SQLAlchemy, which the ``dbos`` extra brings): one row per question asked during a step, its
    answer once given. DBOS runs keep theirs in the journal's database; give one to a
    :class:`~kavalai.durable.TemporalRunner` (``answers=``) on a database every worker reaches.

    Args:
        url: the database (``sqlite:///path``, ``postgresql+psycopg://...``).
        engine: an SQLAlchemy engine to use instead.
    """

    def __init__(self, url: str | None = None, *, engine: Any = None) -> None:
        import sqlalchemy as sa

        if engine is None:
            if url is None:
                raise ValueError("SqlAnswerLog needs a database: SqlAnswerLog('sqlite:///answers.sqlite').")
            engine = sa.create_engine(url)
        from kavalai.durable._schema import ANSWERS, ensure_schema

        self.engine = engine
        self.table = ANSWERS
        ensure_schema(engine)

    async def lookup(self, run_id: str, key: str) -> tuple[bool, Any]:
        """See :meth:`kavalai.durable.AnswerLog.lookup`."""
        return await asyncio.to_thread(self.lookup_now, run_id, key)

    async def keep(self, run_id: str, key: str, question: Any, answer: Any) -> None:
        """See :meth:`kavalai.durable.AnswerLog.keep`."""
        await asyncio.to_thread(self.keep_now, run_id, key, question, answer)

    async def publish(self, run_id: str, key: str, question: Any) -> None:
        """See :meth:`kavalai.durable.AnswerLog.publish`."""
        await asyncio.to_thread(self._publish, run_id, key, question)

    async def open_questions(self, run_id: str) -> dict[str, Any]:
        """See :meth:`kavalai.durable.AnswerLog.open_questions`."""
        return await asyncio.to_thread(self.open_now, run_id)

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
        values = {"answered": True, "answer": json.dumps(answer, ensure_ascii=False)}
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
        text = json.dumps(answer, ensure_ascii=False)
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

    def _publish(self, run_id: str, key: str, question: Any) -> None:
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
    return json.dumps(value, ensure_ascii=False)
