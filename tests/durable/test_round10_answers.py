"""Round 10's faults 3, 4 and 5 (``tests/durable/FAULTS_round10.md``). Fault 3: an answer's two writes, the claim of
the question's row in ``kavalai_answers`` and DBOS's message to the run, with the second failing (the journal's disk
full as it is written, the answering process gone): the run must not wait for ever on an answer that won but never
arrived. Fault 4: a journal read-only from the start. Fault 5: an approval answered after its deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from kavalai.durable import DbosRunner, current_run
from kavalai.durable.dbos import DbosClient
from kavalai.errors import AlreadyAnsweredError, DurableRunError
from tests.durable.conftest import fetch
from tests.durable.test_answer_race import Asker, asked
from tests.durable.test_journal_io import charging_engine
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

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


class Waiter:
    """A durable target that waits half a second for an approval, then returns what it got (``None``: none)."""

    durable_name = "waiter"
    durable_kernel = None

    async def run_journaled(self, payload: object) -> object:
        run = current_run()
        assert run is not None
        return await run.wait_for_answer("approval", {"tool": "python://refund"}, timeout=0.5)


async def test_an_approval_answered_after_its_deadline_is_refused(tmp_path: Path) -> None:
    """Fault 5: the run's wait ended at its deadline (no answer: ``None``, the caller's deny); an ``allow`` sent
    then is refused naming the question, and the run's outcome stays the deadline's."""
    runner = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        assert await runner.run(Waiter(), {}, run_id="late-1") is None
        with pytest.raises(LookupError, match="waits for no answer 'approval-1'"):
            await runner.answer("late-1", "approval-1", "allow")
        assert await runner.result("late-1") is None
    finally:
        await runner.aclose()


@pytest.mark.faults  # three runners started one after another: not for the default suite's budget
async def test_a_journal_opened_read_only_from_the_start_is_refused_and_charges_nothing(tmp_path: Path) -> None:
    """Fault 4: the SQLite journal on a read-only file system (opened ``mode=ro``): the runner's start fails on its
    first write (the CLI: ``the database could not be used (OperationalError: attempt to write a readonly
    database)``, exit 1), nothing is charged, and the process can start a runner on a writable journal after it."""
    path = tmp_path / "journal.sqlite"
    first = DbosRunner(f"sqlite:///{path}")
    await first.run(Waiter(), {}, run_id="made-1")  # the journal exists, its tables made
    await first.aclose()
    with serve(create_app()) as shop:
        runner = DbosRunner(f"sqlite:///file:{path}?mode=ro&uri=true")
        try:
            with pytest.raises(sa.exc.OperationalError, match="readonly database"):
                await charging_engine(runner, shop).run({}, run_id="ro-1")
        finally:
            await runner.aclose()
        assert fetch(f"{shop}/requests") == []
        writable = DbosRunner(f"sqlite:///{tmp_path / 'other.sqlite'}")
        try:
            assert (await charging_engine(writable, shop).run({}, run_id="rw-1")).ok
        finally:
            await writable.aclose()
        assert [r["order"] for r in fetch(f"{shop}/effects")] == ["A", "B", "C"]
