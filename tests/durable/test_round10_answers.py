"""Round 10's fault 3 (``tests/durable/FAULTS_round10.md``): an answer's two writes, the claim of the question's row
in ``kavalai_answers`` and DBOS's message to the run, with the second failing (the journal's disk full as it is
written, the answering process gone): the run must not wait for ever on an answer that won but never arrived."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from kavalai.durable import DbosRunner
from kavalai.durable.dbos import DbosClient
from kavalai.errors import AlreadyAnsweredError, DurableRunError
from tests.durable.test_answer_race import Asker, asked

pytestmark = pytest.mark.timeout(240)

FAIL_SEND = (
    "CREATE TRIGGER fail_send BEFORE INSERT ON notifications BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
)


def operator(url: str, statement: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(statement))
    finally:
        engine.dispose()


def answer(url: str, run_id: str, key: str, value: object) -> None:
    client = DbosClient(url)
    try:
        client.answer(run_id, key, value)
    finally:
        client.close()


async def test_an_answer_whose_message_failed_after_its_claim_still_reaches_the_run(tmp_path: Path) -> None:
    """The first answer (deny) claims the question, then DBOS's message fails (the journal full as it is written:
    a trigger refuses it). It was a raw ``IntegrityError`` to the first sender, then every later answer was told
    ``'approval-1' was answered already, with deny`` while the run, never sent it, waited for ever. Now the first
    sender is told the answer is kept but not sent (a ``DurableRunError``), and the next answer, refused as the loser
    naming the deny, sends the kept deny to the run, which takes it (once)."""
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    runner = DbosRunner(url)
    deny = {"action": "deny", "reason": "no"}
    try:
        done = asyncio.ensure_future(runner.run(Asker(), {"rounds": 1}, run_id="claimed-1"))
        key = await asked(runner, "claimed-1", done, set())
        await asyncio.to_thread(operator, url, FAIL_SEND)
        with pytest.raises(DurableRunError, match=r"the answer to 'approval-1' is kept, but it could not be sent"):
            await asyncio.to_thread(answer, url, "claimed-1", key, deny)
        await asyncio.to_thread(operator, url, "DROP TRIGGER fail_send")
        with pytest.raises(AlreadyAnsweredError, match="was answered already") as lost:
            await asyncio.to_thread(answer, url, "claimed-1", key, "allow")
        assert lost.value.answer == deny
        assert await asyncio.wait_for(asyncio.shield(done), 60) == [deny]
        with pytest.raises(AlreadyAnsweredError):  # and an answer after the run took it sends nothing more
            await runner.answer("claimed-1", key, "allow")
    finally:
        done.cancel()
        await runner.aclose()
