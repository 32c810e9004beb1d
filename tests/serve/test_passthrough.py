"""``kavalai serve`` passing an MCP server's tool results through unchanged (every kind of content block, with
``structuredContent`` beside them), and serving tools under their own names.

The backend is a real stdio MCP server (``tests/servers/mcp_content.py``); the host is the official SDK's client
(in process) and FastMCP's client.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from tests.serve.test_serve import TOKEN, TOKEN_VAR, http_server, serve_command
from tests.servers.mcp_content import PIXEL, WAV

from kavalai import FunctionKernel, McpServer, pythontool
from kavalai.errors import ConfigurationError
from kavalai.serve import ExposedTools, build_mcp_server

ROOT = Path(__file__).resolve().parents[2]


def _backend(name: str = "content") -> McpServer:
    return McpServer(name=name, command=sys.executable, args=["-m", "tests.servers.mcp_content"], cwd=ROOT, timeout=60)


@pythontool
def picture() -> str:
    """A Python tool that shares its name with the backend's picture tool."""
    return "not a picture"


@pytest.fixture
async def kernel() -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend())
    await kernel.connect()
    yield kernel
    await kernel.close()


async def _call(kernel: FunctionKernel, name: str, **options: Any) -> types.CallToolResult:
    async with Client(build_mcp_server(kernel, **options)) as client:
        return await client.call_tool(name, {})


async def test_an_image_passes_through_with_its_annotations(kernel: FunctionKernel) -> None:
    result = await _call(kernel, "mcp_content_picture")
    [item] = result.content
    assert isinstance(item, types.ImageContent)
    assert (item.data, item.mime_type) == (PIXEL, "image/png")
    assert item.annotations is not None
    assert item.annotations.audience == ["user"]
    assert result.structured_content is None
    assert result.is_error is False


async def test_audio_an_embedded_resource_and_a_link_pass_through(kernel: FunctionKernel) -> None:
    [sound] = (await _call(kernel, "mcp_content_sound")).content
    assert isinstance(sound, types.AudioContent)
    assert sound.data == WAV
    assert sound.mime_type == "audio/wav"
    [document] = (await _call(kernel, "mcp_content_document")).content
    assert isinstance(document, types.EmbeddedResource)
    assert isinstance(document.resource, types.TextResourceContents)
    assert (str(document.resource.uri), document.resource.text) == ("test://embedded", "an embedded text")
    [pointer] = (await _call(kernel, "mcp_content_pointer")).content
    assert isinstance(pointer, types.ResourceLink)
    assert (str(pointer.uri), pointer.name, pointer.description) == ("test://linked", "linked", "a linked resource")


async def test_mixed_content_keeps_its_order_and_json_text_stays_text(kernel: FunctionKernel) -> None:
    result = await _call(kernel, "mcp_content_mixed")
    assert [item.type for item in result.content] == ["text", "image", "audio", "resource", "resource_link"]
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert text.text == '{"looks": "like JSON"}'
    assert text.meta == {"example.com/mark": 1}
    assert result.structured_content is None


async def test_structured_content_comes_beside_the_content(kernel: FunctionKernel) -> None:
    result = await _call(kernel, "mcp_content_both")
    assert result.structured_content == {"count": 2, "kind": "png"}
    assert [item.type for item in result.content] == ["text", "image"]


async def test_an_error_result_passes_through_with_its_content(kernel: FunctionKernel) -> None:
    result = await _call(kernel, "mcp_content_broken")
    assert result.is_error is True
    assert [item.type for item in result.content] == ["text", "image"]


async def test_the_served_schema_says_what_is_sent(kernel: FunctionKernel) -> None:
    async with Client(build_mcp_server(kernel)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    # A backend tool without an outputSchema is served without one (its results are its content blocks); one
    # with an outputSchema is served with that schema, and its structuredContent is what the server sent.
    assert listed["mcp_content_picture"].output_schema is None
    assert listed["mcp_content_both"].output_schema is None
    stats = listed["mcp_content_stats"].output_schema
    assert stats is not None
    assert set(stats["properties"]) == {"words", "lines"}
    async with Client(build_mcp_server(kernel)) as client:
        result = await client.call_tool("mcp_content_stats", {"text": "two words"})
    assert result.structured_content == {"words": 2, "lines": 1}


async def test_python_tools_still_answer_with_their_output_model(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("draw.picture", picture)
    result = await _call(kernel, "python_draw_picture")
    assert result.structured_content == {"result": "not a picture"}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A configuration serving the content backend."""
    args = ["-m", "tests.servers.mcp_content"]
    document = {"mcp_servers": [{"name": "content", "command": sys.executable, "args": args, "cwd": str(ROOT)}]}
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


async def test_fastmcp_client_reads_the_passed_through_blocks_over_stdio_and_http(config: Path) -> None:
    import fastmcp  # a dev dependency
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

    command = serve_command(config, "--names", "own")
    stdio = StdioTransport(command[0], command[1:], cwd=str(config.parent), keep_alive=False)  # ends with the client
    async with fastmcp.Client(stdio) as client:
        await _check_with_fastmcp(client)
    async with (
        http_server(config, "--names", "own", "--bearer-token-env", TOKEN_VAR) as (url, _),
        fastmcp.Client(StreamableHttpTransport(url, auth=TOKEN)) as client,
    ):
        await _check_with_fastmcp(client)


async def _check_with_fastmcp(client: Any) -> None:
    result = await client.call_tool("mixed", {})
    assert [item.type for item in result.content] == ["text", "image", "audio", "resource", "resource_link"]
    both = await client.call_tool("both", {})
    assert both.structured_content == {"count": 2, "kind": "png"}
    stats = await client.call_tool("stats", {"text": "a b c"})
    assert stats.data.words == 3


async def test_own_names_serve_a_backends_tools_as_it_names_them(kernel: FunctionKernel) -> None:
    async with Client(build_mcp_server(kernel, names="own")) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"picture", "sound", "document", "pointer", "mixed", "both", "stats", "broken"} <= names
        [item] = (await client.call_tool("picture", {})).content
        assert isinstance(item, types.ImageContent)
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("mcp_content_picture", {})


async def test_own_names_that_collide_are_refused_naming_both(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("picture", picture)
    with pytest.raises(
        ConfigurationError,
        match=r"mcp://content\.picture and python://picture|python://picture and mcp://content\.picture",
    ):
        ExposedTools(kernel, names="own").names()
    async with Client(build_mcp_server(kernel, names="own")) as client:
        with pytest.raises(MCPError, match="would both be served as 'picture'"):
            await client.list_tools()
    # Prefixed names stay collision-free whatever is served.
    assert {"python_picture", "mcp_content_picture"} <= set(ExposedTools(kernel).names())


def test_an_unknown_naming_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="names must be one of prefixed, own"):
        ExposedTools(FunctionKernel(), names="short")  # type: ignore[arg-type]


async def test_kavalai_serve_refuses_own_names_that_collide_at_start(tmp_path: Path) -> None:
    args = ["-m", "tests.servers.mcp_content"]
    servers = [{"name": name, "command": sys.executable, "args": args, "cwd": str(ROOT)} for name in ("a", "b")]
    config = tmp_path / "tools.yaml"
    config.write_text(json.dumps({"mcp_servers": servers}), encoding="utf-8")
    with anyio.fail_after(120):
        run = await anyio.run_process(serve_command(config, "--names", "own"), check=False)
    assert run.returncode == 1
    stderr = run.stderr.decode()
    assert "the tools mcp://a.both and mcp://b.both would both be served as 'both'" in stderr
    assert "Traceback" not in stderr
