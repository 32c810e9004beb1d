"""@pythontool and register_python_tool."""

from __future__ import annotations

from typing import Any

import pytest

from kavalai import FunctionKernel, ToolRegistrationError, pythontool
from kavalai.adapters.python import ToolOptions, is_pythontool


def plain(a: int) -> int:
    return a


@pythontool
def decorated(a: int) -> int:
    """Return a."""
    return a


def test_bare_decorator_returns_the_function_unchanged() -> None:
    assert decorated(3) == 3
    assert decorated.__name__ == "decorated"
    assert is_pythontool(decorated)
    assert not is_pythontool(plain)


def test_decorator_with_options() -> None:
    @pythontool(description="Custom.", timeout=2.5, inline=True)
    def f() -> None: ...

    assert f.__kavalai_tool__ == ToolOptions(description="Custom.", timeout=2.5, inline=True)
    kernel = FunctionKernel()
    kernel.register_python_tool("f", f)
    definition = kernel.get_tool_definition("python://f")
    assert definition.description == "Custom."
    assert definition.timeout == 2.5


def test_decorator_validates_options() -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        pythontool(timeout=0)
    with pytest.raises(TypeError, match="decorates a function"):
        pythontool(42)


def test_register_returns_uri_and_accepts_python_prefix() -> None:
    kernel = FunctionKernel()
    assert kernel.register_python_tool("fs.ls", decorated) == "python://fs.ls"
    assert kernel.register_python_tool("python://fs.cat", decorated) == "python://fs.cat"
    assert kernel.list_tools() == ["python://fs.cat", "python://fs.ls"]


def test_register_overrides() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("f", decorated, description="Given.", timeout=1.0)
    definition = kernel.get_tool_definition("python://f")
    assert (definition.description, definition.timeout) == ("Given.", 1.0)


def test_undecorated_function_is_refused_with_the_fix() -> None:
    kernel = FunctionKernel()
    with pytest.raises(ToolRegistrationError) as info:
        kernel.register_python_tool("plain", plain)
    assert "python://plain" in str(info.value)
    assert "not decorated with @pythontool" in str(info.value)
    assert "Add `@pythontool`" in str(info.value)


def test_duplicate_name_is_refused_unless_replacing() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("f", decorated)
    with pytest.raises(ToolRegistrationError, match="already registered at python://f.*replace=True"):
        kernel.register_python_tool("f", decorated)
    kernel.register_python_tool("f", decorated, description="new", replace=True)
    assert kernel.get_tool_definition("python://f").description == "new"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("rest://x.y", "give a bare name"), ("bad name", "may not contain spaces"), ("", "tool name is empty")],
)
def test_bad_names_are_refused(name: str, fragment: str) -> None:
    with pytest.raises(ToolRegistrationError, match=fragment):
        FunctionKernel().register_python_tool(name, decorated)


def test_non_string_name_is_refused() -> None:
    with pytest.raises(ToolRegistrationError, match="must be a string"):
        FunctionKernel().register_python_tool(3, decorated)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(*args: Any) -> None: ...", "takes *args"),
        ("def f(**kwargs: Any) -> None: ...", "takes **kwargs"),
        ("def f(x: int, /) -> None: ...", "positional-only"),
    ],
)
def test_bad_signatures_are_refused(source: str, fragment: str) -> None:
    namespace: dict[str, Any] = {"Any": Any}
    exec(source, namespace)
    with pytest.raises(ToolRegistrationError) as info:
        FunctionKernel().register_python_tool("f", pythontool(namespace["f"]))
    assert fragment in str(info.value)


async def test_bound_methods_can_be_tools() -> None:
    class Counter:
        def __init__(self) -> None:
            self.count = 0

        @pythontool
        def bump(self, by: int = 1) -> int:
            self.count += by
            return self.count

    counter = Counter()
    kernel = FunctionKernel()
    kernel.register_python_tool("counter.bump", counter.bump)
    assert set(kernel.get_input_model("python://counter.bump").model_fields) == {"by"}
    assert (await kernel.call_tool("python://counter.bump", {"by": 2})).result == 2
    assert counter.count == 2


async def test_parameters_named_like_model_attributes_work_end_to_end() -> None:
    @pythontool
    def fmt(json: str, schema: str = "s", _hidden: int = 0) -> str:
        return f"{json}-{schema}-{_hidden}"

    kernel = FunctionKernel()
    kernel.register_python_tool("fmt", fmt)
    result = await kernel.call_tool("python://fmt", {"json": "j", "_hidden": 2})
    assert result.result == "j-s-2"
