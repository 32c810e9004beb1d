"""The demo MCP server shipped in the package, and the demo's mcp:// section that runs it."""

from __future__ import annotations

import io
import subprocess
import sys

from tests.adapters.mcp.conftest import MARK_VAR

from kavalai import FunctionKernel
from kavalai.cli._console import DemoConsole
from kavalai.cli._demo_mcp import mcp_section
from kavalai.demo.mcp_server import demo_server_config


async def test_demo_section_runs_the_shipped_server(kernel: FunctionKernel) -> None:
    stream = io.StringIO()
    async with mcp_section(kernel, DemoConsole(stream)) as uris:
        assert uris == ["mcp://demo.slugify", "mcp://demo.text_stats", "mcp://demo.to_fahrenheit"]
        assert kernel.get_mcp_server_state("demo").status == "connected"  # usable by later sections
    assert kernel.get_mcp_server_state("demo").status == "closed"
    assert kernel.list_tools("mcp://*") == []
    text = stream.getvalue()
    assert "server 'demo': connected over stdio, 3 tools" in text
    assert "mcp://demo.text_stats(text): Count the words" in text
    assert '"longest_word":"dependable"' in text
    assert '{"result":"typed-tools-make-agents-dependable"}' in text
    assert '{"result":70.7}' in text
    assert "caught ToolExecutionError: Tool mcp://demo.to_fahrenheit reported an error" in text
    assert "below absolute zero" in text


async def test_demo_server_config_marks_and_runs(kernel: FunctionKernel, mark: str) -> None:
    config = demo_server_config("notes")
    assert config.args == ["-m", "kavalai.demo.mcp_server"]
    kernel.register_mcp_server(config.model_copy(update={"env": {**config.env, MARK_VAR: mark}}))
    result = await kernel.call_tool("mcp://notes.slugify", {"text": "Hello, MCP World", "separator": "_"})
    assert result.model_dump() == {"result": "hello_mcp_world"}


def test_import_kavalai_does_not_import_mcp() -> None:
    code = "import sys, kavalai; from kavalai import McpServer; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
