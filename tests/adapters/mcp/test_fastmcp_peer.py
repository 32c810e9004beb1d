"""The kernel as a client of a FastMCP server (the other widely used server library), over stdio and streamable
HTTP, in both protocol eras: typed tools, progress, errors, resources, templates and prompts."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tests.servers.fastmcp_server import build
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, McpServer, ToolExecutionError

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serve(build().http_app()) as url:
        yield f"{url}/mcp"


@pytest.fixture(
    params=[
        ("stdio", "2026-07-28"),
        ("stdio", "legacy"),
        ("streamable-http", "2026-07-28"),
        ("streamable-http", "legacy"),
    ],
    ids=lambda p: "-".join(p),
)
async def kernel(request: pytest.FixtureRequest, http_url: str) -> AsyncIterator[FunctionKernel]:
    transport, protocol = request.param
    kernel = FunctionKernel()
    if transport == "stdio":
        args = ["-m", "tests.servers.fastmcp_server"]
        server = McpServer(name="fast", command=sys.executable, args=args, cwd=ROOT, protocol=protocol)
    else:
        server = McpServer(name="fast", url=http_url, protocol=protocol)
    kernel.register_mcp_server(server)
    await kernel.connect_mcp_servers()
    expected = "2025-11-25" if protocol == "legacy" else protocol
    assert kernel.get_mcp_server_state("fast").protocol_version == expected
    yield kernel
    await kernel.close()


async def test_tools_are_typed_and_called(kernel: FunctionKernel) -> None:
    result = await kernel.call_tool("mcp://fast.text_stats", {"text": "to be or not to be"})
    assert result.model_dump() == {"words": 6, "longest": "not"}
    schema = kernel.get_tool_definition("mcp://fast.text_stats").describe()["outputSchema"]
    assert set(schema["properties"]) == {"words", "longest"}
    seen: list[float] = []
    steps = await kernel.call_tool("mcp://fast.steps", {"n": 3}, progress=lambda p, t, m: seen.append(p))
    assert steps.model_dump() == {"result": 3}
    assert seen == [1, 2, 3]
    with pytest.raises(ToolExecutionError, match="refused: no"):
        await kernel.call_tool("mcp://fast.refuse", {"reason": "no"})


async def test_values_fastmcp_wraps_are_unwrapped(kernel: FunctionKernel) -> None:
    # FastMCP sends a plain value as {"result": value} under an output schema marked "x-fastmcp-wrap-result":
    # the kernel takes the value, as for a tool of its own returning one (wrapped, read at .result).
    definition = kernel.get_tool_definition("mcp://fast.word_count")
    assert definition.wrapped is True
    assert definition.output_schema is not None
    assert definition.output_schema["x-fastmcp-wrap-result"] is True
    counted = await kernel.call_tool("mcp://fast.word_count", {"text": "two words"})
    assert counted.model_dump() == {"result": 2}
    assert type(counted.result) is int
    each = await kernel.call_tool("mcp://fast.each_stats", {"texts": ["a bb", "ccc"]})
    assert kernel.get_tool_definition("mcp://fast.each_stats").wrapped is True
    expected = [{"words": 2, "longest": "bb"}, {"words": 1, "longest": "ccc"}]
    assert [stats.model_dump() for stats in each.result] == expected
    assert await kernel.call_tool("mcp://fast.word_count", {"text": "one two three"}, output_type=int) == 3


async def test_resources_templates_and_prompts(kernel: FunctionKernel) -> None:
    assert [r.uri for r in await kernel.list_resources("fast")] == ["fast://motd"]
    [motd] = await kernel.read_resource("fast", "fast://motd")
    assert motd.text == "1.10 stays a string"
    [template] = await kernel.list_resource_templates("fast")
    assert template.uri_template == "fast://greeting/{name}"
    [greeting] = await kernel.read_resource("fast", "fast://greeting/Ada")
    assert greeting.text == "hello Ada"
    [prompt] = await kernel.list_prompts("fast")
    assert [a.name for a in prompt.arguments] == ["topic"]
    rendered = await kernel.get_prompt("fast", "haiku", {"topic": "rain"})
    assert rendered.messages[0].content.text == "Write a haiku about rain."  # type: ignore[union-attr]
