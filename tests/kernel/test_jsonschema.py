"""The JSON Schema -> Pydantic converter: every construct it keeps, and the parts it falls back on."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Final, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kavalai.kernel._jsonschema import (
    _create,
    model_from_json_schema,
    output_model_from_json_schema,
    type_from_json_schema,
)


def _model(properties: dict[str, Any], required: list[str] | None = None, **rest: Any) -> type[BaseModel]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, **rest}
    if required is not None:
        schema["required"] = required
    return model_from_json_schema(schema, "Args")


def _accepts(model: type[BaseModel], data: dict[str, Any]) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


def _sent(instance: BaseModel) -> dict[str, Any]:
    """What an adapter sends: original names, only the fields the caller set."""
    return instance.model_dump(by_alias=True, exclude_unset=True, mode="json")


# -- primitive types and constraints -------------------------------------------------------------------------


_NESTED: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "inner": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "closed": {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    },
}


def test_undeclared_sets_what_a_schema_that_does_not_say_means_nested_too() -> None:
    model = model_from_json_schema(_NESTED, "In", undeclared="allow")
    assert _accepts(model, {"zzz": 1, "inner": {"a": 1, "b": 2}})
    assert not _accepts(model, {"closed": {"a": 1, "b": 2}})  # a schema that says is followed
    out, _ = output_model_from_json_schema(_NESTED, "Out", undeclared="forbid")
    assert not _accepts(out, {"zzz": 1})
    assert not _accepts(out, {"inner": {"a": 1, "b": 2}})
    ignoring, _ = output_model_from_json_schema(_NESTED, "Ign", undeclared="ignore")
    assert ignoring.model_validate({"zzz": 1, "inner": {"a": 1, "b": 2}}).model_dump(exclude_unset=True) == {
        "inner": {"a": 1}
    }


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "string"}, "x", 5),
        ({"type": "integer"}, 3, "three"),
        ({"type": "integer"}, "7", 1.5),
        ({"type": "number"}, 2.5, "many"),
        ({"type": "boolean"}, True, "perhaps"),
        ({"type": "null"}, None, 0),
        ({"type": "array", "items": {"type": "integer"}}, [1, 2], [1, "x"]),
        ({"type": "object"}, {"any": "thing"}, [1]),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": 1}, {"a": "x"}),
    ],
)
def test_primitive_types_validate_and_reject(schema: dict[str, Any], good: Any, bad: Any) -> None:
    model = _model({"v": schema}, ["v"])
    assert _accepts(model, {"v": good})
    assert not _accepts(model, {"v": bad})


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "string", "minLength": 2, "maxLength": 3}, "abc", "a"),
        ({"type": "string", "minLength": 2, "maxLength": 3}, "ab", "abcd"),
        ({"type": "string", "pattern": "^[a-z]+$"}, "abc", "ABC"),
        ({"type": "string", "pattern": "^[a-z]+\\d{2}$"}, "data42", "data4"),
        ({"type": "integer", "minimum": 1, "maximum": 5}, 5, 6),
        ({"type": "integer", "minimum": 1, "maximum": 5}, 1, 0),
        ({"type": "integer", "exclusiveMinimum": 1}, 2, 1),
        ({"type": "number", "exclusiveMaximum": 1.5}, 1.4, 1.5),
        ({"type": "number", "maximum": 10, "exclusiveMaximum": True}, 9.9, 10),
        ({"type": "integer", "minimum": 0, "exclusiveMinimum": True}, 1, 0),
        ({"type": "integer", "minimum": 1.5}, 2, 1),
        ({"type": "integer", "exclusiveMaximum": 2.5}, 2, 3),
        ({"type": "integer", "multipleOf": 5}, 10, 12),
        ({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}, ["a"], []),
        ({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}, ["a", "b"], ["a"] * 3),
        ({"type": "array", "items": {"type": "integer", "minimum": 0}}, [0, 1], [0, -1]),
    ],
)
def test_constraints_are_enforced(schema: dict[str, Any], good: Any, bad: Any) -> None:
    model = _model({"v": schema}, ["v"])
    assert _accepts(model, {"v": good})
    assert not _accepts(model, {"v": bad})


def test_patterns_run_in_linear_time_so_a_hostile_pattern_cannot_stall_the_loop() -> None:
    model = _model({"v": {"type": "string", "pattern": "^(a+)+$"}}, ["v"])
    # Python's backtracking `re` needs ~2**100 steps to refuse this; the linear-time engine answers at once.
    assert not _accepts(model, {"v": "a" * 100 + "!"})
    assert _accepts(model, {"v": "a" * 100_000})


def test_a_pattern_the_linear_engine_cannot_compile_is_not_enforced_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _model({"v": {"type": "string", "pattern": "^(?!tmp)\\w+$"}}, ["v"])
    assert _accepts(model, {"v": "tmpdir"})  # look-ahead: not enforced rather than run on a backtracking engine
    assert "is not enforced: the linear-time regex engine cannot compile it" in caplog.text


def test_constraints_and_format_reach_the_json_schema() -> None:
    model = _model(
        {
            "name": {"type": "string", "minLength": 1, "pattern": "^a"},
            "when": {"type": "string", "format": "date-time"},
            "n": {"type": "integer", "maximum": 9},
        }
    )
    props = model.model_json_schema()["properties"]
    assert props["name"]["minLength"] == 1
    assert props["name"]["pattern"] == "^a"
    assert props["when"]["format"] == "date-time"
    assert props["n"]["maximum"] == 9


def test_formats_stay_strings() -> None:
    model = _model({"when": {"type": "string", "format": "date-time"}, "url": {"type": "string", "format": "uri"}})
    instance = model.model_validate({"when": "2024-01-02T03:04:05Z", "url": "not a url but a string"})
    assert _sent(instance) == {"when": "2024-01-02T03:04:05Z", "url": "not a url but a string"}


# -- enum, const, unions, nullable -------------------------------------------------------------------------------


def test_enum_and_const_become_literals() -> None:
    assert type_from_json_schema({"enum": ["a", "b", 3]}, "E") == Literal["a", "b", 3]
    assert type_from_json_schema({"const": "fixed"}, "C") == Literal["fixed"]
    model = _model({"mode": {"type": "string", "enum": ["r", "w"]}, "kind": {"const": "file"}}, ["mode"])
    assert _accepts(model, {"mode": "r", "kind": "file"})
    assert not _accepts(model, {"mode": "x"})
    assert not _accepts(model, {"mode": "r", "kind": "dir"})
    assert model.model_json_schema()["properties"]["mode"]["enum"] == ["r", "w"]


def test_any_of_and_one_of_become_unions() -> None:
    model = _model(
        {
            "id": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]},
            "shape": {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "integer"}}]},
        }
    )
    assert _accepts(model, {"id": 5, "shape": True})
    assert _accepts(model, {"id": "abc", "shape": [1, 2]})
    assert not _accepts(model, {"id": "abcd"})
    assert not _accepts(model, {"shape": "maybe"})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ["string", "null"]},
        {"type": "string", "nullable": True},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"enum": ["a", "b"], "nullable": True},
    ],
)
def test_nullable_forms_accept_null(schema: dict[str, Any]) -> None:
    model = _model({"v": schema}, ["v"])
    assert _accepts(model, {"v": None})
    assert not _accepts(model, {"v": 12.5})
    assert _sent(model.model_validate({"v": None})) == {"v": None}


def test_nullable_object_schemas_stay_optional() -> None:
    schema = {"type": ["object", "null"], "properties": {"a": {"type": "integer"}}}
    record = type_from_json_schema(schema, "Rec")
    assert type(None) in get_args(record)
    output, wrapped = output_model_from_json_schema({**schema, "type": "object", "nullable": True}, "Out")
    assert wrapped
    assert _accepts(output, {"result": None})
    assert _accepts(output, {"result": {"a": 1}})
    assert not _accepts(output, {"result": {"a": "x"}})


def test_type_list_without_null_is_a_union_and_optional_fields_refuse_null() -> None:
    model = _model({"v": {"type": ["integer", "boolean"]}, "name": {"type": "string"}})
    assert _accepts(model, {"v": 3})
    assert _accepts(model, {"v": False})
    assert not _accepts(model, {"v": None})
    assert not _accepts(model, {"name": None})


# -- objects, nesting, arrays ------------------------------------------------------------------------------------


def test_nested_objects_become_named_models() -> None:
    model = model_from_json_schema(
        {
            "type": "object",
            "properties": {
                "owner": {
                    "type": "object",
                    "description": "Who owns it.",
                    "properties": {"name": {"type": "string"}, "address": {"type": "object", "properties": {}}},
                    "required": ["name"],
                }
            },
        },
        "CreateInput",
    )
    owner_type = model.model_fields["owner"].annotation
    assert isinstance(owner_type, type)
    assert issubclass(owner_type, BaseModel)
    assert owner_type.__name__ == "CreateInputOwner"
    assert owner_type.__doc__ == "Who owns it."
    assert not _accepts(model, {"owner": {}})
    assert not _accepts(model, {"owner": {"name": "x", "age": 3}})
    instance = model.model_validate({"owner": {"name": "x"}})
    assert _sent(instance) == {"owner": {"name": "x"}}


def test_array_of_objects() -> None:
    model = _model(
        {"rows": {"type": "array", "items": {"properties": {"id": {"type": "integer"}}, "required": ["id"]}}}
    )
    instance = model.model_validate({"rows": [{"id": 1}, {"id": "2"}]})
    assert _sent(instance) == {"rows": [{"id": 1}, {"id": 2}]}
    assert not _accepts(model, {"rows": [{}]})


def test_closed_prefix_items_become_a_tuple() -> None:
    pair = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2}
    assert get_origin(type_from_json_schema(pair, "Pair")) is tuple
    model = _model({"pair": pair}, ["pair"])
    assert _sent(model.model_validate({"pair": [1, "a"]})) == {"pair": [1, "a"]}
    assert not _accepts(model, {"pair": [1]})
    assert not _accepts(model, {"pair": ["a", 1]})
    draft4 = {"type": "array", "items": [{"type": "integer"}], "additionalItems": False, "minItems": 1}
    assert get_origin(type_from_json_schema(draft4, "One")) is tuple
    open_pair = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}
    assert type_from_json_schema(open_pair, "Open") == list[Any]  # shorter and longer arrays are valid too


def test_type_inferred_when_absent() -> None:
    model = _model({"obj": {"properties": {"a": {"type": "integer"}}}, "arr": {"items": {"type": "integer"}}})
    assert _accepts(model, {"obj": {"a": 1}, "arr": [1]})
    assert not _accepts(model, {"obj": {"a": "x"}})
    assert not _accepts(model, {"arr": ["x"]})


# -- $ref ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("section", ["$defs", "definitions"])
def test_local_refs_resolve(section: str) -> None:
    schema = {
        "type": "object",
        "properties": {"color": {"$ref": f"#/{section}/Color"}, "point": {"$ref": f"#/{section}/Point"}},
        section: {
            "Color": {"enum": ["red", "green"], "description": "A colour."},
            "Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
        },
    }
    model = model_from_json_schema(schema, "Paint")
    assert _accepts(model, {"color": "red", "point": {"x": 1}})
    assert not _accepts(model, {"color": "blue"})
    assert not _accepts(model, {"point": {}})
    assert model.model_json_schema()["properties"]["color"]["description"] == "A colour."


def test_refs_resolve_against_a_larger_root_document() -> None:
    spec = {
        "openapi": "3.0.0",
        "components": {
            "schemas": {
                "Pet": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "tag": {"type": "string", "nullable": True}},
                    "required": ["name"],
                }
            }
        },
    }
    body = {"type": "object", "properties": {"pet": {"$ref": "#/components/schemas/Pet"}}, "required": ["pet"]}
    model = model_from_json_schema(body, "AddPet", root=spec)
    assert _sent(model.model_validate({"pet": {"name": "rex", "tag": None}})) == {"pet": {"name": "rex", "tag": None}}
    assert not _accepts(model, {"pet": {"tag": "x"}})
    pet = type_from_json_schema({"$ref": "#/components/schemas/Pet"}, "PetRecord", root=spec)
    assert pet.__name__ == "PetRecord"
    assert pet.model_validate({"name": "rex"}).name == "rex"


def test_recursive_refs_validate_nested_data() -> None:
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "required": ["tree"],
        "$defs": {
            "Node": {
                "type": "object",
                "description": "A tree node.",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    "meta": {
                        "type": "object",
                        "properties": {"up": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                    },
                },
                "required": ["value"],
            }
        },
    }
    model = model_from_json_schema(schema, "Walk")
    data = {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}], "meta": {"up": {"value": 0}}}}
    assert _sent(model.model_validate(data)) == data
    with pytest.raises(ValidationError) as info:
        model.model_validate({"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]}})
    assert info.value.errors()[0]["loc"] == ("tree", "children", 0, "children", 0, "value")
    node_schema = model.model_json_schema()["$defs"]["Node"]
    assert node_schema["description"] == "A tree node."
    assert node_schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_mutually_recursive_refs() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/A"}},
        "definitions": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}, "n": {"type": "integer"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}, "s": {"type": "string"}}},
        },
    }
    model = model_from_json_schema(schema, "Mutual")
    data = {"a": {"b": {"a": {"n": 1, "b": {"s": "deep"}}}}}
    assert _sent(model.model_validate(data)) == data
    assert not _accepts(model, {"a": {"b": {"a": {"n": "one"}}}})


def test_a_ref_to_the_root_document_recurses() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "parent": {"$ref": "#"}}}
    model = model_from_json_schema(schema, "Person")
    data = {"name": "a", "parent": {"name": "b", "parent": {"name": "c"}}}
    assert _sent(model.model_validate(data)) == data
    assert not _accepts(model, {"parent": {"parent": {"name": 5}}})


def test_a_recursive_type_alias_falls_back_to_any() -> None:
    schema = {
        "type": "object",
        "properties": {"json": {"$ref": "#/$defs/Json"}},
        "$defs": {"Json": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/Json"}}]}},
    }
    model = model_from_json_schema(schema, "Doc")
    assert _sent(model.model_validate({"json": ["a", ["b", 3]]})) == {"json": ["a", ["b", 3]]}
    assert not _accepts(model, {"json": 5})


def test_a_ref_reused_twice_gives_one_model() -> None:
    schema = {
        "type": "object",
        "properties": {"src": {"$ref": "#/$defs/Loc"}, "dst": {"$ref": "#/$defs/Loc"}},
        "$defs": {"Loc": {"type": "object", "properties": {"path": {"type": "string"}}}},
    }
    model = model_from_json_schema(schema, "Copy")
    assert model.model_fields["src"].annotation is model.model_fields["dst"].annotation


@pytest.mark.parametrize(
    "ref",
    ["https://example.com/schemas/x.json", "other.json#/defs/X", "#/$defs/Missing", "#/$defs/Loop", "#nowhere"],
)
def test_unresolvable_refs_fall_back_to_any(ref: str) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"$ref": ref}},
        "required": ["v"],
        "$defs": {"Loop": {"$ref": "#/$defs/Loop2"}, "Loop2": {"$ref": "#/$defs/Loop"}},
    }
    model = model_from_json_schema(schema, "Refs")
    assert model.model_fields["v"].annotation is Any
    assert _accepts(model, {"v": {"anything": [1]}})
    assert not _accepts(model, {})


# -- allOf -----------------------------------------------------------------------------------------------------


def test_all_of_objects_are_merged() -> None:
    schema = {
        "type": "object",
        "properties": {
            "item": {
                "allOf": [
                    {"$ref": "#/$defs/Base"},
                    {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
                ],
                "description": "The item.",
            }
        },
        "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    }
    model = model_from_json_schema(schema, "Put")
    assert _sent(model.model_validate({"item": {"id": "a", "size": 2}})) == {"item": {"id": "a", "size": 2}}
    assert not _accepts(model, {"item": {"id": "a"}})
    assert not _accepts(model, {"item": {"size": 2}})
    assert model.model_json_schema()["$defs"]["PutItem"]["description"] == "The item."


def test_single_all_of_with_constraints() -> None:
    model = _model({"n": {"allOf": [{"type": "integer"}, {"minimum": 3}]}}, ["n"])
    assert _accepts(model, {"n": 3})
    assert not _accepts(model, {"n": 2})


def test_all_of_recursion_refers_to_the_model_instead_of_inlining_forever() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"allOf": [{"$ref": "#/$defs/Dir"}], "description": "Top directory."}},
        "$defs": {
            "Dir": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "parent": {"allOf": [{"$ref": "#/$defs/Dir"}]},
                    "self": {"allOf": [{"$ref": "#"}]},
                },
            }
        },
    }
    model = model_from_json_schema(schema, "Tree")
    data = {"root": {"name": "a", "parent": {"name": "b", "parent": {"name": "c"}}, "self": {"root": {"name": "d"}}}}
    assert _sent(model.model_validate(data)) == data
    assert not _accepts(model, {"root": {"parent": {"parent": {"name": 1}}}})


def test_top_level_union_of_objects_becomes_one_model() -> None:
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"kind": {"const": "file"}, "path": {"type": "string"}}, "required": ["kind", "path"]},
            {"properties": {"kind": {"const": "url"}, "url": {"type": "string"}}, "required": ["kind"]},
        ],
    }
    model = model_from_json_schema(schema, "Open")
    assert _sent(model.model_validate({"kind": "url", "url": "u"})) == {"kind": "url", "url": "u"}
    assert _sent(model.model_validate({"kind": "file", "path": "p"})) == {"kind": "file", "path": "p"}
    assert not _accepts(model, {"path": "p"})
    assert not _accepts(model, {"kind": "ftp"})
    assert not _accepts(model, {"kind": "url", "other": 1})
    assert model.model_json_schema()["required"] == ["kind"]


def test_a_top_level_ref_that_does_not_resolve_accepts_any_arguments() -> None:
    model = model_from_json_schema({"$ref": "https://example.com/args.json"}, "Remote")
    assert _sent(model.model_validate({"anything": [1]})) == {"anything": [1]}


# -- defaults, descriptions, titles, required -----------------------------------------------------------------


def test_required_defaults_and_unset_fields() -> None:
    model = _model(
        {
            "path": {"type": "string", "default": "ignored: required wins"},
            "limit": {"type": "integer", "default": 10},
            "recursive": {"type": "boolean"},
        },
        ["path"],
    )
    assert not _accepts(model, {})
    instance = model.model_validate({"path": "/"})
    assert instance.limit == 10  # type: ignore[attr-defined]
    assert instance.recursive is None  # type: ignore[attr-defined]
    assert _sent(instance) == {"path": "/"}
    assert _sent(model.model_validate({"path": "/", "recursive": False})) == {"path": "/", "recursive": False}
    schema = model.model_json_schema()
    assert schema["required"] == ["path"]
    assert schema["properties"]["limit"]["default"] == 10
    assert "default" not in schema["properties"]["recursive"]


def test_read_only_and_write_only_properties_are_required_one_way_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "readOnly": True},
            "password": {"type": "string", "writeOnly": True},
            "name": {"type": "string"},
        },
        "required": ["id", "password", "name"],
    }
    model = model_from_json_schema(schema, "UserIn")
    assert _accepts(model, {"password": "p", "name": "n"})
    assert not _accepts(model, {"id": 1, "name": "n"})
    output, _ = output_model_from_json_schema(schema, "UserOut")
    assert _accepts(output, {"id": 1, "name": "n"})
    assert not _accepts(output, {"password": "p", "name": "n"})


def test_descriptions_and_titles_reach_the_json_schema() -> None:
    model = model_from_json_schema(
        {
            "type": "object",
            "title": "Read arguments",
            "description": "What to read.",
            "properties": {"path": {"type": "string", "description": "The file.", "title": "File path"}},
        },
        "ReadInput",
    )
    schema = model.model_json_schema()
    assert schema["title"] == "Read arguments"
    assert schema["description"] == "What to read."
    assert schema["properties"]["path"]["description"] == "The file."
    assert schema["properties"]["path"]["title"] == "File path"


def test_a_structured_default_is_validated_into_nested_models() -> None:
    schema = {
        "type": "object",
        "properties": {
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "default": {"deep": True}}
        },
    }
    model = model_from_json_schema(schema, "Opts")
    instance = model.model_validate({})
    assert isinstance(instance.opts, BaseModel)  # type: ignore[attr-defined]
    assert instance.model_dump(mode="json") == {"opts": {"deep": True}}
    assert _sent(instance) == {}


def test_defaults_are_coerced_and_ones_that_do_not_fit_are_dropped() -> None:
    model = _model(
        {
            "name": {"type": "string", "default": None},
            "count": {"type": "integer", "default": "7"},
            "size": {"type": "integer", "default": "large"},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "default": {"deep": "perhaps"}},
            "needed": {"type": "string"},
        },
        ["needed"],
    )
    instance = model.model_validate({"needed": "x"})
    assert instance.model_dump(mode="json") == {"name": None, "count": 7, "size": None, "opts": None, "needed": "x"}
    assert _sent(instance) == {"needed": "x"}
    assert not _accepts(model, {"needed": "x", "name": 3})
    properties = model.model_json_schema()["properties"]
    assert "default" not in properties["size"]
    assert properties["count"]["default"] == "7"


# -- names that cannot be field names ------------------------------------------------------------------------


AWKWARD = ["json", "schema", "copy", "model_config", "model_fields", "Config", "class", "from", "_id", "__root__",
           "my-key", "2fa", "a b", "dict", "validate", "naïve", ""]  # fmt: skip


def test_awkward_property_names_round_trip_by_alias() -> None:
    model = _model({name: {"type": "string"} for name in AWKWARD}, ["json"])
    data = {name: f"value of {name}" for name in AWKWARD}
    instance = model.model_validate(data)
    assert _sent(instance) == data
    assert _sent(model.model_validate({"json": "only"})) == {"json": "only"}
    schema = model.model_json_schema(by_alias=True)
    assert list(schema["properties"]) == AWKWARD
    assert schema["required"] == ["json"]
    assert all(name.isidentifier() for name in model.model_fields)


def test_sanitised_names_do_not_collide_with_real_ones() -> None:
    model = _model({"my-key": {"type": "integer"}, "my_key": {"type": "string"}, "json_": {"type": "boolean"},
                    "json": {"type": "integer"}})  # fmt: skip
    data = {"my-key": 1, "my_key": "s", "json_": True, "json": 2}
    assert _sent(model.model_validate(data)) == data
    assert len(model.model_fields) == 4


def test_fields_can_be_populated_by_their_python_name() -> None:
    model = _model({"class": {"type": "string"}})
    field_name = next(iter(model.model_fields))
    assert _sent(model.model_validate({field_name: "x"})) == {"class": "x"}


def test_unknown_argument_is_rejected_even_next_to_an_alias() -> None:
    model = _model({"class": {"type": "string"}})
    assert not _accepts(model, {"klass": "x"})


# -- extra ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("additional", "extra", "accepted"),
    [
        (None, None, False),
        (False, None, False),
        (True, None, True),
        ({"type": "string"}, None, True),
        (None, "allow", True),
        (True, "forbid", False),
    ],
)
def test_extra_follows_additional_properties(additional: Any, extra: Any, accepted: bool) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    if additional is not None:
        schema["additionalProperties"] = additional
    model = model_from_json_schema(schema, "Extra", extra=extra)
    assert _accepts(model, {"a": 1, "zzz": 2}) is accepted


def test_extra_ignore_drops_unknown_names() -> None:
    model = model_from_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, "I", extra="ignore")
    assert _sent(model.model_validate({"a": 1, "b": 2})) == {"a": 1}


@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"type": "object", "properties": {}}])
def test_schemas_without_properties_give_an_empty_model(schema: dict[str, Any]) -> None:
    model = model_from_json_schema(schema, "NoArgs")
    assert model.model_fields == {}
    assert _sent(model.model_validate({})) == {}
    assert not _accepts(model, {"surprise": 1})


@pytest.mark.parametrize(
    "schema",
    [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"enum": [1, 2]}, {"anyOf": [{}, {}]}],
)
def test_non_object_schemas_are_refused_with_a_clear_message(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"'Bad'.*not an object schema \((its type|it is given by)"):
        model_from_json_schema(schema, "Bad")


# -- outputs ---------------------------------------------------------------------------------------------------


def test_object_output_schema_gives_an_open_model() -> None:
    model, wrapped = output_model_from_json_schema(
        {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}, "WeatherOutput"
    )
    assert wrapped is False
    assert model.__name__ == "WeatherOutput"
    instance = model.model_validate({"temp": "21.5", "station": "x"})
    assert instance.temp == 21.5  # type: ignore[attr-defined]
    assert instance.model_dump() == {"temp": 21.5, "station": "x"}
    with pytest.raises(ValidationError):
        model.model_validate({"station": "x"})


def test_nested_output_objects_allow_extra_unless_forbidden() -> None:
    model, _ = output_model_from_json_schema(
        {
            "type": "object",
            "properties": {
                "open": {"type": "object", "properties": {"a": {"type": "integer"}}},
                "closed": {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
            },
        },
        "Out",
    )
    assert _accepts(model, {"open": {"a": 1, "b": 2}})
    assert not _accepts(model, {"closed": {"a": 1, "b": 2}})


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "array", "items": {"type": "integer"}}, [1, "2"], ["x"]),
        ({"type": "string"}, "text", {"a": 1}),
        ({"type": "integer"}, "50", "fifty"),
        ({"type": "object"}, {"k": [1]}, "not an object"),
    ],
)
def test_other_output_schemas_are_wrapped(schema: dict[str, Any], good: Any, bad: Any) -> None:
    model, wrapped = output_model_from_json_schema(schema, "ToolOutput")
    assert wrapped is True
    assert list(model.model_fields) == ["result"]
    assert model.model_fields["result"].is_required()
    assert _accepts(model, {"result": good})
    assert not _accepts(model, {"result": bad})
    assert not _accepts(model, {})


@pytest.mark.parametrize("schema", [None, {}])
def test_missing_output_schema_wraps_any(schema: dict[str, Any] | None) -> None:
    model, wrapped = output_model_from_json_schema(schema, "ToolOutput")
    assert wrapped is True
    assert model.model_fields["result"].annotation is Any
    assert model.model_validate({"result": {"x": [1]}}).result == {"x": [1]}  # type: ignore[attr-defined]


def test_wrapped_output_keeps_the_description_and_recursive_items() -> None:
    schema = {
        "type": "array",
        "description": "The matches.",
        "items": {"$ref": "#/$defs/Hit"},
        "$defs": {
            "Hit": {"type": "object", "properties": {"sub": {"type": "array", "items": {"$ref": "#/$defs/Hit"}}}}
        },
    }
    model, wrapped = output_model_from_json_schema(schema, "FindOutput")
    assert wrapped
    assert model.model_json_schema()["properties"]["result"]["description"] == "The matches."
    data = {"result": [{"sub": [{"sub": []}], "score": 1}]}
    assert model.model_validate(data).model_dump(exclude_unset=True) == data
    assert not _accepts(model, {"result": [{"sub": [{"sub": "x"}]}]})


# -- type_from_json_schema -----------------------------------------------------------------------------------


def test_type_from_json_schema_for_data_types() -> None:
    assert type_from_json_schema({"type": "string"}, "S") is str
    assert type_from_json_schema({}, "A") is Any
    assert type_from_json_schema({"type": "array", "items": {"type": "integer"}}, "L") == list[int]
    assert (
        type_from_json_schema({"type": "object", "additionalProperties": {"type": "number"}}, "D") == dict[str, float]
    )
    union = type_from_json_schema({"type": ["integer", "null"]}, "N")
    assert set(get_args(union)) == {int, type(None)}
    record = type_from_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, "record")
    assert issubclass(record, BaseModel)
    assert record.__name__ == "Record"


# -- unsupported and malformed input never crashes -------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"not": {"type": "string"}}, "even a string"),
        ({"type": "string", "not": {"const": "x"}}, "x"),
        ({"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "integer"}}, ""),
        ({"type": "object", "patternProperties": {"^x": {"type": "integer"}}}, {"x1": "s"}),
        ({"type": "string", "format": "made-up-format"}, "abc"),
        ({"type": "string", "pattern": "[unclosed"}, "anything"),
        ({"type": "string", "minLength": "3", "maxLength": -1}, ""),
        ({"type": "integer", "minimum": "zero", "maximum": float("inf"), "multipleOf": 0.5}, -5),
        ({"type": "unknown-type"}, [1]),
        ({"type": 42}, None),
        ({"enum": [{"a": 1}, [2]]}, {"a": 1}),
        ({"enum": []}, 3),
        ({"const": {"a": 1}}, {"a": 1}),
        ({"anyOf": []}, "x"),
        ({"allOf": "not a list"}, "x"),
        ({"$ref": 7}, "x"),
        ({"type": "array", "items": True}, [1, "a"]),
        ({"type": "object", "properties": ["not", "a", "mapping"], "required": "all"}, {"k": 1}),
        ({"type": "object", "properties": {"a": True, "b": False, "c": None}}, {"a": [1]}),
        ({"dependentSchemas": {"a": {"required": ["b"]}}, "contentMediaType": "text/plain"}, 5),
    ],
)
def test_unsupported_keywords_fall_back_without_crashing(schema: dict[str, Any], value: Any) -> None:
    model = _model({"v": schema}, ["v"])
    assert _sent(model.model_validate({"v": value})) == {"v": value}
    assert model.model_json_schema()["required"] == ["v"]
    output, wrapped = output_model_from_json_schema(schema, "Out")
    assert _accepts(output, {"result": value} if wrapped else value)
    assert type_from_json_schema(schema, "T") is not None


def test_a_field_pydantic_refuses_falls_back_to_any_and_keeps_the_rest() -> None:
    fields = {
        "broken": (Annotated[str, Field(pattern="(")], Field(None, description="kept")),
        "fine": (int, Field(...)),
    }
    model = _create("Fallback", ConfigDict(extra="forbid"), "Doc.", fields)
    assert model.model_fields["broken"].annotation is Any
    assert model.model_fields["broken"].description == "kept"
    assert model.model_fields["fine"].is_required()
    assert model.model_fields["fine"].annotation is int
    assert _accepts(model, {"broken": 1, "fine": 1})
    assert not _accepts(model, {"broken": 1, "fine": "one"})
    assert not _accepts(model, {"broken": 1, "fine": 1, "other": 1})


def test_fifty_tools_of_one_server_build_independent_models() -> None:
    schema = _Branch.model_json_schema()
    models = [model_from_json_schema(schema, f"tool_{i}") for i in range(50)]
    assert len({id(model) for model in models}) == 50
    assert all(_accepts(model, {"leaves": [{"label": str(i)}]}) for i, model in enumerate(models))


# -- schemas pydantic itself writes ------------------------------------------------------------------------------


class _Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class _Leaf(BaseModel):
    label: str = Field(description="The label.")
    weight: float = 1.0


class _Branch(BaseModel):
    """A branch of the tree."""

    leaves: list[_Leaf]
    children: list[_Branch] = []
    colour: _Colour | None = None
    mode: Literal["fast", "slow"] = "fast"
    meta: dict[str, int] = {}
    pair: tuple[int, str] | None = None
    schema_: str | None = Field(default=None, alias="schema")


def test_a_schema_written_by_pydantic_round_trips() -> None:
    model = model_from_json_schema(_Branch.model_json_schema(), "Branch")
    data = {
        "leaves": [{"label": "a", "weight": 2.5}],
        "children": [{"leaves": [], "colour": "blue", "pair": [1, "x"], "children": [{"leaves": [{"label": "b"}]}]}],
        "mode": "slow",
        "meta": {"k": 1},
        "schema": "s",
    }
    assert _sent(model.model_validate(data)) == _sent(_Branch.model_validate(data))
    assert _sent(model.model_validate(data)) == data
    for bad in ({"leaves": [{}]}, {"leaves": [], "colour": "green"}, {"leaves": [], "children": [{"leaves": [1]}]}):
        assert not _accepts(model, bad)
        assert not _accepts(_Branch, bad)
    generated = model.model_json_schema()
    assert generated["$ref"] == "#/$defs/Branch"  # one model, referring to itself
    branch = generated["$defs"]["Branch"]
    assert branch["description"] == "A branch of the tree."
    assert branch["properties"]["children"]["items"] == {"$ref": "#/$defs/Branch"}
    assert generated["$defs"]["Leaf"]["properties"]["label"]["description"] == "The label."


def test_a_root_that_refers_to_itself_still_validates_arguments() -> None:
    bare = model_from_json_schema({"$ref": "#"}, "Bare")
    assert _accepts(bare, {})
    assert not _accepts(bare, {"anything": 1})
    model = model_from_json_schema(
        {"$ref": "#", "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, "SelfRef"
    )
    assert _accepts(model, {"a": 1})
    assert not _accepts(model, {"a": "x"})
    assert not _accepts(model, {})
