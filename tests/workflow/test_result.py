"""The JSON-ready form of node inputs and outputs in run traces (``jsonable``)."""

from __future__ import annotations

import datetime as dt
import math
import uuid

from pydantic import BaseModel, Field

from kavalai.workflow._result import jsonable


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
