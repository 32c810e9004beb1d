"""A node's output in the run context (``to_context``): a model whose plain fields are what a dump gives is copied
from its ``__dict__`` (the usual tool output, once a node); every other model is dumped by alias, as before."""

from __future__ import annotations

import enum
import os
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer

from kavalai.workflow._executor import new_run_id
from kavalai.workflow._result import jsonable
from kavalai.workflow._runners import _dumps_as_stored, context_and_json, to_context


class Plain(BaseModel):
    result: int
    note: str = "n"
    ratio: float | None = None


class Aliased(BaseModel):
    value: int = Field(serialization_alias="Value")


class Hidden(BaseModel):
    shown: int
    secret: str = Field(default="s", exclude=True)


class Computed(BaseModel):
    a: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.a * 2


class Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class Serialized(BaseModel):
    a: int

    @field_serializer("a")
    def _a(self, a: int) -> str:
        return f"<{a}>"


class Colour(enum.Enum):
    RED = "red"


class Nested(BaseModel):
    inner: Plain
    colour: Colour = Colour.RED


VALUES = [
    Plain(result=5),
    Plain(result=5, ratio=float("inf")),
    Aliased(value=1),
    Hidden(shown=1),
    Computed(a=2),
    Extra(a=1, b=2),  # type: ignore[call-arg]
    Serialized(a=1),
    Nested(inner=Plain(result=1)),
    5,
    "text",
    {"a": [1, 2]},
]


@pytest.mark.parametrize("value", [value for value in VALUES if isinstance(value, BaseModel)])
def test_the_context_form_is_the_dump_by_alias(value: BaseModel) -> None:
    context: Any = to_context(value)
    assert context == value.model_dump(by_alias=True)
    assert context is not value.__dict__  # a copy: the context may not change the model


def test_only_a_model_dumped_as_stored_is_copied() -> None:
    models = (Plain, Aliased, Hidden, Computed, Extra, Serialized)
    for model in models:
        _dumps_as_stored.pop(model, None)
    for value in (Plain(result=1), Aliased(value=1), Hidden(shown=1), Computed(a=1), Extra(a=1), Serialized(a=1)):
        to_context(value)
    assert [model.__name__ for model in models if _dumps_as_stored[model]] == ["Plain"]


@pytest.mark.parametrize("value", VALUES)
def test_the_context_and_the_trace_form_in_one_pass_are_what_each_gives(value: Any) -> None:
    context, as_json, _ = context_and_json(value)
    assert context == to_context(value)
    assert as_json == jsonable(value)
    if isinstance(context, dict):
        assert context is not as_json  # the trace's copy and the context's are not one dict
        assert context is not getattr(value, "__dict__", None)


def test_a_run_id_is_a_version_4_uuid_in_hex() -> None:
    ids = {new_run_id() for _ in range(1000)}
    assert len(ids) == 1000
    for run_id in ids:
        parsed = uuid.UUID(hex=run_id)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, run_id)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_process_never_hands_out_its_parent_s_run_ids() -> None:
    # Ids are read ahead, many at a time: a child must not take the ones its parent will hand out next.
    new_run_id()  # the parent holds ids read ahead
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(writing, ",".join(new_run_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        theirs = set(pipe.read().decode().split(","))
    os.waitpid(child, 0)
    ours = {new_run_id() for _ in range(100)}
    assert len(theirs) == 100
    assert not ours & theirs
