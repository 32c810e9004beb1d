"""MCP prompts as an agent's templates, against real MCP servers (kavalai's demo server and the features server)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kavalai import FunctionKernel, JsonRpcError, McpServer
from kavalai.agent import Agent
from kavalai.agent.prompts import prompt_messages, split_prompt
from kavalai.demo.mcp_server import demo_server_config
from kavalai.llm.messages import AssistantMessage, UserMessage
from kavalai.testing import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def kernel() -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(demo_server_config("demo"))
    kernel.register_mcp_server(
        McpServer(name="feat", command=sys.executable, args=["-m", "tests.servers.mcp_features"], cwd=ROOT)
    )
    yield kernel
    await kernel.close()


async def test_a_prompt_starts_the_run(kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(["A short summary."])
    agent = Agent(llm, kernel=kernel)
    result = await agent.run_prompt("demo", "summarize", {"text": "Typed tools make agents dependable.", "words": "5"})
    assert result.output == "A short summary."
    [request] = llm.requests
    sent = [m for m in request.messages if isinstance(m, UserMessage)]
    assert sent[-1].content == "Summarize in at most 5 words:\n\nTyped tools make agents dependable."


async def test_history_goes_before_the_prompts_messages(kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(["ok"])
    earlier = [UserMessage(content="hello"), AssistantMessage(content="hi")]
    await Agent(llm, kernel=kernel).run_prompt("demo", "summarize", {"text": "x"}, history=earlier)
    contents = [m.content for m in llm.requests[0].messages if isinstance(m, UserMessage | AssistantMessage)]
    assert contents[:2] == ["hello", "hi"]
    assert contents[-1].startswith("Summarize in at most 20 words")


async def test_messages_keep_roles_and_name_what_is_not_text(kernel: FunctionKernel) -> None:
    review = await prompt_messages(kernel, "feat", "review", {"code": "x = 1"})
    assert [type(m) for m in review] == [UserMessage, AssistantMessage]
    assert review[0].content == "Review this python:\nx = 1"
    [picture] = await prompt_messages(kernel, "feat", "picture")
    assert picture.content == "[image (image/png), not shown]"


async def test_a_prompt_ending_with_the_assistant_is_refused_clearly(kernel: FunctionKernel) -> None:
    agent = Agent(ScriptedLLM(["never"]), kernel=kernel)
    with pytest.raises(ValueError, match=r"'review' of server 'feat' ends with a message of the assistant"):
        await agent.run_prompt("feat", "review", {"code": "x = 1"})
    history, prompt = split_prompt([UserMessage(content="a"), UserMessage(content="b")])
    assert (history, prompt) == ([UserMessage(content="a")], "b")


async def test_an_unknown_prompt_is_the_servers_error(kernel: FunctionKernel) -> None:
    with pytest.raises(JsonRpcError, match="'demo'.*prompts/get of 'nope'"):
        await Agent(ScriptedLLM(["never"]), kernel=kernel).run_prompt("demo", "nope")
