"""A durable run whose workflow names a tool the kernel does not have is refused before anything of it runs or is
recorded, naming the node and the URI, and stays resumable: resumed once the tool is back, it finishes with each
effect once (counted at a local shop service). Without the refusal a resume met the tool's absence before the journal
(the kernel resolves a tool before its durable middleware): the run ended failed, its sent step never settled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kavalai.durable import DbosRunner, DurableRunner
from kavalai.errors import DefinitionChangedError
from kavalai.workflow import WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import charging_engine, interrupted_at_b, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

REFUSED = r"node 'a' calls 'rest://shop\.charge', which this kernel does not have"


def toolless_engine(runner: DurableRunner, shop: str) -> WorkflowEngine:
    """The workflow of :func:`charging_engine` (the same definition) on a kernel without its ``charge`` tool."""
    engine = charging_engine(runner, shop)
    assert engine.kernel.remove_tool("rest://shop.charge")
    return engine


async def test_a_resume_without_a_steps_tool_is_refused_and_a_resume_with_it_finishes_each_effect_once(
    tmp_path: Path,
) -> None:
    async with interrupted_at_b(tmp_path / "journal.sqlite", "toolless-1") as (runner, engine, shop):
        for _ in range(2):  # refused each time, the run left as it was
            with pytest.raises(DefinitionChangedError, match=REFUSED) as refused:
                await toolless_engine(runner, shop).run({}, run_id="toolless-1")
            assert (refused.value.step, refused.value.run_id) == ("a", "toolless-1")
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # nothing ran
            assert await runner.status("toolless-1") == "PENDING"
        result = await engine.run({}, run_id="toolless-1")
        assert result.ok, result.error
        assert result.output == {"n": [1, 2, 3]}
        assert orders(fetch(f"{shop}/requests")) == ["A", "B", "B", "C"]  # B again, under its key
        assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]  # each charged once


async def test_a_first_run_without_a_steps_tool_is_refused_before_it_is_recorded(tmp_path: Path) -> None:
    runner = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        with serve(create_app()) as shop:
            with pytest.raises(DefinitionChangedError, match=REFUSED):
                await toolless_engine(runner, shop).run({}, run_id="toolless-2")
            assert await runner.status("toolless-2") is None  # not even enqueued
            assert fetch(f"{shop}/requests") == []
            result = await charging_engine(runner, shop).run({}, run_id="toolless-2")
            assert result.output == {"n": [1, 2, 3]}
            # a finished run's outcome is read back even where the tool is gone: nothing of it runs
            again = await toolless_engine(runner, shop).run({}, run_id="toolless-2")
            assert again.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
    finally:
        await runner.aclose()


async def test_a_worker_without_a_steps_tool_leaves_a_run_it_recovers_resumable(tmp_path: Path) -> None:
    """The refusal is in the run's own workflow too: a worker taking up a run of a gone process (its liveness sweep)
    parks it, nothing of it run, and a worker with the tool finishes it, each effect once."""
    path = tmp_path / "journal.sqlite"
    async with interrupted_at_b(path, "toolless-3") as (gone, _, shop):
        await gone.aclose()
        runner = DbosRunner(f"sqlite:///{path}")
        try:
            runner.register(toolless_engine(runner, shop))
            await runner.start()  # its sweep hands the gone process's run to the queue, which this worker serves
            while True:  # until parked here, or (without the refusal) ended by the missing tool (its failure)
                if "toolless-3" in runner._parked.errors or await runner.status("toolless-3") in {"SUCCESS", "ERROR"}:
                    break
                await asyncio.sleep(0.05)
            refused = runner._parked.errors.get("toolless-3")
            assert isinstance(refused, DefinitionChangedError)
            assert refused.step == "a"
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
            assert await runner.status("toolless-3") == "PENDING"
            result = await charging_engine(runner, shop).run({}, run_id="toolless-3")
            assert result.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
        finally:
            await runner.aclose()
