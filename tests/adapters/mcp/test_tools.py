"""Tools of a real stdio MCP server: discovery, schemas as sent, typed calls, output rules, errors."""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel
from tests.adapters.mcp.conftest import MARK_VAR, ROOT, live_processes_marked, wait_until
from tests.servers.mcp_paged import RICH_SCHEMA, TOOL_COUNT
from tests.servers.mcp_tools import PIXEL_PNG

from kavalai import FunctionKernel, JsonRpcError, McpServer, ToolExecutionError, ToolInputError, ToolNotFoundError
from kavalai.adapters.mcp import McpAudioContent, McpImageContent, McpResourceContent, McpResourceLink

# One kernel with both test servers for the whole module: these tests only call tools, and spawning a server
# per test would cost seconds each on a busy machine. The leak check runs when the module's kernel closes.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tools() -> AsyncIterator[FunctionKernel]:
    mark = uuid.uuid4().hex
    kernel = FunctionKernel()
    env = {MARK_VAR: mark}
    for name, module in (("tools", "tests.servers.mcp_tools"), ("paged", "tests.servers.mcp_paged")):
        kernel.register_mcp_server(McpServer(name=name, command=sys.executable, args=["-m", module], cwd=ROOT, env=env))
    await kernel.connect_mcp_servers()
    try:
        yield kernel
    finally:
        await kernel.close()
        assert live_processes_marked(mark) == []


async def test_discovery_publishes_every_tool(tools: FunctionKernel) -> None:
    assert "mcp://tools.add" in tools.list_tools("mcp://tools.*")
    state = tools.get_mcp_server_state("tools")
    assert state.status == "connected"
    assert state.pid is not None
    assert state.tools == tuple(tools.list_tools("mcp://tools.*"))
    definition = tools.get_tool_definition("mcp://tools.add")
    assert (definition.kind, definition.description) == ("mcp", "Add two integers.")
    origin = f"stdio:{shlex.join([sys.executable, '-m', 'tests.servers.mcp_tools'])} (in {ROOT})"  # its command line
    assert definition.metadata == {
        "server": "tools",
        "tool": "add",
        "transport": "stdio",
        "structured": True,
        "origin": origin,
    }


async def test_descriptions_show_the_input_schema_as_sent(tools: FunctionKernel) -> None:
    [described] = await tools.get_tool_descriptions(["mcp://tools.describe"])
    schema = described["inputSchema"]
    assert schema["title"] == "describeArguments"  # the server's own schema, not one rebuilt from our model
    assert schema["properties"]["name"]["description"] == "Who to describe."
    assert schema["properties"]["mood"] == {
        "default": "happy",
        "enum": ["happy", "sad"],
        "title": "Mood",
        "type": "string",
    }
    assert schema["required"] == ["name"]


async def test_arguments_are_coerced_and_results_typed(tools: FunctionKernel) -> None:
    result = await tools.call_tool("mcp://tools.add", {"a": 2, "b": "40"})
    assert result.model_dump() == {"result": 42}
    assert isinstance(result.result, int)  # type: ignore[attr-defined]


async def test_unset_optional_arguments_are_not_sent(tools: FunctionKernel) -> None:
    result = await tools.call_tool("mcp://tools.describe", {"name": "Ada"})
    assert result.result.endswith("sent=['name']")  # type: ignore[attr-defined]
    result = await tools.call_tool("mcp://tools.describe", {"name": "Ada", "age": "36", "tags": ["x"]})
    assert "age=36" in result.result  # type: ignore[attr-defined]
    assert result.result.endswith("sent=['age', 'name', 'tags']")  # type: ignore[attr-defined]


async def test_bad_arguments_fail_before_the_server_is_asked(tools: FunctionKernel) -> None:
    with pytest.raises(ToolInputError, match=r"mcp://tools.describe.*mood") as info:
        await tools.call_tool("mcp://tools.describe", {"name": "Ada", "mood": "angry"})
    assert info.value.uri == "mcp://tools.describe"
    with pytest.raises(ToolInputError, match="unexpected argument"):
        await tools.call_tool("mcp://tools.add", {"a": 1, "b": 2, "c": 3})


async def test_output_schema_gives_a_model(tools: FunctionKernel) -> None:
    definition = tools.get_tool_definition("mcp://tools.weather")
    assert definition.wrapped is False
    assert definition.get_output_schema()["title"] == "Weather"
    result = await tools.call_tool("mcp://tools.weather", {"city": "Oslo"})
    assert isinstance(result, definition.output_model)
    assert result.model_dump() == {"city": "Oslo", "celsius": 21.5, "conditions": ["sunny", "breezy"]}


async def test_text_is_kept_as_written_when_the_tool_has_no_output_schema(tools: FunctionKernel) -> None:
    result = await tools.call_tool("mcp://tools.numbers", {"count": 3})
    assert result.result == "[0, 1, 2]"  # type: ignore[attr-defined]  # no output schema: the text, unparsed


async def test_image_is_kept_as_typed_content(tools: FunctionKernel) -> None:
    result = await tools.call_tool("mcp://tools.pixel")
    image = result.result  # type: ignore[attr-defined]
    assert isinstance(image, McpImageContent)
    assert image.mime_type == "image/png"
    assert image.decode() == PIXEL_PNG
    assert result.model_dump(mode="json")["result"]["mimeType"] == "image/png"


async def test_is_error_raises_with_the_tools_own_text(tools: FunctionKernel) -> None:
    with pytest.raises(ToolExecutionError, match="refused: no way") as info:
        await tools.call_tool("mcp://tools.fail", {"reason": "no way"})
    assert info.value.uri == "mcp://tools.fail"
    assert "TextContent" not in str(info.value)


async def test_a_tools_error_text_cut_through_a_secret_shows_no_piece_of_it(tools: FunctionKernel) -> None:
    """Hostile round 10 (E3, found by the enumeration of cut texts): a server's error text was cut at 2,000
    characters, then masked when the error was made: a registered secret across the cut showed its beginning."""
    from kavalai.secrets import register_secret

    secret = "r10-mcp-error-Qm2Xr9Lp4Vt8Zw3Nb6"
    register_secret(secret)
    with pytest.raises(ToolExecutionError) as info:
        await tools.call_tool("mcp://tools.fail", {"reason": "x" * 1_950 + secret})
    assert "xxxxx" in str(info.value)
    assert secret[:6] not in str(info.value)


async def test_unknown_tool_names_the_server_and_its_tools(tools: FunctionKernel) -> None:
    with pytest.raises(ToolNotFoundError, match="offers: add, crash") as info:
        await tools.call_tool("mcp://tools.ad", {})
    assert "Did you mean 'mcp://tools.add'?" in str(info.value)
    with pytest.raises(ToolNotFoundError, match="No MCP server named 'other'"):
        await tools.call_tool("mcp://other.add", {})


async def test_list_changed_refreshes_the_tools(tools: FunctionKernel) -> None:
    assert not tools.has_tool("mcp://tools.extra")
    await tools.call_tool("mcp://tools.grow")
    # The refresh (one more tools/list round trip) runs in the background: wait for it, bounded.
    await wait_until(lambda: tools.has_tool("mcp://tools.extra"))
    definition = tools.get_tool_definition("mcp://tools.extra")
    assert definition.description == "Added at run time."
    assert (await tools.call_tool("mcp://tools.extra")).model_dump() == {"result": "extra!"}


async def test_paginated_listing_and_rich_schemas(tools: FunctionKernel) -> None:
    kernel = tools
    descriptions = {d["name"]: d for d in await kernel.get_tool_descriptions(["mcp://paged.*"])}
    assert len(descriptions) == TOOL_COUNT - 1  # every page was followed; the unnamable tool was skipped
    assert descriptions["mcp://paged.rich"]["inputSchema"] == RICH_SCHEMA

    model = kernel.get_input_model("mcp://paged.rich")
    schema = model.model_json_schema()
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert schema["properties"]["title"]["description"] == "The title."
    arguments: dict[str, Any] = {
        "title": "t",
        "limit": None,
        "target": {"host": "h"},
        "tree": {"label": "root", "children": [{"label": "leaf", "children": []}]},
    }
    result = await kernel.call_tool("mcp://paged.rich", arguments)
    assert result.result == {"received": arguments}  # type: ignore[attr-defined]
    with pytest.raises(ToolInputError, match="tree.children.0.label"):
        await kernel.call_tool("mcp://paged.rich", {"title": "t", "tree": {"label": "r", "children": [{}]}})
    with pytest.raises(ToolInputError, match="version"):
        await kernel.call_tool("mcp://paged.rich", {"title": "t", "version": 3})


async def test_every_content_kind_is_kept(tools: FunctionKernel) -> None:
    result = await tools.call_tool("mcp://paged.media")
    text, parsed, audio, resource, link = result.result  # type: ignore[attr-defined]
    assert (text, parsed) == ("plain words", '{"n": 1}')  # text stays text without an output schema
    assert audio == McpAudioContent(data="UklGRg==", mime_type="audio/wav")
    assert resource == McpResourceContent(uri="file:///notes.txt", mime_type="text/plain", text="hi")
    assert link == McpResourceLink(uri="file:///big.bin", name="big")
    assert isinstance(result, BaseModel)


async def test_json_rpc_error_is_an_execution_error(tools: FunctionKernel) -> None:
    with pytest.raises(ToolExecutionError, match="answered error -32602: tool0 is out of order") as info:
        await tools.call_tool("mcp://paged.tool0")
    assert info.value.uri == "mcp://paged.tool0"
    assert isinstance(info.value, JsonRpcError)  # the JSON-RPC error's fields survive, not only its text
    assert (info.value.code, info.value.data) == (-32602, {"retry_after": 3})
    assert "(the server refused the arguments)" in str(info.value)


async def test_a_large_result_arrives_whole(tools: FunctionKernel) -> None:
    text = "0123456789abcdef\n" * 300_000  # ~5 MB: many pipe reads make up one message
    result = await tools.call_tool("mcp://tools.echo", {"text": text})
    assert result.result == text  # type: ignore[attr-defined]


async def test_a_removed_mcp_tool_is_neither_listed_nor_callable(tools: FunctionKernel) -> None:
    await tools.connect_mcp_servers()
    assert tools.has_tool("mcp://tools.echo")
    assert tools.remove_tool("mcp://tools.echo") is True
    assert "mcp://tools.echo" not in tools.list_tools()
    assert "mcp://tools.echo" not in [d["name"] for d in await tools.describe_tools()]
    with pytest.raises(ToolNotFoundError):
        await tools.call_tool("mcp://tools.echo", {"text": "still there?"})
