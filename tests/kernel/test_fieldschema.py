"""A signature's JSON schemas put together without its models: exactly what the built models give, and the models
built only when a tool is first called."""

from __future__ import annotations

import asyncio
import enum
import json
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

import pytest
from annotated_types import Ge
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from kavalai import FunctionKernel, ToolRegistrationError, pythontool
from kavalai.kernel._definition import OpenForPythonTypes
from kavalai.kernel._fieldschema import type_fragment, type_key
from kavalai.kernel._schema import function_schema


class Color(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: int


class Opaque:
    """A class pydantic only checks with isinstance."""


@dataclass(frozen=True)
class Kind:
    source: str
    plain: bool  # whether its schema is put together without a model
    default: Any = None


KINDS = [
    Kind("int", True, 3),
    Kind("str", True, "x"),
    Kind("float", True, 1.5),
    Kind("bool", True, True),
    Kind("bytes", True, None),
    Kind("list[int]", True, None),
    Kind("dict[str, Any]", True, None),
    Kind("tuple[int, str]", True, None),
    Kind("set[str]", True, None),
    Kind("Optional[int]", True, None),
    Kind("int | None", True, None),
    Kind("str | int", True, "y"),
    Kind("Literal['a', 'b']", True, "a"),
    Kind("Literal[1, True]", True, 1),
    Kind("Any", True, None),
    Kind("Opaque", True, None),
    Kind("list[Opaque]", True, None),
    Kind("Annotated[int, Ge(0)]", True, 2),
    Kind("Annotated[int, Field(ge=0)]", False, 2),
    Kind("Color", False, None),
    Kind("Point", False, None),
    Kind("list[Point]", False, None),
]
NAMESPACE = {
    "Annotated": Annotated,
    "Any": Any,
    "Color": Color,
    "Field": Field,
    "Ge": Ge,
    "Literal": Literal,
    "Opaque": Opaque,
    "Optional": Optional,
    "Point": Point,
}
NAMES = ["a", "b_c", "json", "schema", "model_config", "_private", "_", "copy", "x1"]


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: str | None  # source of the default, or None for a required parameter
    doc: str | None


@st.composite
def params(draw: st.DrawFn) -> list[Param]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=5))
    drawn = []
    for name in names:
        kind = draw(st.sampled_from(KINDS))
        default = draw(st.sampled_from([None, "DEFAULT", "None", "[1]", "float('inf')"]))
        doc = draw(st.none() | st.sampled_from(["The thing.", "How many: at most 5."]))
        drawn.append(Param(name, kind, default, doc))
    drawn.sort(key=lambda p: p.default is not None)  # no default before a required parameter
    return drawn


def build(drawn: list[Param], returns: Kind) -> Any:
    namespace: dict[str, Any] = dict(NAMESPACE)
    parts = []
    for p in drawn:
        default = ""
        if p.default is not None:
            namespace[f"DEFAULT_{p.name}"] = p.kind.default
            default = f" = {p.default.replace('DEFAULT', f'DEFAULT_{p.name}')}"
        parts.append(f"{p.name}: {p.kind.source}{default}")
    documented = [p for p in drawn if p.doc]
    doc = "Do the thing."
    if documented:
        doc += "\n\n    Args:\n" + "".join(f"        {p.name}: {p.doc}\n" for p in documented) + "    "
    exec(f'def tool({", ".join(parts)}) -> {returns.source}:\n    """{doc}"""\n', namespace)
    return namespace["tool"]


def pydantic_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(schema_generator=OpenForPythonTypes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=params(), returns=st.sampled_from(KINDS))
def test_the_schemas_put_together_are_exactly_the_built_models_schemas(drawn: list[Param], returns: Kind) -> None:
    schema = function_schema(build(drawn, returns), uri="python://cat.tool")
    plain = all(p.kind.plain and p.default in (None, "DEFAULT", "None") for p in drawn)
    assert (schema.input_schema is not None) is plain
    assert schema.deferred is (plain or returns.plain)  # a model put off is built on first use
    if schema.input_schema is not None:
        # json.dumps, not ==: the same keys in the same order, so the listed JSON text is the same too
        assert json.dumps(schema.input_schema) == json.dumps(pydantic_schema(schema.input_model))
    assert schema.output_schema is not None
    expected = pydantic_schema(schema.output_model)
    if schema.wrapped:
        expected["title"] = "CatToolOutput"  # listed under the tool's name; the model is shared by the return type
    assert json.dumps(schema.output_schema) == json.dumps(expected)


def test_plain_signatures_build_no_model_until_called() -> None:
    @pythontool
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    kernel = FunctionKernel()
    uri = kernel.register_python_tool("m.add", add)
    listed = asyncio.run(kernel.describe_tools())
    assert listed[0]["inputSchema"]["properties"]["b"] == {"default": 2, "title": "B", "type": "integer"}
    assert uri in kernel.registry._lazy  # listed, and still no model built
    assert uri not in kernel.registry._tools
    assert asyncio.run(kernel.call_tool(uri, {"a": 1})).result == 3  # type: ignore[attr-defined]
    assert uri in kernel.registry._tools
    assert kernel.get_tool_definition(uri).get_input_schema() is listed[0]["inputSchema"]


def test_a_signature_with_a_model_builds_its_models_at_registration() -> None:
    @pythontool
    def move(p: Point) -> Point:
        return p

    kernel = FunctionKernel()
    uri = kernel.register_python_tool("m.move", move)
    assert uri in kernel.registry._tools


def test_types_refused_are_still_refused_at_registration() -> None:
    class Later(BaseModel):
        child: Undefined  # type: ignore[name-defined]  # noqa: F821 - never defined, on purpose

    @pythontool
    def f(x: list[Later]) -> int:
        return 0

    with pytest.raises(ToolRegistrationError, match="not fully defined"):
        FunctionKernel().register_python_tool("m.f", f)


def test_type_keys_keep_the_order_that_equality_forgets() -> None:
    assert (int | str) == (str | int)
    assert type_key(int | str) != type_key(str | int)
    assert typing.Literal[1, 2] == typing.Literal[2, 1]
    assert type_key(typing.Literal[1, 2]) != type_key(typing.Literal[2, 1])
    assert type_key(typing.Literal[1]) != type_key(typing.Literal[True])
    assert type_key(list[int]) == type_key(list[int])
    assert type_fragment(Annotated[int, Field(description="own")]) is None
    assert type_fragment(Annotated[int, Ge(0)]) == {"minimum": 0, "type": "integer"}
