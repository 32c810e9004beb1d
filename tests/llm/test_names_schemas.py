"""Provider tool names and schema adaptation."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, Field

from kavalai.llm.names import ToolNameMap, provider_name
from kavalai.llm.schemas import anthropic_input_schema, anthropic_output_schema, object_schema, openai_strict_schema

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


def test_made_up_names_in_the_history_do_not_rename_offered_tools() -> None:
    offered = ["python://foo", "python://a.b_c"]
    alone = ToolNameMap(offered)
    # The model once called "python.foo" (not a tool); it stays in the history of later requests.
    with_history = ToolNameMap(offered, ["python.foo", "python://a.b_c", "made_up"])
    assert [with_history.to_provider(uri) for uri in offered] == [alone.to_provider(uri) for uri in offered]
    assert with_history.to_provider("python://foo") == "python_foo"
    assert with_history.to_uri("python_foo") == "python://foo"
    assert with_history.to_provider("made_up") == "made_up"
    assert with_history.to_uri("made_up") == "made_up"


def test_a_hashed_name_never_equals_another_tools_name() -> None:
    # python://x and python://x. share the readable name python_x, so both get a hash suffix; a third URI is
    # crafted to be readable as exactly the hashed name of the first.
    hashed = ToolNameMap(["python://x", "python://x."]).to_provider("python://x")
    crafted = "python://" + hashed.removeprefix("python_")
    names = ToolNameMap(["python://x", "python://x.", crafted])
    provider_names = [names.to_provider(uri) for uri in ("python://x", "python://x.", crafted)]
    assert len(set(provider_names)) == 3
    assert all(_VALID.match(name) for name in provider_names)
    assert all(names.to_uri(names.to_provider(uri)) == uri for uri in ("python://x", "python://x.", crafted))


def test_strict_mode_refuses_formats_and_keywords_it_does_not_support() -> None:
    def schema(prop: dict[str, object]) -> dict[str, object]:
        return {"type": "object", "properties": {"x": prop}, "required": ["x"]}

    assert openai_strict_schema(schema({"type": "string", "format": "date-time"})) is not None
    assert openai_strict_schema(schema({"type": "string", "format": "uri"})) is None
    assert openai_strict_schema(schema({"type": "string", "minLength": 1})) is None
    assert openai_strict_schema(schema({"type": "integer", "minimum": 0})) is not None
    nested_optional = schema({"type": "object", "properties": {"y": {"type": "integer"}}})
    assert openai_strict_schema(nested_optional) is None  # y is optional in the nested object


class Bounded(BaseModel):
    """A numeric bound and an optional field."""

    count: int = Field(ge=0)
    note: str | None = None


def test_anthropic_output_schema_keeps_optional_fields_but_not_bounds() -> None:
    schema = anthropic_output_schema(WithOptional.model_json_schema())
    assert schema is not None
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert "default" not in schema["properties"]["limit"]
    assert anthropic_output_schema(Bounded.model_json_schema()) is None
    nested = anthropic_output_schema(Outer.model_json_schema())
    assert nested is not None
    assert nested["$defs"]["Inner"]["additionalProperties"] is False
    assert anthropic_output_schema({"type": "object", "properties": {"x": {"type": "array", "minItems": 2}}}) is None
