"""Introspection, allowed_tools selection, and the kernel's lifecycle."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel, ServerConnectionError, ToolDefinition, ToolNotFoundError, pythontool
from kavalai.adapters.base import ToolAdapter


class Listing(BaseModel):
    names: list[str]


@pythontool
def ls(path: str = ".") -> Listing:
    """List a folder.

    Args:
        path: The folder.
    """
    return Listing(names=[path])


@pythontool
def read(path: str) -> str:
    """Read a file."""
    return path


@pythontool
def now() -> str:
    """The time."""
    return "12:00"


@pytest.fixture
def loaded(kernel: FunctionKernel) -> FunctionKernel:
    kernel.register_python_tool("fs.ls", ls)
    kernel.register_python_tool("fs.read", read)
    kernel.register_python_tool("time.now", now)
    return kernel


def test_list_tools_is_sorted_and_filterable(loaded: FunctionKernel) -> None:
    assert loaded.list_tools() == ["python://fs.ls", "python://fs.read", "python://time.now"]
    assert loaded.list_tools("python://fs.*") == ["python://fs.ls", "python://fs.read"]
    assert loaded.has_tool("python://time.now")
    assert not loaded.has_tool("python://time.later")


def test_get_tool_definition(loaded: FunctionKernel) -> None:
    definition = loaded.get_tool_definition("python://fs.ls")
    assert isinstance(definition, ToolDefinition)
    assert definition.name == "python://fs.ls"
    assert definition.kind == "python"
    assert definition.description == "List a folder."
    assert definition.input_model is loaded.get_input_model("python://fs.ls")
    assert definition.output_model is Listing is loaded.get_output_model("python://fs.ls")
    assert definition.get_input_schema()["properties"]["path"]["description"] == "The folder."
    assert definition.get_output_schema()["properties"]["names"]["type"] == "array"


def test_introspection_of_unknown_tool(loaded: FunctionKernel) -> None:
    with pytest.raises(ToolNotFoundError, match="Did you mean 'python://fs.read'"):
        loaded.get_input_model("python://fs.reed")
    with pytest.raises(ToolNotFoundError, match="Unknown tool 'python://x'"):
        loaded.get_output_model("python://x")


async def test_tool_descriptions_are_json_serialisable(loaded: FunctionKernel) -> None:
    descriptions = await loaded.get_tool_descriptions()
    assert [d["name"] for d in descriptions] == loaded.list_tools()
    ls_description = descriptions[0]
    assert set(ls_description) == {"name", "description", "inputSchema", "outputSchema"}
    assert ls_description["inputSchema"]["type"] == "object"
    assert ls_description["outputSchema"]["title"] == "Listing"
    assert json.loads(json.dumps(descriptions)) == descriptions


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        (None, ["python://fs.ls", "python://fs.read", "python://time.now"]),
        ([], []),
        (["*"], ["python://fs.ls", "python://fs.read", "python://time.now"]),
        (["python://fs.*"], ["python://fs.ls", "python://fs.read"]),
        (["python://time.now", "python://fs.l?"], ["python://fs.ls", "python://time.now"]),
        (["python://fs.ls", "python://fs.*"], ["python://fs.ls", "python://fs.read"]),
    ],
)
async def test_allowed_tools(loaded: FunctionKernel, allowed: list[str] | None, expected: list[str]) -> None:
    descriptions = await loaded.get_tool_descriptions(allowed_tools=allowed)
    assert [d["name"] for d in descriptions] == expected


async def test_a_glob_that_matches_nothing_is_an_error_not_an_empty_allow_list(loaded: FunctionKernel) -> None:
    with pytest.raises(ToolNotFoundError, match=r"'python://fss\.\*' matches no registered tool") as info:
        await loaded.get_tool_descriptions(["python://fss.*"])
    assert info.value.suggestions[:1] == ["python://fs.ls"]
    with pytest.raises(ToolNotFoundError, match="matches no registered tool"):
        loaded.select_tools(["python://fs.*", "mcp://github.*"])


def test_a_tool_named_like_a_glob_does_not_turn_the_glob_into_an_exact_match(loaded: FunctionKernel) -> None:
    loaded.register_python_tool("*", now)
    assert loaded.select_tools(["python://*"]) == [
        "python://*",
        "python://fs.ls",
        "python://fs.read",
        "python://time.now",
    ]


async def test_allowed_tools_exact_uri_that_names_nothing_is_an_error(loaded: FunctionKernel) -> None:
    with pytest.raises(ToolNotFoundError, match="Did you mean 'python://time.now'"):
        await loaded.get_tool_descriptions(["python://time.nwo"])


def test_allowed_tools_as_a_single_string_is_refused(loaded: FunctionKernel) -> None:
    with pytest.raises(TypeError, match="not a single string"):
        loaded.select_tools("python://fs.*")


async def test_resolve_tool(loaded: FunctionKernel) -> None:
    assert (await loaded.resolve_tool("python://fs.ls")).name == "python://fs.ls"
    with pytest.raises(ToolNotFoundError):
        await loaded.resolve_tool("python://nothing")


async def test_async_with_connects_and_closes() -> None:
    closed: list[str] = []
    async with FunctionKernel() as kernel:
        kernel.register_python_tool("now", now)

        async def on_close() -> None:
            closed.append("closed")

        kernel.on_close(on_close)
        assert (await kernel.call_tool("python://now")).result == "12:00"
    assert closed == ["closed"]


async def test_close_is_idempotent_and_the_kernel_stays_usable(loaded: FunctionKernel) -> None:
    calls: list[int] = []

    async def on_close() -> None:
        calls.append(1)

    loaded.on_close(on_close)
    await loaded.close()
    await loaded.aclose()
    assert calls == [1, 1]
    assert (await loaded.call_tool("python://time.now")).result == "12:00"


async def test_close_runs_every_callback_even_if_one_fails() -> None:
    kernel = FunctionKernel()
    ran: list[str] = []

    async def bad() -> None:
        ran.append("bad")
        raise RuntimeError("cannot close")

    async def good() -> None:
        ran.append("good")

    kernel.on_close(good)
    kernel.on_close(bad)
    with pytest.raises(RuntimeError, match="cannot close"):
        await kernel.close()
    assert ran == ["bad", "good"]


def test_repr_counts_tools(loaded: FunctionKernel) -> None:
    assert repr(loaded) == "<FunctionKernel tools: python=3>"
    assert repr(FunctionKernel()) == "<FunctionKernel tools: none>"


class Handle:
    """A Python object JSON cannot describe."""


@pythontool
def use_handle(handle: Handle, label: str = "") -> Handle:
    """Use a handle (callable from Python only)."""
    return handle


async def test_a_type_json_cannot_describe_leaves_its_field_open_and_the_listing_intact(
    loaded: FunctionKernel,
) -> None:
    loaded.register_python_tool("handles.use", use_handle)
    descriptions = {d["name"]: d for d in await loaded.get_tool_descriptions()}
    assert len(descriptions) == 4
    schema = descriptions["python://handles.use"]["inputSchema"]
    assert schema["properties"]["handle"] == {"title": "Handle"}
    assert schema["properties"]["label"] == {"default": "", "title": "Label", "type": "string"}
    assert descriptions["python://handles.use"]["outputSchema"]["properties"]["result"] == {"title": "Result"}
    assert json.loads(json.dumps(list(descriptions.values()))) == list(descriptions.values())


def test_globs_are_case_sensitive_and_always_globs(loaded: FunctionKernel) -> None:
    loaded.register_python_tool("grid[1]", now)
    assert loaded.list_tools("python://FS.*") == []
    with pytest.raises(ToolNotFoundError, match="Did you mean 'python://fs"):
        loaded.select_tools(["python://FS.*"])
    # `[1]` is a glob character class: it matches `grid1`, not the literal name; list_tools finds the tool.
    with pytest.raises(ToolNotFoundError):
        loaded.select_tools(["python://grid[1]"])
    assert loaded.select_tools(["python://grid[[]1]"]) == ["python://grid[1]"]
    assert loaded.list_tools("python://grid*") == ["python://grid[1]"]


class RecordingAdapter(ToolAdapter):
    """A stand-in for the REST and MCP adapters: records the kernel's lifecycle calls."""

    scheme: ClassVar[str] = "rec"
    events: ClassVar[list[str]] = []
    fail_connect: ClassVar[bool] = False

    async def connect(self) -> None:
        self.events.append("connect")
        if self.fail_connect:
            raise ServerConnectionError("Cannot start MCP server 'x': boom", server="x")

    async def aclose(self) -> None:
        self.events.append("close")


async def test_async_with_connects_every_adapter_on_entry_and_closes_on_exit() -> None:
    RecordingAdapter.events = []
    RecordingAdapter.fail_connect = False
    kernel = FunctionKernel()
    kernel.add_adapter(RecordingAdapter(kernel.registry))
    async with kernel as entered:
        assert entered is kernel
        assert RecordingAdapter.events == ["connect"]
    assert RecordingAdapter.events == ["connect", "close"]


async def test_a_failed_connect_on_entry_closes_what_was_opened_and_raises() -> None:
    RecordingAdapter.events = []
    RecordingAdapter.fail_connect = True
    kernel = FunctionKernel()
    kernel.add_adapter(RecordingAdapter(kernel.registry))
    with pytest.raises(ServerConnectionError, match="boom"):
        async with kernel:
            raise AssertionError("the body must not run")
    assert RecordingAdapter.events == ["connect", "close"]


async def test_close_raises_the_first_failure_and_logs_the_others(caplog: pytest.LogCaptureFixture) -> None:
    kernel = FunctionKernel()

    async def first() -> None:
        raise RuntimeError("first")

    async def second() -> None:
        raise OSError("second")

    kernel.on_close(second)
    kernel.on_close(first)  # callbacks run newest first
    with caplog.at_level("WARNING", logger="kavalai"), pytest.raises(RuntimeError, match="first"):
        await kernel.close()
    assert [r.getMessage() for r in caplog.records] == ["Another error while closing the kernel: OSError('second')"]


def test_the_tools_revision_moves_exactly_when_the_tools_change(loaded: FunctionKernel) -> None:
    seen = loaded.tools_revision
    loaded.list_tools()
    loaded.get_tool_definition("python://time.now")  # builds a lazily published tool: no change
    loaded.registry.describe("python://fs.read")
    assert loaded.tools_revision == seen
    changes = [
        lambda: loaded.register_python_tool("time.later", now),
        lambda: loaded.register_python_tool("time.later", read, replace=True),
        lambda: loaded.remove_tool("python://time.later"),
    ]
    for change in changes:
        change()
        assert loaded.tools_revision != seen
        seen = loaded.tools_revision
    assert loaded.remove_tool("python://time.later") is False  # nothing withdrawn: no change
    assert loaded.tools_revision == seen
