"""Round 10's hand-edited journal rows (``tests/durable/FAULTS_round10.md``, faults 1, 2, 8 and 18): an operator's
edit of a step's row, of the tables' version row, of a sent mark, while a run is interrupted with charge B sent (its
outcome unknown). Counted at a local shop; SQLite in the default suite, Postgres under ``-m faults``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from kavalai.durable import DbosRunner
from kavalai.errors import DurableRunError
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import orders
from tests.durable.test_operator_faults import charges, interrupted_at_b, status
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.faults)]
STEPS = "UPDATE kavalai_steps SET result = :text WHERE run_id = :run AND position = :position"


def edit(url: str, statement: str, **values: object) -> str | None:
    """An operator's statement on the journal's database; returns the first column of the row it returns, if any."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as connection:
            found = connection.execute(sa.text(statement), values)
            return found.scalar() if found.returns_rows else None
    finally:
        engine.dispose()


def row(url: str, run_id: str, position: int) -> str | None:
    query = "SELECT result FROM kavalai_steps WHERE run_id = :run AND position = :position"
    return edit(url, query, run=run_id, position=position)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_row_edited_to_text_that_is_not_json_is_refused_naming_the_step(kind: str, tmp_path: Path) -> None:
    """Fault 1: A's record edited to ``{"charge": 1`` (cut short). It was the run's failure for good (DBOS ``ERROR``,
    ``PortableWorkflowError: Expecting ',' delimiter``): now the resume is refused naming the step and the row, sends
    nothing, and the run stays resumable: mended, it resumes (B in doubt, once)."""
    async with interrupted_at_b(kind, tmp_path, "edited-1") as (runner, url, shop):
        kept = await asyncio.to_thread(row, url, "edited-1", 1)
        await asyncio.to_thread(edit, url, STEPS, text='{"charge": 1', run="edited-1", position=1)
        with pytest.raises(DurableRunError, match=r"step 1 \(a#1/tool python://charge#1\) has its record .* not JSON"):
            await charges(runner, shop).run({}, run_id="edited-1")
        assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
        assert await asyncio.to_thread(status, url, "edited-1") == "PENDING"
        await asyncio.to_thread(edit, url, STEPS, text=kept, run="edited-1", position=1)
        result = await charges(runner, shop).run({}, run_id="edited-1")
        assert "Outcome unknown: check before retrying" in str(result.error)
        assert orders(fetch(f"{shop}/requests")) == orders(fetch(f"{shop}/effects")) == ["A", "B"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_done_row_deleted_by_hand_leaves_its_step_in_doubt_never_sent_again(kind: str, tmp_path: Path) -> None:
    """Fault 8: A's ``done`` row deleted, its sent mark left: A reads as sent without a result, in doubt (its tool
    may not repeat), never charged again."""
    async with interrupted_at_b(kind, tmp_path, "deleted-1") as (runner, url, shop):
        delete = "DELETE FROM kavalai_steps WHERE run_id = :run AND position = 1"
        await asyncio.to_thread(edit, url, delete, run="deleted-1")
        result = await charges(runner, shop).run({}, run_id="deleted-1")
        assert str(result.error).startswith("Node 'a': Outcome unknown: check before retrying. Step 1 of run")
        assert orders(fetch(f"{shop}/requests")) == orders(fetch(f"{shop}/effects")) == ["A", "B"]


@pytest.mark.parametrize(
    "mark",
    ['{"state": "bogus", "origin": null}', *(pytest.param(m, marks=pytest.mark.faults) for m in ('"sent"', "[1, 2]"))],
)
async def test_a_sent_mark_edited_by_hand_still_marks_its_step_sent(mark: str, tmp_path: Path) -> None:
    """Fault 18: B's sent mark edited to other JSON (a string, a list, a wrong state word): B is still a step sent
    without a result, in doubt, charged once."""
    async with interrupted_at_b("sqlite", tmp_path, "mark-1") as (runner, url, shop):
        await asyncio.to_thread(edit, url, STEPS, text=mark, run="mark-1", position=-2)
        result = await charges(runner, shop).run({}, run_id="mark-1")
        assert str(result.error).startswith("Node 'b': Outcome unknown: check before retrying. Step 2 of run")
        assert orders(fetch(f"{shop}/requests")) == orders(fetch(f"{shop}/effects")) == ["A", "B"]


async def test_a_newer_tables_version_set_by_hand_is_refused_and_nothing_is_sent(tmp_path: Path) -> None:
    """Fault 2: ``kavalai_schema`` set to version 99 while the run is interrupted: a runner of this release refuses
    the journal naming the version, sends nothing, writes nothing (the row still 99)."""
    async with interrupted_at_b("sqlite", tmp_path, "newer-1") as (_, url, _shop):
        pass
    await asyncio.to_thread(edit, url, "UPDATE kavalai_schema SET version = 99")
    runner = DbosRunner(url)
    try:
        with serve(create_app()) as shop:
            with pytest.raises(Exception, match="version 99, newer than this release") as raised:
                await charges(runner, shop).run({}, run_id="newer-1")
            assert fetch(f"{shop}/requests") == []
    finally:
        await runner.aclose()
    assert type(raised.value).__module__.startswith("kavalai")
    assert await asyncio.to_thread(edit, url, "SELECT version FROM kavalai_schema") == 99
