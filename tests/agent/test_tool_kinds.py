"""One agent over python://, rest:// and mcp:// tools: a real REST server and a real MCP server process."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.servers.llm_common import FakeProvider
from tests.servers.llm_openai import completion, fake_openai
from tests.servers.llm_openai import tool_call as wire_call
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, McpServer, RestServer, pythontool
from kavalai.agent import Agent
from kavalai.cli._console import DemoConsole
from kavalai.cli._demo_agent import agent_section
from kavalai.llm.openai import OpenAIClient
from kavalai.testing import ScriptedLLM, tool_call

ROOT = Path(__file__).resolve().parents[2]


async def _square(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"square": body["n"] ** 2})


@pythontool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def rest_url() -> Iterator[str]:
    with serve(Starlette(routes=[Route("/square", _square, methods=["POST"])]), lifespan="off") as url:
        yield url


@pytest.fixture
def mixed_kernel(kernel: FunctionKernel, rest_url: str) -> FunctionKernel:
    kernel.register_python_tool("math.add", add)
    kernel.register_rest_server(RestServer(name="calc", url=rest_url))
    kernel.register_rest_tool(
        "calc",
        "square",
        "POST",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        {"type": "object", "properties": {"square": {"type": "integer"}}, "required": ["square"]},
        "Square a number.",
    )
    server = McpServer(name="tools", command=sys.executable, args=["-m", "tests.servers.mcp_tools"], cwd=ROOT)
    kernel.register_mcp_server(server)
    return kernel


async def test_one_step_over_every_tool_kind(mixed_kernel: FunctionKernel) -> None:
    step = [
        tool_call("python://math.add", {"a": 1, "b": 2}),
        tool_call("rest://calc.square", {"n": 7}),
        tool_call("mcp://tools.echo", {"text": "hi"}),
        tool_call("mcp://tools.fail", {"reason": "no"}),
    ]
    llm = ScriptedLLM([step, "done"])
    result = await Agent(llm, kernel=mixed_kernel).run("use everything")
    assert [(r.uri, r.status, r.result) for r in result.tool_calls] == [
        ("python://math.add", "ok", {"result": 3}),
        ("rest://calc.square", "ok", {"square": 49}),
        ("mcp://tools.echo", "ok", {"result": "hi"}),
        ("mcp://tools.fail", "error", None),
    ]
    assert "refused: no" in (result.tool_calls[3].error or "")
    offered = llm.requests[0].tool_names
    assert {"python://math.add", "rest://calc.square", "mcp://tools.echo"} <= set(offered)


async def test_demo_section_uses_every_kind(mixed_kernel: FunctionKernel) -> None:
    buffer = io.StringIO()
    await agent_section(mixed_kernel, DemoConsole(buffer))
    text = buffer.getvalue()
    assert "the script calls 3 of them in one step" in text
    assert 'python://math.add -> {"result": 4}' in text
    assert 'rest://calc.square -> {"square": 4}' in text
    assert 'mcp://tools.add -> {"result": 4}' in text
    assert "3 tool calls" in text


@pytest.fixture
def openai_fake() -> Iterator[tuple[FakeProvider, str]]:
    provider = fake_openai()
    with serve(provider.app(), lifespan="off") as url:
        yield provider, f"{url}/v1"


async def test_mcp_and_rest_tools_over_the_openai_wire(
    mixed_kernel: FunctionKernel, openai_fake: tuple[FakeProvider, str]
) -> None:
    provider, base_url = openai_fake
    provider.reply_json(
        completion(
            tool_calls=[
                wire_call("c1", "mcp_tools_weather", {"city": "Oslo"}),
                wire_call("c2", "rest_calc_square", {"n": 3}),
            ]
        )
    )
    provider.reply_json(completion("Oslo is sunny; 3 squared is 9."))
    client = OpenAIClient("gpt-fake", api_key="sk-test", base_url=base_url, max_retries=0, timeout=10)
    try:
        agent = Agent(
            client, kernel=mixed_kernel, allowed_tools=["mcp://tools.weather", "mcp://tools.describe", "rest://*"]
        )
        result = await agent.run("Weather in Oslo, and 3 squared?")
    finally:
        await client.aclose()
    assert result.output == "Oslo is sunny; 3 squared is 9."
    weather, square = result.tool_calls
    assert weather.result is not None
    assert weather.result["city"] == "Oslo"
    assert square.result == {"square": 9}
    tools = {tool["function"]["name"]: tool["function"] for tool in provider.bodies[0]["tools"]}
    assert set(tools) == {"mcp_tools_weather", "mcp_tools_describe", "rest_calc_square"}
    assert tools["rest_calc_square"]["strict"] is True
    assert "strict" not in tools["mcp_tools_describe"]  # optional arguments
    assert tools["mcp_tools_describe"]["parameters"]["required"] == ["name"]
    results = [m for m in provider.bodies[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["c1", "c2"]
    assert results[1]["content"] == '{"square":9}'
