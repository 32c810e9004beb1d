"""Kaval.AI 1.0 kernel code runs unchanged: its module paths, private call methods, output casting and metadata
stripping (kavalai.compat)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel, FunctionKernelException, ToolNotFoundError, ToolOutputError, pythontool


class SimpleModel(BaseModel):
    name: str
    value: int


class OneField(BaseModel):
    val: int


@pythontool
def times_ten(val: int) -> int:
    return val * 10


@pythontool
def as_dict(name: str) -> dict[str, Any]:
    return {"name": name, "value": 42}


@pythontool
def model_tool() -> SimpleModel:
    return SimpleModel(name="m", value=1)


@pythontool
def add(a: int, b: int) -> int:
    return a + b


def test_kaval_module_paths_import() -> None:
    from kavalai.functionkernel import FunctionKernel as Fk
    from kavalai.functionkernel import FunctionKernelException as Fke
    from kavalai.functionkernel import ToolDefinition
    from kavalai.functionkernel import pythontool as pt
    from kavalai.utils import to_plain
    from kavalai.workflow.models import McpServer, RestServer, WorkflowException

    assert Fk is FunctionKernel
    assert Fke is FunctionKernelException
    assert pt is pythontool
    assert ToolDefinition.__name__ == "ToolDefinition"
    assert WorkflowException is FunctionKernelException
    assert RestServer.__name__ == "RestServer"
    assert McpServer.__name__ == "McpServer"
    assert to_plain({"a": {"__line__": 3, "b": [{"__file__": "x", "c": 1}]}, "__line__": 1}) == {"a": {"b": [{"c": 1}]}}


async def test_call_python_tool_casts_outputs_by_kaval_rules() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("ten", times_ten)
    kernel.register_python_tool("d", as_dict)
    kernel.register_python_tool("m", model_tool)
    assert (await kernel._call_python_tool("ten", {"val": 5})).result == 50
    assert await kernel._call_python_tool("ten", {"val": 5}, output_type=OneField) == OneField(val=50)
    assert await kernel._call_python_tool("d", {"name": "x"}, output_type=SimpleModel) == SimpleModel(
        name="x", value=42
    )

    class Other(BaseModel):
        name: str
        value: int
        extra: str = "e"

    assert await kernel._call_python_tool("m", {}, output_type=Other) == Other(name="m", value=1)
    with pytest.raises(ToolOutputError, match="python://ten returned a result that does not match SimpleModel"):
        await kernel._call_python_tool("ten", {"val": 5}, output_type=SimpleModel)
    with pytest.raises(ToolNotFoundError, match="Python tool 'nope' is not registered"):
        await kernel._call_python_tool("nope", {})
    assert kernel.python_tool_definitions["m"].output_model is SimpleModel


async def test_unknown_servers_and_duplicates_use_kaval_wording() -> None:
    from kavalai import McpServer, RestServer

    kernel = FunctionKernel()
    with pytest.raises(ToolNotFoundError, match="REST server 'missing' not registered"):
        await kernel._call_rest_tool("missing", "any", {})
    with pytest.raises(ToolNotFoundError, match="MCP server 'missing' not registered"):
        await kernel._call_mcp_tool("missing", "any", {})
    with pytest.raises(FunctionKernelException, match="REST tool 'get_item' on server 'ghost'"):
        kernel.get_tool_definition("rest://ghost.get_item")
    kernel.register_rest_server(RestServer(name="test", url="http://127.0.0.1:9"))
    with pytest.raises(FunctionKernelException, match="REST server 'test' is already registered"):
        kernel.register_rest_server(RestServer(name="test", url="http://127.0.0.1:9"))
    kernel.register_mcp_server(McpServer(name="mcp", command="true"))
    with pytest.raises(FunctionKernelException, match="MCP server 'mcp' is already registered"):
        kernel.register_mcp_server(McpServer(name="mcp", command="true"))
    kernel.register_python_tool("add", add)
    with pytest.raises(FunctionKernelException, match="Python tool 'add' is already registered"):
        kernel.register_python_tool("add", add)
    assert kernel.rest_tool_definitions == {}
    assert kernel.mcp_tool_definitions == {}
    await kernel.close()


async def test_metadata_keys_are_dropped_but_a_misspelt_argument_stays_an_error() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("add", add)
    result = await kernel.call_tool("python://add", {"a": 1, "b": 2, "__line__": 9, "__file_path__": "x.yaml"})
    assert result.result == 3  # type: ignore[attr-defined]
    with pytest.raises(FunctionKernelException, match="bb: unexpected argument"):
        await kernel.call_tool("python://add", {"a": 1, "bb": 2, "__line__": 9})


def test_is_tool_allowed_as_kaval_decided_it() -> None:
    from kavalai.functionkernel import _is_tool_allowed

    assert _is_tool_allowed("python://math.add", None) is True
    assert _is_tool_allowed("python://math.add", ["python://math.add"]) is True
    assert _is_tool_allowed("rest://api.get_item [GET]", ["rest://api.*"]) is True
    assert _is_tool_allowed("rest://api.get_item", ["rest://other.*"]) is False
