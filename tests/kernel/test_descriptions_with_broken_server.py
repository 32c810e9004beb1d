"""One unreachable server does not hide the other tools from get_tool_descriptions."""

from __future__ import annotations

import logging
import sys

import pytest

from kavalai import FunctionKernel, McpServer, ServerConnectionError, ToolNotFoundError, pythontool


@pythontool
def ping() -> str:
    """Answer pong."""
    return "pong"


def _broken_server() -> McpServer:
    # A real process that dies at once with a message on stderr.
    code = "import sys; sys.stderr.write('cannot start: missing config\\n'); sys.exit(3)"
    return McpServer(name="broken", command=sys.executable, args=["-c", code], connect_timeout=20)


async def test_descriptions_skip_a_broken_server_and_log_why(
    kernel: FunctionKernel, caplog: pytest.LogCaptureFixture
) -> None:
    kernel.register_python_tool("ping", ping)
    kernel.register_mcp_server(_broken_server())
    with caplog.at_level(logging.WARNING, logger="kavalai"):
        descriptions = await kernel.get_tool_descriptions()
    assert [d["name"] for d in descriptions] == ["python://ping"]
    assert "broken" in caplog.text
    assert "cannot start: missing config" in caplog.text


async def test_explicit_connect_still_raises(kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(_broken_server())
    with pytest.raises(ServerConnectionError) as info:
        await kernel.connect_mcp_servers()
    assert info.value.server == "broken"
    assert info.value.exit_code == 3


async def test_an_exact_uri_of_the_broken_server_is_not_found(kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(_broken_server())
    with pytest.raises(ToolNotFoundError, match="mcp://broken.tool"):
        await kernel.get_tool_descriptions(["mcp://broken.tool"])
