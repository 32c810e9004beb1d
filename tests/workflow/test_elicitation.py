"""An MCP server asking the user for input during a workflow's function node (``McpServer(elicitation="caller")``),
against the real features server in both protocol eras: ``run(on_elicitation=...)`` answers, and ``stream()``
hands the consumer an event it answers."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, McpServer
from kavalai.adapters.mcp import McpElicitation
from kavalai.workflow import InputRequested, RunFinished, WorkflowBuilder, WorkflowEngine

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = (
    WorkflowBuilder("greeting")
    .start(next="greet")
    .function("greet", tool="mcp://feat.greet", inputs={}, next="done")
    .end("done", outputs={"greeting": "greet.result"})
    .build()
)


@pytest.fixture(params=["2026-07-28", "legacy"])
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[WorkflowEngine]:
    kernel = FunctionKernel()
    args = ["-m", "tests.servers.mcp_features"]
    server = McpServer(name="feat", command=sys.executable, args=args, cwd=ROOT, elicitation="caller")
    kernel.register_mcp_server(server.model_copy(update={"protocol": request.param}))
    async with WorkflowEngine(WORKFLOW, kernel) as engine:
        yield engine
    await kernel.close()


async def test_run_answers_with_its_handler(engine: WorkflowEngine) -> None:
    asked: list[McpElicitation] = []

    async def user(request: McpElicitation) -> dict[str, Any]:
        asked.append(request)
        return {"name": "Ada"}

    result = await engine.run({}, on_elicitation=user)
    assert result.ok, result.error
    assert result.output == {"greeting": "hello Ada"}
    assert [a.message for a in asked] == ["Who are you?"]


async def test_without_a_handler_the_node_fails_saying_why(engine: WorkflowEngine) -> None:
    result = await engine.run({})
    assert not result.ok
    assert result.failed_node == "greet"
    assert "no answerer" in str(result.error)


async def test_stream_hands_the_request_to_its_consumer(engine: WorkflowEngine) -> None:
    seen: list[str] = []
    outputs: list[Any] = []
    async for event in engine.stream({}):
        if isinstance(event, InputRequested):
            seen.append(event.request.message)
            event.answer({"name": "Grace"})
        elif isinstance(event, RunFinished):
            outputs.append(event.result.output)
    assert seen == ["Who are you?"]
    assert outputs == [{"greeting": "hello Grace"}]
