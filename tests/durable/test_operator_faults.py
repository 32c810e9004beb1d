"""Round 9's operator faults on a DBOS journal (``tests/durable/FAULTS_round9.md``), counted at a local shop: the
step table dropped while a charge is in flight (fault 4), a node removed while its step is in doubt (9), a run
cancelled while it is interrupted (16). SQLite in the default suite, Postgres under ``-m faults``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kavalai import FunctionKernel, pythontool
from kavalai.durable import DbosRunner
from kavalai.durable.dbos import DbosClient
from kavalai.errors import DefinitionChangedError, RunCancelledError, RunInterruptedError
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_doubt import described, journal
from tests.durable.test_journal_io import orders
from tests.servers.effects_app import create_app, post_charge
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

SENT_B = {"position": 2, "name": "b#1/tool python://charge#1", "state": "sent"}


def charges(runner: DbosRunner, shop: str, nodes: str = "abc") -> WorkflowEngine:
    """One unkeyed charge per node (a Python tool without a key, its policy ``fail``: a repeat is a second
    charge), in order; the output lists the charges' numbers."""

    @pythontool
    def charge(order: str) -> dict[str, Any]:
        return post_charge(shop, order)

    kernel = FunctionKernel()
    kernel.register_python_tool("charge", charge)
    builder = WorkflowBuilder("unkeyed", input=dict, output=dict).start(next=nodes[0])
    for node, after in zip(nodes, [*nodes[1:], "done"], strict=True):
        inputs = {"order": {"expr": f"'{node.upper()}'"}}
        builder = builder.function(node, tool="python://charge", inputs=inputs, next=after)
    listed = ", ".join(f"{node}.result.charge" for node in nodes)
    return WorkflowEngine(builder.end("done", outputs={"n": {"expr": f"[{listed}]"}}).build(), kernel, durable=runner)


def dropper(url: str) -> Any:
    """An operator's ``DROP TABLE kavalai_steps`` when charge B is made (its answer not yet back)."""

    def on_charge(order: str) -> None:
        if order != "B":
            return
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.begin() as connection:
                connection.execute(sa.text("DROP TABLE kavalai_steps"))
        finally:
            engine.dispose()

    return on_charge


def status(url: str, run_id: str) -> str | None:
    client = DbosClient(url)
    try:
        return client.status(run_id)
    finally:
        client.close()


async def test_the_step_table_dropped_mid_step_interrupts_the_run_never_the_tools_error(journal_url: str) -> None:
    """Fault 4: B's record meets no table. It was ``Tool python://charge failed: OperationalError: no such table``
    (Postgres: ``UndefinedTable``), the run failed for good after B's charge; now the run is interrupted, naming the
    journal's error, resumable (PENDING), nothing sent after B."""
    runner = DbosRunner(journal_url, journal_outage=1, busy_timeout=0.2)
    try:
        with serve(create_app(on_charge=dropper(journal_url))) as shop:
            with pytest.raises(RunInterruptedError, match=r"could not record step 2 \(b#1/tool python://charge#1\)"):
                await charges(runner, shop).run({}, run_id="dropped-1")
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
    finally:
        await runner.aclose()
    assert await asyncio.to_thread(status, journal_url, "dropped-1") == "PENDING"


@contextlib.asynccontextmanager
async def interrupted_at_b(kind: str, tmp_path: Path, run_id: str) -> AsyncIterator[tuple[DbosRunner, str, str]]:
    """The journal went away while B's charge was in flight, past the run's patience: the run ``run_id`` is
    interrupted with B sent, no process runs it, and the journal is back. Yields the runner, the journal's URL and
    the shop's."""
    with journal(kind, tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                with pytest.raises(RunInterruptedError):
                    await charges(runner, shop).run({}, run_id=run_id)
                await asyncio.to_thread(store.release)
                yield runner, store.url, shop
        finally:
            await runner.aclose()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.faults)])
async def test_a_node_removed_while_its_step_is_in_doubt_is_refused_naming_it(kind: str, tmp_path: Path) -> None:
    """Fault 9: B found sent (its outcome unknown), then node b removed from the workflow: the resume is refused
    naming 'b' and sends nothing; the mark stays; the old definition then ends the run in doubt, B once."""
    async with interrupted_at_b(kind, tmp_path, "removed-1") as (runner, url, shop):
        with pytest.raises(DefinitionChangedError, match="step 'b' was removed"):
            await charges(runner, shop, "ac").run({}, run_id="removed-1")
        assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
        assert await asyncio.to_thread(described, url, "removed-1") == [SENT_B]
        result = await charges(runner, shop).run({}, run_id="removed-1")
        assert not result.ok
        assert "Outcome unknown: check before retrying" in str(result.error)
        assert orders(fetch(f"{shop}/requests")) == orders(fetch(f"{shop}/effects")) == ["A", "B"]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.faults)])
async def test_a_run_cancelled_while_interrupted_is_never_revived(kind: str, tmp_path: Path) -> None:
    """Fault 16: the run interrupted with B sent and no process running it; ``kavalai runs cancel`` once the journal
    is back: the run is ``cancelled``, its resume refused (``RunCancelledError``), nothing sent again."""
    async with interrupted_at_b(kind, tmp_path, "stopped-1") as (runner, url, shop):
        client = DbosClient(url)
        try:
            await asyncio.to_thread(client.cancel, "stopped-1")
            info = await asyncio.to_thread(client.describe, "stopped-1")
        finally:
            client.close()
        assert info.state == "cancelled"
        assert info.in_doubt == [SENT_B]
        with pytest.raises(RunCancelledError, match="^Run stopped-1 is cancelled"):
            await charges(runner, shop).run({}, run_id="stopped-1")
        assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
