"""Resources, resource templates, prompts and completion of a real MCP server, through the kernel."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import anyio
import pytest
from tests.adapters.mcp.conftest import StdioFactory
from tests.servers.mcp_tools import PIXEL_PNG

from kavalai import FunctionKernel
from kavalai.adapters.mcp import (
    McpImageContent,
    McpPrompt,
    McpResourceTemplate,
    McpTextContent,
)
from kavalai.errors import JsonRpcError, ToolNotFoundError


@pytest.fixture
async def kernel(stdio_server: StdioFactory) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("feat", module="tests.servers.mcp_features"))
    kernel.register_mcp_server(stdio_server("tools"))  # offers tools only
    yield kernel
    await kernel.close()


async def test_resources_are_listed_and_read_typed(kernel: FunctionKernel) -> None:
    resources = {r.name: r for r in await kernel.list_resources("feat")}  # connects the server on demand
    assert set(resources) == {"readme", "pixel"}
    assert resources["readme"].uri == "notes://readme"
    assert resources["readme"].mime_type == "text/plain"
    assert resources["readme"].description == "The readme."
    [text] = await kernel.read_resource("feat", "notes://readme")
    assert text.text == "1.10 is a version, not a number"  # text stays text
    [image] = await kernel.read_resource("feat", "notes://pixel")
    assert image.text is None
    assert image.decode() == PIXEL_PNG  # binary kept, byte for byte
    assert image.mime_type == "image/png"


async def test_templates_are_listed_read_and_completed(kernel: FunctionKernel) -> None:
    [template] = await kernel.list_resource_templates("feat")
    assert isinstance(template, McpResourceTemplate)
    assert template.uri_template == "weather://{city}/today"
    [content] = await kernel.read_resource("feat", "weather://Oslo/today")
    assert content.text == "sunny in Oslo"
    completion = await kernel.complete("feat", template, "city", "ber")
    assert completion.values == ("Berlin", "Bern", "Bergen")
    assert (await kernel.complete("feat", "weather://{city}/today", "city", "P")).values == ("Paris",)


async def test_prompts_are_listed_rendered_and_completed(kernel: FunctionKernel) -> None:
    prompts = {p.name: p for p in await kernel.list_prompts("feat")}
    review = prompts["review"]
    assert isinstance(review, McpPrompt)
    assert [(a.name, a.required) for a in review.arguments] == [("code", True), ("language", False)]
    rendered = await kernel.get_prompt("feat", "review", {"code": "x = 1", "language": "python"})
    assert [m.role for m in rendered.messages] == ["user", "assistant"]
    first = rendered.messages[0].content
    assert isinstance(first, McpTextContent)
    assert first.text == "Review this python:\nx = 1"
    picture = await kernel.get_prompt("feat", "picture")
    image = picture.messages[0].content
    assert isinstance(image, McpImageContent)
    assert image.decode() == PIXEL_PNG
    completion = await kernel.complete("feat", review, "language", "p")
    assert completion.values == ("python", "perl", "php")
    assert completion.has_more is False


async def test_errors_name_the_server_and_what_failed(kernel: FunctionKernel) -> None:
    with pytest.raises(ToolNotFoundError, match="No MCP server named 'nope' is registered"):
        await kernel.list_resources("nope")
    with pytest.raises(JsonRpcError, match="MCP server 'feat': prompts/get of 'missing' failed") as caught:
        await kernel.get_prompt("feat", "missing")
    assert caught.value.code is not None
    with pytest.raises(JsonRpcError, match="MCP server 'feat': resources/read of 'notes://none' failed"):
        await kernel.read_resource("feat", "notes://none")
    # A server that offers tools only.
    assert await kernel.list_resources("tools") == []  # an MCPServer without resources lists none
    with pytest.raises(JsonRpcError, match="prompts/get of 'x' failed"):
        await kernel.get_prompt("tools", "x")
    # The kernel still calls tools on the same connection.
    assert (await kernel.call_tool("mcp://tools.add", {"a": 1, "b": 2})).model_dump() == {"result": 3}


async def test_progress_reaches_the_callers_callback(kernel: FunctionKernel) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await kernel.call_tool("mcp://feat.count", {"n": 3}, progress=on_progress)
    assert result.model_dump() == {"result": 3}
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    # A sync callback works too, and a call without one asks for no progress.
    synced: list[float] = []
    await kernel.call_tool("mcp://feat.count", {"n": 2}, progress=lambda p, t, m: synced.append(p))
    assert synced == [1, 2]
    assert (await kernel.call_tool("mcp://feat.count", {"n": 2})).model_dump() == {"result": 2}


async def test_server_logs_reach_python_logging_with_secrets_masked(
    stdio_server: StdioFactory, caplog: pytest.LogCaptureFixture
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("feat", module="tests.servers.mcp_features", env={"TOKEN": "s3cr3t-token"}))
    with caplog.at_level(logging.DEBUG, logger="kavalai.mcp.feat"):
        await kernel.call_tool("mcp://feat.count", {"n": 1})
    await kernel.close()
    [record] = [r for r in caplog.records if r.name == "kavalai.mcp.feat"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "[counter] counting started token=***"


async def test_a_changed_tool_list_is_relisted_and_reaches_on_change(stdio_server: StdioFactory) -> None:
    from kavalai.adapters.mcp import McpChange

    changes: list[McpChange] = []

    async def on_change(change: McpChange) -> None:
        changes.append(change)

    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server(on_change=on_change))
    try:
        await kernel.connect()
        assert "mcp://tools.extra" not in kernel.list_tools()
        await kernel.call_tool("mcp://tools.grow")
        with anyio.fail_after(10):
            while "mcp://tools.extra" not in kernel.list_tools():  # noqa: ASYNC110 - refreshed by the notification
                await anyio.sleep(0.02)
        assert changes == [McpChange(server="tools", kind="tools")]
    finally:
        await kernel.close()


async def test_an_agent_reads_resources_through_read_resource(kernel: FunctionKernel) -> None:
    from kavalai.agent import Agent
    from kavalai.llm import ToolResultMessage
    from kavalai.testing import ScriptedLLM, tool_call

    llm = ScriptedLLM(
        [
            tool_call("read_resource", {"server": "feat", "uri": "notes://readme"}),
            tool_call("read_resource", {"server": "tools", "uri": "notes://readme"}),
            "done",
        ]
    )
    await Agent(llm, kernel=kernel, resources=["feat"], allowed_tools=["mcp://feat.*"]).run("read the readme")
    [spec] = [tool for tool in llm.requests[0].tools if tool.name == "read_resource"]
    assert "notes://readme: The readme." in spec.description
    assert "weather://{city}/today (a template" in spec.description
    first, second = [m for m in llm.requests[2].messages if isinstance(m, ToolResultMessage)]
    assert json.loads(first.content)["contents"][0]["text"] == "1.10 is a version, not a number"
    assert second.is_error
    assert "read_resource reads the resources of: feat" in second.content
