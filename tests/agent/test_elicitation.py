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
