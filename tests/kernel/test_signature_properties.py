"""Property tests: a signature -> the input model, and a call through the kernel -> exactly the function's arguments.

Each example writes a real function (``exec`` of generated source, so ``inspect`` sees a genuine signature with
positional-or-keyword and keyword-only parameters, defaults and a Google docstring), registers it and checks:
the JSON schema lists each parameter under its own name, ``required`` is the parameters without a default, each
documented parameter carries its description, a valid call hands the function the coerced values (and the
defaults for what was left out), and an invalid value is a ToolInputError located at that parameter.
"""

from __future__ import annotations

import asyncio
import enum
import keyword
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, TypeAdapter

from kavalai import FunctionKernel, ToolInputError, ToolOutputError, pythontool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int


@dataclass(frozen=True)
class Kind:
    """A parameter type: how it is written, a valid input, what that input becomes, and an input it refuses."""

    source: str
    valid: Any
    coerced: Any
    invalid: Any


KINDS = [
    Kind("int", "7", 7, "seven"),
    Kind("str", "s", "s", 5),
    Kind("float", "1.5", 1.5, "x"),
    Kind("bool", "true", True, "maybe"),
    Kind("list[int]", ["1", 2], [1, 2], ["x"]),
    Kind("Optional[int]", None, None, "x"),
    Kind("Literal['a', 'b']", "b", "b", "c"),
    Kind("Color", "blue", Color.BLUE, "green"),
    Kind("Point", {"x": "1", "y": 2}, Point(x=1, y=2), {"x": 1}),
    Kind("list[Point]", [{"x": 1, "y": "2"}], [Point(x=1, y=2)], [{}]),
    Kind("dict[str, int]", {"a": "1"}, {"a": 1}, {"a": "x"}),
    Kind("Annotated[int, Field(ge=0)]", "3", 3, -1),
]
NAMESPACE = {
    "Annotated": Annotated,
    "Any": Any,
    "Color": Color,
    "Field": Field,
    "Literal": Literal,
    "Optional": Optional,
    "Point": Point,
}
# Names a BaseModel attribute would shadow, or with a leading underscore: kept as the argument names all the same.
AWKWARD_NAMES = ["json", "schema", "copy", "dict", "fields", "model_dump", "model_config", "_private", "_"]
_plain_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))
_names = st.one_of(_plain_names, st.sampled_from(AWKWARD_NAMES))


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    has_default: bool
    keyword_only: bool
    doc: str | None


@st.composite
def signatures(draw: st.DrawFn) -> list[Param]:
    names = draw(st.lists(_names, unique=True, max_size=6))
    params = [
        Param(
            name=name,
            kind=draw(st.sampled_from(KINDS)),
            has_default=draw(st.booleans()),
            keyword_only=draw(st.booleans()),
            doc=draw(st.none() | st.from_regex(r"[A-Z][a-z]{1,12}( [a-z]{1,8}){0,3}\.", fullmatch=True)),
        )
        for name in names
    ]
    # Python's rules: positional-or-keyword parameters first, and among them no default before a required one.
    positional = [p for p in params if not p.keyword_only]
    positional.sort(key=lambda p: p.has_default)
    return positional + [p for p in params if p.keyword_only]


def build(params: list[Param]) -> Any:
    """The source of a decorated function that returns the arguments it received, and the function itself."""
    parts: list[str] = []
    star_written = False
    namespace: dict[str, Any] = dict(NAMESPACE)
    for p in params:
        if p.keyword_only and not star_written:
            parts.append("*")
            star_written = True
        default = ""
        if p.has_default:
            namespace[f"DEFAULT_{p.name}"] = p.kind.coerced
            default = f" = DEFAULT_{p.name}"
        parts.append(f"{p.name}: {p.kind.source}{default}")
    documented = [p for p in params if p.doc]
    doc = "Echo the arguments."
    if documented:
        doc += "\n\n    Args:\n" + "".join(f"        {p.name}: {p.doc}\n" for p in documented) + "    "
    body = "{" + ", ".join(f"{p.name!r}: {p.name}" for p in params) + "}"
    source = f'def echo({", ".join(parts)}) -> dict[str, Any]:\n    """{doc}"""\n    return {body}\n'
    exec(source, namespace)
    return pythontool(namespace["echo"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=signatures(), data=st.data())
def test_signature_becomes_the_input_model_and_calls_pass_exactly_the_arguments(
    params: list[Param], data: st.DataObject
) -> None:
    kernel = FunctionKernel()
    uri = kernel.register_python_tool("props.echo", build(params))
    definition = kernel.get_tool_definition(uri)

    schema = definition.get_input_schema()
    properties = schema.get("properties", {})
    assert list(properties) == [p.name for p in params]
    assert set(schema.get("required", [])) == {p.name for p in params if not p.has_default}
    for p in params:
        assert properties[p.name].get("description") == p.doc
    assert definition.description == "Echo the arguments."

    given_names = {p.name for p in params if not p.has_default or data.draw(st.booleans())}
    arguments = {p.name: p.kind.valid for p in params if p.name in given_names}
    result = asyncio.run(kernel.call_tool(uri, arguments))
    assert result.model_dump()["result"] == TypeAdapter(dict[str, Any]).dump_python(
        {p.name: p.kind.coerced for p in params}
    )

    if params:
        culprit = data.draw(st.sampled_from(params))
        bad = {**arguments, culprit.name: culprit.kind.invalid}
        try:
            asyncio.run(kernel.call_tool(uri, bad))
        except ToolInputError as exc:
            assert exc.uri == uri
            assert {error["loc"][0] for error in exc.errors} == {culprit.name}
            assert str(exc).startswith(f"Invalid arguments for {uri}: {culprit.name}")
        else:
            raise AssertionError(f"{culprit.kind.invalid!r} was accepted for {culprit.name}: {culprit.kind.source}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), wrong=st.booleans())
def test_return_value_is_coerced_by_the_return_annotation(kind: Kind, wrong: bool) -> None:
    namespace: dict[str, Any] = dict(NAMESPACE)
    namespace["VALUE"] = kind.invalid if wrong else kind.valid
    exec(f"def give() -> {kind.source}:\n    return VALUE\n", namespace)
    kernel = FunctionKernel()
    uri = kernel.register_python_tool("props.give", pythontool(namespace["give"]))
    try:
        result = asyncio.run(kernel.call_tool(uri))
    except ToolOutputError as exc:
        assert wrong, f"{kind.valid!r} did not coerce to {kind.source}: {exc}"
        assert str(exc).startswith(f"{uri} returned {namespace['VALUE']!r}")
    else:
        assert not wrong, f"{kind.invalid!r} was handed back as a {kind.source}"
        value = result.result if kernel.get_tool_definition(uri).wrapped else result  # type: ignore[attr-defined]
        assert value == kind.coerced
