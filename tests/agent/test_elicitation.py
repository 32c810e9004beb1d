"""An MCP server asking the user for input during an agent's tool call (``McpServer(elicitation="caller")``), in
both protocol eras, against the real features server: the agent's ``on_elicitation`` answers, as an event too."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, McpServer, ToolExecutionError
from kavalai.adapters.mcp import McpElicitation, answering
from kavalai.agent import Agent, AgentEvent, InputRequested
from kavalai.testing import ScriptedLLM, tool_call

ROOT = Path(__file__).resolve().parents[2]
ERAS = [pytest.param("2026-07-28", id="2026-07-28"), pytest.param("legacy", id="handshake")]


@pytest.fixture(params=ERAS)
async def kernel(request: pytest.FixtureRequest) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    args = ["-m", "tests.servers.mcp_features"]
    kernel.register_mcp_server(
        McpServer(
            name="feat", command=sys.executable, args=args, cwd=ROOT, elicitation="caller", protocol=request.param
        )
    )
    yield kernel
    await kernel.close()


async def test_the_agents_hook_answers_and_the_run_reports_it(kernel: FunctionKernel) -> None:
    events: list[AgentEvent] = []

    async def user(request: McpElicitation) -> dict[str, Any]:
        return {"name": "Ada"}

    llm = ScriptedLLM([tool_call("mcp://feat.greet", {}), "Greeted."])
    agent = Agent(llm, kernel=kernel, on_elicitation=user, on_event=events.append)
    result = await agent.run("Greet whoever is there.")
    assert [(record.status, record.result) for record in result.tool_calls] == [("ok", {"result": "hello Ada"})]
    [asked] = [e for e in events if isinstance(e, InputRequested)]
    assert (asked.request.server, asked.request.message) == ("feat", "Who are you?")


async def test_without_an_answerer_the_request_is_refused_saying_why(kernel: FunctionKernel) -> None:
    with pytest.raises(ToolExecutionError, match=r"mcp://feat\.greet.*no answerer"):
        await kernel.call_tool("mcp://feat.greet")


async def test_answering_sets_the_answerer_for_plain_calls(kernel: FunctionKernel) -> None:
    async def user(request: McpElicitation) -> dict[str, Any]:
        return {"name": "Grace"}

    with answering(user):
        assert (await kernel.call_tool("mcp://feat.greet")).result == "hello Grace"  # type: ignore[attr-defined]


class Crash(BaseException):
    """Stands for the process dying after the tool answered and before its step was recorded."""


async def test_in_a_durable_run_an_answer_given_is_not_asked_again_when_the_step_is_redone(
    kernel: FunctionKernel,
) -> None:
    import asyncio

    from kavalai.durable import MemoryRunner
    from kavalai.kernel import CallNext
    from kavalai.kernel import ToolCall as KernelCall

    asked: list[str] = []

    async def user(request: McpElicitation) -> dict[str, Any]:
        asked.append(request.message)
        return {"name": "Ada"}

    crash = [True]

    async def dies_once(call: KernelCall, call_next: CallNext) -> Any:
        result = await call_next(call)  # the server asked, the user answered, the tool answered...
        if crash[0]:
            crash[0] = False
            raise Crash  # ...and the process died before the step was recorded
        return result

    runner = MemoryRunner()
    script = [tool_call("mcp://feat.greet", {}), "Greeted."]
    agent = Agent(ScriptedLLM(list(script)), kernel=kernel, durable=runner, on_elicitation=user)
    runner.register(agent)
    kernel.add_middleware(dies_once)  # inside the runner's journaling middleware
    with pytest.raises(Crash):
        await agent.run("Greet whoever is there.", run_id="greet-1")
    resumed = Agent(ScriptedLLM(["Greeted."]), kernel=kernel, durable=runner, on_elicitation=user)  # the rest
    result = await asyncio.wait_for(resumed.run("Greet whoever is there.", run_id="greet-1"), 30)
    assert [(record.status, record.result) for record in result.tool_calls] == [("ok", {"result": "hello Ada"})]
    assert asked == ["Who are you?"]  # the redone call's request was answered from the answer log
    ((question, answered, answer),) = runner.answer_log.rows.values()
    assert answered
    assert answer == {"action": "accept", "content": {"name": "Ada"}}
    assert question["message"] == "Who are you?"


async def test_an_outside_elicitation_is_answered_through_the_runner(kernel: FunctionKernel) -> None:
    import asyncio

    from kavalai.agent import OutsideElicitation
    from kavalai.durable import MemoryRunner

    runner = MemoryRunner()
    llm = ScriptedLLM([tool_call("mcp://feat.greet", {}), "Greeted."])
    agent = Agent(llm, kernel=kernel, durable=runner, on_elicitation=OutsideElicitation(poll=0.02))
    running = asyncio.create_task(agent.run("Greet whoever is there.", run_id="greet-2"))
    pending: dict[str, Any] = {}
    for _ in range(500):
        await asyncio.sleep(0.02)
        if pending := await runner.pending("greet-2"):
            break
    ((key, question),) = pending.items()
    assert key.startswith("elicitation-")
    assert (question["kind"], question["server"], question["message"]) == ("elicitation", "feat", "Who are you?")
    assert question["schema"]["properties"]["name"]["type"] == "string"
    with pytest.raises(ValueError, match="request for input"):
        await runner.answer("greet-2", key, 42)
    await runner.answer("greet-2", key, {"name": "Grace"})
    result = await asyncio.wait_for(running, 30)
    assert [(record.status, record.result) for record in result.tool_calls] == [("ok", {"result": "hello Grace"})]
    assert await runner.pending("greet-2") == {}

    # A timeout declines; outside a durable run it cannot wait at all.
    timed = Agent(
        ScriptedLLM([tool_call("mcp://feat.greet", {}), "No one."]),
        kernel=kernel,
        durable=runner,
        on_elicitation=OutsideElicitation(timeout=0.1, poll=0.02),
    )
    declined = await asyncio.wait_for(timed.run("Greet whoever is there.", run_id="greet-3"), 30)
    assert declined.tool_calls[0].status == "error"
    plain = Agent(
        ScriptedLLM([tool_call("mcp://feat.greet", {}), "x"]), kernel=kernel, on_elicitation=OutsideElicitation()
    )
    outcome = await plain.run("Greet whoever is there.")
    assert "needs a durable run" in (outcome.tool_calls[0].error or "")  # the tool's failure, told to the model


async def test_on_dbos_an_outside_answer_is_a_row_a_client_in_another_process_can_write(
    kernel: FunctionKernel, tmp_path: Path
) -> None:
    import asyncio
    import json
    import subprocess

    from kavalai.agent import OutsideElicitation
    from kavalai.durable import DbosRunner

    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    runner = DbosRunner(db)
    llm = ScriptedLLM([tool_call("mcp://feat.greet", {}), "Greeted."])
    agent = Agent(llm, kernel=kernel, durable=runner, on_elicitation=OutsideElicitation(poll=0.05))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kavalai.cli.main", "answer", "greet-db", *args, "--db", db]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    try:
        running = asyncio.create_task(agent.run("Greet whoever is there.", run_id="greet-db"))
        listed: dict[str, Any] = {}
        for _ in range(100):
            await asyncio.sleep(0.1)
            shown = await asyncio.to_thread(cli)
            assert shown.returncode == 0, shown.stderr
            if listed := json.loads(shown.stdout):
                break
        ((key, question),) = listed.items()
        assert (question["kind"], question["message"]) == ("elicitation", "Who are you?")
        sent = await asyncio.to_thread(cli, key, '{"name": "Lin"}')
        assert sent.returncode == 0, sent.stderr
        result = await asyncio.wait_for(running, 30)
    finally:
        await runner.aclose()
    assert [(record.status, record.result) for record in result.tool_calls] == [("ok", {"result": "hello Lin"})]


async def test_in_a_durable_run_an_sdk_decline_is_kept_as_a_decline_and_a_stray_model_is_refused(
    kernel: FunctionKernel,
) -> None:
    import mcp_types
    from pydantic import BaseModel

    from kavalai.durable import MemoryRunner

    class Stray(BaseModel):
        name: str = "Mallory"

    answers: list[Any] = [mcp_types.ElicitResult(action="decline"), Stray()]

    async def user(request: McpElicitation) -> Any:
        return answers.pop(0)

    runner = MemoryRunner()
    for run_id in ("declined", "stray"):
        llm = ScriptedLLM([tool_call("mcp://feat.greet", {}), "Done."])
        agent = Agent(llm, kernel=kernel, durable=runner, on_elicitation=user, durable_name=run_id)
        runner.register(agent)
        result = await agent.run("Greet whoever is there.", run_id=run_id)
        [record] = result.tool_calls
        assert record.status == "error"  # neither answer is the name the tool needs
        assert "Mallory" not in str(record.result) + str(record.error)
    rows = list(runner.answer_log.rows.values())
    assert [answer for _question, _answered, answer in rows] == [{"action": "decline"}]  # the stray one: no row
