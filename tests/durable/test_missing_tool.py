"""A durable run whose workflow names a tool the kernel does not have is refused before anything of it runs or is
recorded, naming the node and the URI, and stays resumable: resumed once the tool is back, it finishes with each
effect once (counted at a local shop service). Without the refusal a resume met the tool's absence before the journal
(the kernel resolves a tool before its durable middleware): the run ended failed, its sent step never settled."""

from __future__ import annotations

import asyncio
import re
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, RestServer
from kavalai.agent import Agent
from kavalai.durable import DbosRunner, DurableRunner
from kavalai.errors import DefinitionChangedError, RunInterruptedError
from kavalai.testing import ScriptedLLM, tool_call
from kavalai.workflow import WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_doubt import journal
from tests.durable.test_journal_io import charging_engine, interrupted_at_b, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

TOOL = "rest://shop.charge"
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


def test_a_temporal_worker_without_a_steps_tool_is_refused_and_the_run_finishes_with_it(
    temporal_address: str, tmp_path: Path
) -> None:
    """The worker killed during charge C; a process whose kernel lacks the charge tool (removed from its
    configuration) tries to resume the run: refused before its worker starts, naming node and URI, nothing sent (no
    worker of it takes the run nor C's retried activity); a process with the tool then finishes the run, each effect
    once. Without the refusal the tool's absence was C's recorded failure: the run ended failed."""
    from tests.durable.fault_matrix import Case, Outcome, check, finish, start, workflow_text

    case = Case("temporal", "during", 1)
    workflow = tmp_path / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    run_id = f"toolless-{uuid.uuid4().hex[:8]}"
    outcome = Outcome(case)
    with serve(create_app(kill_during="C")) as shop:
        first = start(case, temporal_address, workflow, run_id, "first", shop)
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        before = fetch(f"{shop}/requests")
        toolless = start(case, temporal_address, workflow, run_id, "toolless", shop, "--without-tool", TOOL)
        toolless.communicate(timeout=180)
        log = (tmp_path / "toolless.log").read_text()
        assert toolless.returncode == 1, log
        assert re.search(rf"DefinitionChangedError: Run {run_id} is not run here: {REFUSED}", log), log
        assert fetch(f"{shop}/requests") == before  # nothing sent
        resumer = start(case, temporal_address, workflow, run_id, "resumer", shop)
        output = finish(resumer, 180, outcome)
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    check(outcome, [output], before, requests, effects)
    assert outcome.problems == [], (tmp_path / "resumer.log").read_text()
    assert [e["order"] for e in effects] == ["A", "B", "C", "D", "E"]


def charging_agent(runner: DurableRunner, shop: str, script: list[Any], *, allowed: bool, tool: bool = True) -> Agent:
    """An agent that charges through ``rest://shop.charge`` as its scripted model says; ``allowed``: its
    ``allowed_tools`` names the tool by URI (else every tool of the kernel); ``tool=False``: the kernel lacks it."""
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url=shop))
    schema = {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}}
    kernel.register_rest_tool("shop", "charge", "POST", schema, path="/charge")
    if not tool:
        assert kernel.remove_tool(TOOL)
    allowed_tools = [TOOL] if allowed else None
    return Agent(
        ScriptedLLM(script), kernel=kernel, durable=runner, durable_name="shopper", allowed_tools=allowed_tools
    )


def charge(order: str) -> Any:
    return tool_call(TOOL, {"order": order, "amount": 1})


@pytest.mark.parametrize("allowed", [True, False], ids=["allowed_tools", "every_tool"])
async def test_an_agent_resumed_without_a_steps_tool_is_refused_and_finishes_with_it(
    tmp_path: Path, allowed: bool
) -> None:
    await agent_refused_then_finished("sqlite", tmp_path, allowed)


@pytest.mark.faults
@pytest.mark.parametrize("allowed", [True, False], ids=["allowed_tools", "every_tool"])
async def test_on_postgres_an_agent_resumed_without_a_steps_tool_is_refused_and_finishes_with_it(
    tmp_path: Path, allowed: bool
) -> None:
    await agent_refused_then_finished("postgres", tmp_path, allowed)


async def agent_refused_then_finished(kind: str, tmp_path: Path, allowed: bool) -> None:
    """A durable agent charged A, then B (its record lost with the journal: interrupted). Resumed on a kernel without
    the charge tool: refused naming the step and the URI, nothing sent, the run still resumable (before the run
    when its ``allowed_tools`` names the tool; when the recorded call meets the gone tool otherwise). Resumed with
    the tool: it finishes, each charge once. Without the refusal the agent told its model "unknown tool" and the run
    finished, B's step never settled."""
    with journal(kind, tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                script = [charge("A"), charge("B"), "done"]
                with pytest.raises(RunInterruptedError):
                    await charging_agent(runner, shop, script, allowed=allowed).run("charge", run_id="agent-1")
                await asyncio.to_thread(store.release)
                for _ in range(2):  # refused each time, the run left as it was
                    toolless = charging_agent(runner, shop, ["done"], allowed=allowed, tool=False)
                    with pytest.raises(DefinitionChangedError) as refused:
                        await toolless.run("charge", run_id="agent-1")
                    assert "its agent calls 'rest://shop.charge', which this kernel does not have" in str(refused.value)
                    assert (refused.value.step, refused.value.run_id) == (f"tool {TOOL}", "agent-1")
                    assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # nothing sent
                    assert await runner.status("agent-1") == "PENDING"
                result = await charging_agent(runner, shop, ["done"], allowed=allowed).run("charge", run_id="agent-1")
                assert result.output == "done"
                assert orders(fetch(f"{shop}/requests")) == ["A", "B", "B"]  # B again, where it went, with its key
                assert orders(fetch(f"{shop}/effects")) == ["A", "B"]  # each charged once
        finally:
            await runner.aclose()


async def test_a_temporal_agent_without_a_tool_it_names_is_refused_and_its_worker_does_not_start(
    temporal_address: str,
) -> None:
    """On Temporal an agent whose ``allowed_tools`` names a tool its kernel lacks is refused by ``run()`` before its
    worker starts, and a worker serving it (``start_worker``, as ``kavalai worker``) does not start: nothing of the
    run is taken up or sent; with the tool the same run id runs, charging once."""
    from kavalai.durable import TemporalRunner

    queue = f"q-agent-{uuid.uuid4().hex[:8]}"
    with serve(create_app()) as shop:
        runner = TemporalRunner(temporal_address, task_queue=queue)
        try:
            toolless = charging_agent(runner, shop, [charge("A"), "done"], allowed=True, tool=False)
            with pytest.raises(DefinitionChangedError, match=r"Run agent-t is not run here: its agent calls") as run:
                await toolless.run("charge", run_id="agent-t")
            assert run.value.step == f"tool {TOOL}"
            with pytest.raises(DefinitionChangedError, match=r"This worker does not serve agent:shopper: its agent"):
                await runner.start_worker()
            assert not runner.serving
            assert fetch(f"{shop}/requests") == []
        finally:
            await runner.aclose()
        runner = TemporalRunner(temporal_address, task_queue=queue)
        try:
            result = await charging_agent(runner, shop, [charge("A"), "done"], allowed=True).run(
                "charge", run_id="agent-t"
            )
        finally:
            await runner.aclose()
        assert result.output == "done"
        assert orders(fetch(f"{shop}/effects")) == ["A"]
