"""Provider tool names and schema adaptation."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, Field

from kavalai.llm.names import ToolNameMap, provider_name
from kavalai.llm.schemas import anthropic_input_schema, object_schema, openai_strict_schema

_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_readable_names_and_round_trip() -> None:
    uris = ["python://fs.ls", "mcp://files.read_file", "rest://weather-api.get.forecast"]
    names = ToolNameMap(uris)
    assert [names.to_provider(uri) for uri in uris] == [
        "python_fs_ls",
        "mcp_files_read_file",
        "rest_weather-api_get_forecast",
    ]
    assert all(names.to_uri(names.to_provider(uri)) == uri for uri in uris)
    assert names.to_uri("made_up") == "made_up"


def test_collisions_get_a_hash_suffix_independent_of_order() -> None:
    uris = ["python://a.b_c", "python://a_b.c", "python://other"]
    forward, backward = ToolNameMap(uris), ToolNameMap(reversed(uris))
    first, second = forward.to_provider(uris[0]), forward.to_provider(uris[1])
    assert first != second
    assert first.startswith("python_a_b_c_")
    assert len(first) == len("python_a_b_c_") + 8
    assert forward.to_provider("python://other") == "python_other"
    assert all(forward.to_provider(uri) == backward.to_provider(uri) for uri in uris)
    assert {forward.to_uri(first), forward.to_uri(second)} == set(uris[:2])


def test_long_and_odd_names_are_valid() -> None:
    long_uri = "mcp://server." + "x" * 100
    odd_uri = "mcp://srv.tool:with spaces?and/ünïcode"
    names = ToolNameMap([long_uri, odd_uri])
    assert all(_VALID.match(names.to_provider(uri)) for uri in (long_uri, odd_uri))
    assert names.to_uri(names.to_provider(long_uri)) == long_uri
    assert provider_name(odd_uri).startswith("mcp_srv_tool_with_spaces")


class Color(StrEnum):
    """A colour."""

    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    """Nested."""

    color: Color
    tags: list[str]


class Outer(BaseModel):
    """With a $ref to a nested model."""

    inner: Inner = Field(description="the inner part")
    items: list[Inner]


class WithOptional(BaseModel):
    """An optional field."""

    name: str
    limit: int | None = None


def test_strict_schema_for_nested_models_enums_and_refs() -> None:
    strict = openai_strict_schema(Outer.model_json_schema())
    assert strict is not None
    assert strict["additionalProperties"] is False
    assert strict["required"] == ["inner", "items"]
    assert strict["properties"]["inner"] == {"$ref": "#/$defs/Inner"}  # keywords beside $ref removed
    inner = strict["$defs"]["Inner"]
    assert inner["additionalProperties"] is False
    assert inner["required"] == ["color", "tags"]
    assert strict["$defs"]["Color"]["enum"] == ["red", "blue"]


def test_optional_fields_and_free_maps_are_not_strict() -> None:
    assert openai_strict_schema(WithOptional.model_json_schema()) is None
    free_map = {
        "type": "object",
        "properties": {"m": {"type": "object", "additionalProperties": True}},
        "required": ["m"],
    }
    assert openai_strict_schema(free_map) is None
    assert openai_strict_schema({"type": "object", "properties": {"x": {"type": "object"}}, "required": ["x"]}) is None
    assert openai_strict_schema({"type": "object", "properties": {"x": {"oneOf": []}}, "required": ["x"]}) is None


def test_source_schema_is_not_modified() -> None:
    schema = Outer.model_json_schema()
    before = repr(schema)
    openai_strict_schema(schema)
    anthropic_input_schema(schema)
    assert repr(schema) == before


def test_empty_and_non_object_schemas_become_objects() -> None:
    assert object_schema(None) == {"type": "object", "properties": {}}
    assert openai_strict_schema({}) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
        "required": [],
    }
    anthropic = anthropic_input_schema({"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {}})
    assert anthropic == {"type": "object", "properties": {}}


def test_anthropic_keeps_optional_fields_and_refs() -> None:
    schema = anthropic_input_schema(WithOptional.model_json_schema())
    assert schema["required"] == ["name"]
    assert "limit" in schema["properties"]
    assert "$defs" in anthropic_input_schema(Outer.model_json_schema())
