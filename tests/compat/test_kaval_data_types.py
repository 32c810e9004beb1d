"""Kaval.AI 1.0.7's ``test_schema_parser.py`` as behaviours of ours: its ``data_types`` dialect (every property
required unless ``required: false``, ``$ref`` to another type, arrays, enums, inline objects, string lengths, a
top-level alias) turned into the types that validate a run, and its errors at load time."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine


def _engine(data_types: dict[str, Any]) -> WorkflowEngine:
    document = {
        "name": "types",
        "data_types": {"output": {"type": "object", "properties": {"ok": {"type": "boolean"}}}, **data_types},
        "nodes": [
            {"name": "begin", "type": "start", "next": "check"},
            {"name": "check", "type": "function", "tool": "python://check", "output": "output", "next": "finish"},
            {"name": "finish", "type": "end", "output": "output"},
        ],
    }
    return WorkflowEngine.from_dict(document)


def _type(data_types: dict[str, Any], name: str) -> Any:
    data_type = _engine(data_types).workflow.types.get(name)
    assert data_type is not None
    return data_type


def _validate(data_types: dict[str, Any], name: str, value: Any) -> Any:
    return _type(data_types, name).validate(value)


ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string", "required": False}}}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "min_length": 2, "max_length": 5},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "home": {"$ref": "address"},
        "work": {"$ref": "address", "required": False},
        "mood": {"type": "string", "enum": ["glad", "sad"]},
        "level": {"type": "string", "enum": ["low", "high"], "required": False},
        "pet": {"type": "object", "properties": {"kind": {"type": "string"}}},
    },
}
TYPES = {"address": ADDRESS, "person": PERSON, "input": {"$ref": "person"}}
GOOD = {"name": "Ann", "age": 30, "tags": ["a"], "home": {"street": "Main"}, "mood": "glad", "pet": {"kind": "cat"}}


def test_the_dialect_builds_types_that_validate() -> None:
    person = _validate(TYPES, "person", GOOD)
    assert person.name == "Ann"
    assert person.home.street == "Main"
    assert person.home.zip is None  # required: false
    assert person.work is None
    assert person.level is None
    assert person.pet.kind == "cat"  # an inline object is a model of its own
    assert _validate(TYPES, "input", GOOD).age == 30  # a top-level $ref is an alias of the type


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"age": None}, "age"),  # required by default
        ({"name": "A"}, "name"),  # min_length
        ({"name": "Annabel"}, "name"),  # max_length
        ({"mood": "angry"}, "mood"),  # enum
        ({"tags": "a"}, "tags"),  # array
        ({"home": {}}, "street"),  # a $ref'd type's own required field
    ],
)
def test_values_outside_the_dialects_types_are_refused(change: dict[str, Any], field: str) -> None:
    value = {key: item for key, item in {**GOOD, **change}.items() if item is not None}
    with pytest.raises(ValidationError, match=field):
        _validate(TYPES, "person", value)


def test_the_enum_is_in_the_json_schema() -> None:
    schema = _type(TYPES, "person").annotation.model_json_schema()
    assert "'glad', 'sad'" in str(schema)


@pytest.mark.parametrize(
    ("data_types", "words"),
    [
        ({"input": {"$ref": "missing"}}, "missing"),
        ({"input": {"type": "object", "properties": {"x": {"type": "string", "enum": []}}}}, "enum"),
        ({"input": {"type": "object", "properties": {"x": {"type": "string", "colour": "red"}}}}, "colour"),
        ({"input": {"type": "object", "colour": "red", "properties": {}}}, "colour"),
    ],
)
def test_dialect_errors_fail_at_load_naming_the_culprit(data_types: dict[str, Any], words: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=f"^validation failed: .*{words}"):
        _engine(data_types)
