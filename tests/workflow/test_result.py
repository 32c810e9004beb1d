"""The JSON-ready form of node inputs and outputs in run traces (``jsonable``, ``output_json``)."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
import uuid
from typing import Annotated

from pydantic import BaseModel, Field, PlainSerializer, field_serializer

from kavalai.workflow._result import jsonable
from kavalai.workflow._runners import output_json, to_context


class _Aliased(BaseModel):
    name: str = Field(alias="Name")
    when: dt.date


class _Opaque:
    def __str__(self) -> str:
        return "opaque!"


def test_plain_values_are_kept_as_they_are() -> None:
    for value in ("text", 3, 2.5, True, None, 10**40):
        assert jsonable(value) is value
    assert math.isinf(jsonable(math.inf))


def test_containers_models_and_dates_become_json_data() -> None:
    key = uuid.UUID(int=7)
    value = {"m": _Aliased(Name="a", when=dt.date(2026, 12, 3)), "t": (1, 2), 5: {key}, "at": dt.datetime(2026, 1, 1)}
    assert jsonable(value) == {
        "m": {"Name": "a", "when": "2026-12-03"},
        "t": [1, 2],
        "5": [str(key)],
        "at": "2026-01-01T00:00:00",
    }


def test_an_object_pydantic_cannot_convert_becomes_its_text_and_the_rest_is_kept() -> None:
    assert jsonable({"a": [1, _Opaque()], "b": dt.date(2026, 1, 2)}) == {"a": [1, "opaque!"], "b": "2026-01-02"}
    assert jsonable(_Opaque()) == "opaque!"


def test_the_input_is_not_changed_or_shared() -> None:
    arguments = {"a": 1, "b": [1, 2]}
    copied = jsonable(arguments)
    assert copied == arguments
    assert copied is not arguments
    assert copied["b"] is not arguments["b"]


class _Plain(BaseModel):
    result: int
    label: str = Field(serialization_alias="Label", default="x")
    ratio: float = 0.5
    flag: bool | None = None


class _JsonOnly(BaseModel):
    count: int

    @field_serializer("count", when_used="json")
    def _count_text(self, count: int) -> str:
        return f"#{count}"


class _Annotated(BaseModel):
    count: Annotated[int, PlainSerializer(lambda v: v * 10, when_used="json")]


class _Nested(BaseModel):
    inner: _Plain
    when: dt.date


class _Color(enum.StrEnum):
    RED = "red"


class _WithEnum(BaseModel):
    color: _Color


def test_a_node_output_traces_as_jsonable_would_make_it() -> None:
    # output_json takes a short cut for flat models of plain fields; it must agree with jsonable everywhere.
    outputs: list[object] = [
        _Plain(result=5),
        _Plain(result=5, ratio=math.inf, flag=True),
        _Plain(result=5, ratio=math.nan),
        _JsonOnly(count=3),
        _Annotated(count=3),
        _Nested(inner=_Plain(result=1), when=dt.date(2026, 12, 4)),
        _WithEnum(color=_Color.RED),
        {"a": 1},
        [1, "two"],
        7,
        None,
    ]
    for output in outputs:
        traced = output_json(output, to_context(output))
        expected = jsonable(output)
        assert json.dumps(traced, allow_nan=True) == json.dumps(expected, allow_nan=True), output
    assert output_json(_JsonOnly(count=3), to_context(_JsonOnly(count=3))) == {"count": "#3"}
    assert output_json(_Annotated(count=3), to_context(_Annotated(count=3))) == {"count": 30}
    plain = _Plain(result=5)
    context = to_context(plain)
    traced = output_json(plain, context)
    assert traced == {"result": 5, "Label": "x", "ratio": 0.5, "flag": None}
    assert traced is not context  # the trace's copy, not the run context's dict
