"""What a tool schema that does not say about undeclared properties (no ``additionalProperties``) means: arguments
are closed, outputs open, by default; ``McpServer(extra_arguments=..., extra_output=...)`` changes either, per
server. Against a real (hand-written) server that reports the argument names it received."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, McpServer, ToolInputError, ToolOutputError

SERVER = Path(__file__).resolve().parents[2] / "servers" / "mcp_open_schemas.py"


def _server(**options: Any) -> McpServer:
    return McpServer(name="open", command=sys.executable, args=[str(SERVER)], **options)


async def test_by_default_arguments_are_closed_and_outputs_open(kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(_server())
    await kernel.connect_mcp_servers()
    definition = kernel.get_tool_definition("mcp://open.echo")
    assert definition.input_model.model_json_schema()["additionalProperties"] is False
    with pytest.raises(ToolInputError, match="mood"):
        await kernel.call_tool("mcp://open.echo", {"text": "hi", "mood": "happy"})
    result = await kernel.call_tool("mcp://open.echo", {"text": "hi"})
    assert result.model_dump() == {"text": "hi", "names": ["text"]}  # the undeclared output field is kept


async def test_extra_arguments_allow_sends_them_on(kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(_server(extra_arguments="allow"))
    await kernel.connect_mcp_servers()
    definition = kernel.get_tool_definition("mcp://open.echo")
    assert definition.input_model.model_json_schema()["additionalProperties"] is True
    result = await kernel.call_tool("mcp://open.echo", {"text": "hi", "mood": "happy"})
    assert result.model_dump()["names"] == ["mood", "text"]  # the server received it
    with pytest.raises(ToolInputError, match="text"):
        await kernel.call_tool("mcp://open.echo", {"mood": "happy"})  # declared ones are still checked


async def test_extra_output_ignore_drops_and_forbid_refuses_undeclared_fields(kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(_server(extra_output="ignore").model_copy(update={"name": "ign"}))
    kernel.register_mcp_server(_server(extra_output="forbid"))
    assert (await kernel.call_tool("mcp://ign.echo", {"text": "hi"})).model_dump() == {"text": "hi"}
    with pytest.raises(ToolOutputError, match="names"):
        await kernel.call_tool("mcp://open.echo", {"text": "hi"})
