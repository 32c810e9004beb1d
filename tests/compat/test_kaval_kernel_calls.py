"""Kaval.AI 1.0.7's kernel tests (``test_functionkernel.py``) as behaviours of ours: Python tools called and mapped,
their errors, docstrings and nested schemas in descriptions, URI errors with Kaval.AI's words, registration
conflicts, REST tools registered by schema (against a real local server), and the ``allowed_tools`` filter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from tests.servers.kaval_rest_app import create_app
from tests.servers.uvicorn_server import serve

from kavalai.functionkernel import FunctionKernel, FunctionKernelException, ToolDefinition, pythontool
from kavalai.workflow.models import McpServer, RestServer


@pythontool
def sync_add(a: int, b: int) -> int:
    return a + b


@pythontool
async def async_multiply(a: int, b: int) -> int:
    return a * b


@pythontool
def numbers() -> list[int]:
    return [1, 2, 3]


class Doubled(BaseModel):
    result: int
    meta: str


@pythontool
def doubled(val: int) -> Doubled:
    return Doubled(result=val * 2, meta="test")


@pythontool
def documented() -> None:
    """
    Summary line.

    Detailed description that should be included
    by inspect.getdoc().
    """


class NestedInput(BaseModel):
    field_a: str
    field_b: int


class ComplexOutput(BaseModel):
    code: int


@pythontool
def complex_tool(name: str, nested: NestedInput) -> ComplexOutput:
    """A tool with nested pydantic models."""
    return ComplexOutput(code=len(name) + nested.field_b)


async def test_sync_async_list_and_model_returns(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("add", sync_add)
    kernel.register_python_tool("mul", async_multiply)
    kernel.register_python_tool("numbers", numbers)
    kernel.register_python_tool("custom", doubled)
    assert (await kernel._call_python_tool("add", {"a": 1, "b": 2})).result == 3
    assert (await kernel._call_python_tool("mul", {"a": 3, "b": 4})).result == 12
    assert (await kernel._call_python_tool("numbers", {})).result == [1, 2, 3]
    assert kernel.python_tool_definitions["custom"].output_model is Doubled
    assert await kernel._call_python_tool("custom", {"val": 5}) == Doubled(result=10, meta="test")
    assert (await kernel.call_tool("python://add", {"a": 10, "b": 20})).result == 30  # type: ignore[attr-defined]


async def test_python_tool_errors_use_kaval_wording(kernel: FunctionKernel) -> None:
    with pytest.raises(FunctionKernelException, match="not registered"):
        await kernel._call_python_tool("non.existent.tool", {})
    kernel.register_python_tool("add", sync_add)
    with pytest.raises(FunctionKernelException, match="argument validation failed"):
        await kernel._call_python_tool("add", {"a": 1})

    def undecorated(x: int) -> int:
        return x

    with pytest.raises(FunctionKernelException, match="must be decorated with @kavalai.pythontool"):
        kernel.register_python_tool("undecorated", undecorated)
    with pytest.raises(FunctionKernelException, match="not registered"):  # a dotted path is never imported
        await kernel._call_python_tool("os.getcwd", {})
    with pytest.raises(FunctionKernelException):
        kernel.register_python_tool("rest://math.add", sync_add)


async def test_descriptions_docstrings_nested_schemas_and_the_allowed_tools_filter(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("documented", documented)
    expected = "Summary line.\n\nDetailed description that should be included\nby inspect.getdoc()."
    assert kernel.python_tool_definitions["documented"].description == expected
    kernel.register_python_tool("complex_tool", complex_tool)
    kernel.register_python_tool("math.add", sync_add)
    kernel.register_python_tool("math.multiply", async_multiply)
    described = json.loads(await kernel.get_tool_descriptions(allowed_tools=["python://complex_tool"]))
    assert [tool["name"] for tool in described] == ["python://complex_tool"]
    schema = described[0]["inputSchema"]
    assert described[0]["description"] == "A tool with nested pydantic models."
    assert schema["properties"]["name"]["type"] == "string"
    assert "$ref" in schema["properties"]["nested"]
    assert "NestedInput" in schema["$defs"]
    only_add = json.loads(await kernel.get_tool_descriptions(allowed_tools=["python://math.add"]))
    assert [tool["name"] for tool in only_add] == ["python://math.add"]


def test_tool_definitions_and_uri_errors_use_kaval_wording() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", sync_add)
    definition = kernel.get_tool_definition("python://math.add")
    assert isinstance(definition, ToolDefinition)
    assert kernel.get_input_model("python://math.add") is definition.input_model
    assert kernel.get_output_model("python://math.add") is definition.output_model
    with pytest.raises(FunctionKernelException, match="not registered"):
        FunctionKernel().get_tool_definition("python://math.add")
    for uri, words in [
        ("rest://just_a_function", "Invalid tool path format"),
        ("rest://ghost.get_item", "REST tool 'get_item' on server"),
        ("mcp://ghost.run", "MCP tool 'run' on server"),
        ("ftp://server.get", "Unsupported protocol"),
    ]:
        with pytest.raises(FunctionKernelException, match=words):
            kernel.get_tool_definition(uri)


async def test_call_tool_uri_errors_and_registration_conflicts(kernel: FunctionKernel) -> None:
    for uri, words in [
        ("invalid_format", "Invalid tool URI format"),
        ("rest://nodot", "Invalid tool path format"),
        ("ftp://some.file", "Unsupported protocol"),
    ]:
        with pytest.raises(FunctionKernelException, match=words):
            await kernel.call_tool(uri, {})
    kernel.register_rest_server(RestServer(name="test", url="http://127.0.0.1:9"))
    with pytest.raises(FunctionKernelException, match="REST server 'test' is already registered"):
        kernel.register_rest_server(RestServer(name="test", url="http://127.0.0.1:8"))
    kernel.register_mcp_server(McpServer(name="mcp", command="ls"))
    with pytest.raises(FunctionKernelException, match="MCP server 'mcp' is already registered"):
        kernel.register_mcp_server(McpServer(name="mcp", command="dir"))
    kernel.register_python_tool("add", sync_add)
    with pytest.raises(FunctionKernelException, match="Python tool 'add' is already registered"):
        kernel.register_python_tool("add", async_multiply)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(create_app()) as base_url:
        yield base_url


async def test_rest_tools_registered_by_schema_are_called_and_described(kernel: FunctionKernel, url: str) -> None:
    kernel.register_rest_server(RestServer(name="test_server", url=url))
    item: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "integer"}}}
    kernel.register_rest_tool(
        server_name="test_server",
        tool_name="get_item",
        method="get",
        input_schema={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        output_schema=item,
        description="Get item by id",
    )
    kernel.register_rest_tool(
        server_name="test_server",
        tool_name="create_item",
        method="post",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        output_schema=item,
    )
    got = await kernel.call_tool("rest://test_server.get_item", {"id": 2})
    assert isinstance(got, BaseModel)
    assert (got.name, got.value) == ("item", 200)  # type: ignore[attr-defined]
    created = await kernel.call_tool("rest://test_server.create_item", {"name": "new"})
    assert created.value == 100  # type: ignore[attr-defined]
    tools = {tool["name"]: tool for tool in json.loads(await kernel.get_tool_descriptions(["rest://test_server.*"]))}
    assert tools["rest://test_server.get_item [GET]"]["description"] == "Get item by id"
    assert "id" in tools["rest://test_server.get_item [GET]"]["inputSchema"]["properties"]
    assert "name" in tools["rest://test_server.create_item [POST]"]["inputSchema"]["properties"]
