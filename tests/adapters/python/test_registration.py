"""@pythontool and register_python_tool."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from pydantic import BaseModel

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


class Shelf:
    """Methods of every kind as tools."""

    prefix = "shelf"

    @pythontool
    @classmethod
    def describe(cls, item: str) -> str:
        return f"{cls.prefix}:{item}"

    @classmethod
    @pythontool
    def describe_inner(cls, item: str) -> str:
        return f"{cls.prefix}:{item}!"

    @pythontool
    @staticmethod
    def size(item: str) -> int:
        return len(item)

    @staticmethod
    def untouched(item: str) -> int:
        return len(item)

    def count(self, item: str) -> int:
        return len(item) + 1


async def test_class_and_static_methods_in_either_decorator_order() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("shelf.describe", Shelf.describe)
    kernel.register_python_tool("shelf.describe_inner", Shelf.describe_inner)
    kernel.register_python_tool("shelf.size", Shelf.size)
    assert (await kernel.call_tool("python://shelf.describe", {"item": "a"})).result == "shelf:a"
    assert (await kernel.call_tool("python://shelf.describe_inner", {"item": "a"})).result == "shelf:a!"
    assert (await kernel.call_tool("python://shelf.size", {"item": "abc"})).result == 3
    assert Shelf.size("ab") == 2  # still directly callable


async def test_decorating_a_bound_method_after_the_fact() -> None:
    shelf = Shelf()
    assert pythontool(shelf.count) == shelf.count
    kernel = FunctionKernel()
    kernel.register_python_tool("shelf.count", shelf.count)
    assert (await kernel.call_tool("python://shelf.count", {"item": "ab"})).result == 3


async def test_callable_objects_partials_and_lambdas_can_be_tools() -> None:
    class Multiply:
        def __call__(self, x: int, by: int = 2) -> int:
            return x * by

    def power(base: int, exponent: int) -> int:
        return int(base**exponent)

    kernel = FunctionKernel()
    kernel.register_python_tool("mul", pythontool(Multiply()))
    kernel.register_python_tool("square", pythontool(functools.partial(power, exponent=2)))
    kernel.register_python_tool("neg", pythontool(lambda x: -x))
    assert (await kernel.call_tool("python://mul", {"x": "3"})).result == 6
    assert (await kernel.call_tool("python://square", {"base": 5})).result == 25
    assert (await kernel.call_tool("python://neg", {"x": 4})).result == -4
    assert kernel.get_tool_definition("python://square").metadata["function"].endswith(".power")
    assert kernel.get_tool_definition("python://mul").metadata["function"].endswith("Multiply.__call__")


def test_what_cannot_carry_the_flag_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match="wrap it in a function of your own"):
        pythontool(len)
    with pytest.raises(ToolRegistrationError, match="python://untouched: .*not decorated with @pythontool"):
        FunctionKernel().register_python_tool("untouched", Shelf.untouched)


@pytest.mark.parametrize("timeout", [0, -1.5, True, "5"])
def test_register_refuses_a_timeout_that_is_not_positive_seconds(timeout: Any) -> None:
    with pytest.raises(ToolRegistrationError) as info:
        FunctionKernel().register_python_tool("f", decorated, timeout=timeout)
    assert str(info.value) == (
        f"Cannot register python://f: timeout must be positive (in seconds) or None, got {timeout!r}."
    )
    assert info.value.uri == "python://f"


@pytest.mark.parametrize("timeout", [0, -1, False, "5"])
def test_decorator_refuses_a_timeout_that_is_not_positive_seconds(timeout: Any) -> None:
    with pytest.raises(ValueError, match=f"timeout must be positive .* got {timeout!r}"):
        pythontool(timeout=timeout)


async def test_string_annotations_naming_local_types_resolve() -> None:
    # This module uses `from __future__ import annotations`: every hint below is a string naming a local class.
    class Query(BaseModel):
        text: str

    class Hit(BaseModel):
        score: float

    note = "a local that is not a type"

    @pythontool
    def bare(q: Query) -> Hit:
        return Hit(score=len(q.text))

    @pythontool(timeout=5)
    def with_options(q: Query) -> list[Hit]:
        return [Hit(score=1)]

    def called(q: Query) -> Hit:
        return Hit(score=2)

    kernel = FunctionKernel()
    kernel.register_python_tool("bare", bare)
    kernel.register_python_tool("options", with_options)
    kernel.register_python_tool("called", pythontool(called))
    assert await kernel.call_tool("python://bare", {"q": {"text": "abc"}}) == Hit(score=3)
    assert (await kernel.call_tool("python://options", {"q": {"text": ""}})).result == [Hit(score=1)]
    assert kernel.get_output_model("python://called") is Hit
    assert bare.__kavalai_tool__.local_types is not None
    assert set(bare.__kavalai_tool__.local_types) >= {"Query", "Hit"}
    assert note not in bare.__kavalai_tool__.local_types.values()  # only types are kept


def test_a_local_type_defined_after_decoration_is_found_through_the_closure() -> None:
    @pythontool
    def make() -> Later:
        return Later()

    class Later(BaseModel):
        pass

    kernel = FunctionKernel()
    kernel.register_python_tool("make", make)
    assert kernel.get_output_model("python://make") is Later
