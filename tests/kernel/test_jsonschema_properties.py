"""Property tests of the JSON Schema -> Pydantic converter over generated object schemas."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kavalai.kernel._jsonschema import model_from_json_schema, output_model_from_json_schema

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Names chosen to hit every renaming rule, mixed with arbitrary text.
AWKWARD = st.sampled_from(
    ["json", "schema", "copy", "model_config", "Config", "class", "_x", "__dict__", "a-b", "1st", "", " ", "ü", "json_"]
)
NAMES = st.one_of(AWKWARD, st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), st.text(max_size=10))

_FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
_SCALARS = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none())


@st.composite
def property_schemas(draw: st.DrawFn) -> tuple[dict[str, Any], st.SearchStrategy[Any]]:
    """A property schema of a primitive kind, and a strategy for values valid against it."""
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "null", "enum", "array", "nullable"]))
    if kind == "string":
        low = draw(st.integers(0, 3))
        return {"type": "string", "minLength": low, "description": "text"}, st.text(min_size=low, max_size=10)
    if kind == "integer":
        low = draw(st.integers(-100, 100))
        return {"type": "integer", "minimum": low, "maximum": low + 50}, st.integers(low, low + 50)
    if kind == "number":
        return {"type": "number"}, _FLOATS
    if kind == "boolean":
        return {"type": "boolean"}, st.booleans()
    if kind == "null":
        return {"type": "null"}, st.none()
    if kind == "enum":
        values = draw(st.lists(_SCALARS, min_size=1, max_size=4, unique_by=lambda v: (type(v), v)))
        return {"enum": values}, st.sampled_from(values)
    if kind == "array":
        return {"type": "array", "items": {"type": "integer"}, "maxItems": 3}, st.lists(st.integers(), max_size=3)
    return {"type": ["string", "null"]}, st.one_of(st.none(), st.text(max_size=5))


@st.composite
def object_cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """An object schema of primitive properties and one instance valid against it."""
    names = draw(st.lists(NAMES, max_size=8, unique=True))
    properties: dict[str, Any] = {}
    instance: dict[str, Any] = {}
    required = []
    for name in names:
        schema, values = draw(property_schemas())
        properties[name] = schema
        is_required = draw(st.booleans())
        if is_required:
            required.append(name)
        if is_required or draw(st.booleans()):
            instance[name] = draw(values)
    return {"type": "object", "properties": properties, "required": required}, instance


@SETTINGS
@given(object_cases())
def test_a_valid_instance_validates_and_dumps_back_equal(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, instance = case
    model = model_from_json_schema(schema, "Generated")
    dumped = model.model_validate(instance).model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert dumped == instance
    assert list(dumped) == list(instance)


@SETTINGS
@given(object_cases())
def test_the_json_schema_keeps_names_and_required(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, _ = case
    generated = model_from_json_schema(schema, "Generated").model_json_schema(by_alias=True)
    assert list(generated.get("properties", {})) == list(schema["properties"])
    assert set(generated.get("required", [])) == set(schema["required"])
    for name, prop in schema["properties"].items():
        if "description" in prop:
            assert generated["properties"][name]["description"] == prop["description"]


@SETTINGS
@given(object_cases(), st.data())
def test_a_missing_required_property_is_reported_by_its_name(
    case: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    schema, instance = case
    if not schema["required"]:
        return
    missing = data.draw(st.sampled_from(schema["required"]))
    del instance[missing]
    model = model_from_json_schema(schema, "Generated")
    with pytest.raises(ValidationError) as info:
        model.model_validate(instance)
    assert (missing,) in [error["loc"] for error in info.value.errors() if error["type"] == "missing"]


@SETTINGS
@given(object_cases(), st.text(max_size=10))
def test_an_unknown_name_is_rejected(case: tuple[dict[str, Any], dict[str, Any]], unknown: str) -> None:
    schema, instance = case
    model = model_from_json_schema(schema, "Generated")
    # A field's Python name is accepted too (populate_by_name), so it does not count as unknown.
    if unknown in schema["properties"] or unknown in model.model_fields:
        return
    with pytest.raises(ValidationError) as info:
        model.model_validate({**instance, unknown: 1})
    assert [error["type"] for error in info.value.errors()] == ["extra_forbidden"]


@SETTINGS
@given(object_cases())
def test_an_output_model_keeps_the_instance_and_added_fields(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, instance = case
    model, wrapped = output_model_from_json_schema(schema, "GeneratedOutput")
    if not schema["properties"]:
        assert wrapped
        assert model.model_validate({"result": instance}).model_dump() == {"result": instance}
        return
    assert not wrapped
    payload = {**instance, "added by a newer server": [1]}
    dumped = model.model_validate(payload).model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert dumped == payload


# -- arbitrary, possibly malformed schemas -----------------------------------------------------------------------

_KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "additionalItems", "enum", "const", "anyOf", "oneOf",
    "allOf", "not", "if", "then", "$ref", "nullable", "default", "description", "title", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "additionalProperties", "patternProperties", "examples",
]  # fmt: skip
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object", "nonsense"])
_REFS = st.sampled_from(["#", "#/$defs/A", "#/$defs/B", "#/$defs/missing", "#/properties/v", "http://x/y.json", "#x"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(width=32) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_SCHEMAS = st.recursive(
    st.booleans() | st.just({}) | _TYPES.map(lambda t: {"type": t}) | _REFS.map(lambda r: {"$ref": r}),
    lambda inner: st.dictionaries(
        st.sampled_from(_KEYWORDS),
        st.one_of(
            inner,
            _JSON,
            _TYPES,
            _REFS,
            st.lists(inner, max_size=3),
            st.lists(_TYPES, max_size=3),
            st.dictionaries(NAMES, inner, max_size=3),
        ),
        max_size=6,
    ),
    max_leaves=24,
)


@SETTINGS
@given(_SCHEMAS, _SCHEMAS, _SCHEMAS, _JSON)
def test_arbitrary_schemas_never_crash_the_build(prop: Any, a: Any, b: Any, value: Any) -> None:
    schema = {"type": "object", "properties": {"v": prop}, "$defs": {"A": a, "B": b}}
    model = model_from_json_schema(schema, "Fuzz")
    generated = model.model_json_schema()
    if "$ref" in generated:  # a model that refers to itself is drawn as a reference into $defs
        generated = generated["$defs"][generated["$ref"].rsplit("/", 1)[-1]]
    assert list(generated["properties"]) == ["v"]
    try:
        instance = model.model_validate({"v": value})
    except ValidationError:
        pass
    else:
        instance.model_dump(by_alias=True, exclude_unset=True, mode="json")
    output, wrapped = output_model_from_json_schema(prop if isinstance(prop, dict) else None, "FuzzOutput")
    assert not wrapped or list(output.model_fields) == ["result"]
    output.model_json_schema()
