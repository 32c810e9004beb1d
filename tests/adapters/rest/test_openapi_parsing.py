"""read_operations: how OpenAPI operations become tool specifications (pure, no server)."""

from __future__ import annotations

from typing import Any

from kavalai.adapters.rest._openapi import parse_spec, read_operations


def _spec(paths: dict[str, Any], schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"openapi": "3.1.0", "info": {}, "paths": paths, "components": {"schemas": schemas or {}}}


def _json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json; charset=utf-8": {"schema": schema}}}


def test_parameters_are_placed_and_unsupported_ones_left_out() -> None:
    spec = _spec(
        {
            "/things/{id}": {
                "parameters": [{"name": "id", "in": "path", "schema": {"type": "string"}, "description": "old"}],
                "put": {
                    "operationId": "putThing",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                        {"name": "dry", "in": "query", "schema": {"type": "boolean"}},
                        {"name": "id", "in": "header", "schema": {"type": "string"}},
                        {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    ],
                    "requestBody": _json_body({"type": "object", "properties": {"name": {"type": "string"}}}),
                    "responses": {"204": {"description": "done"}},
                },
            }
        }
    )
    [operation], skipped = read_operations(spec)
    assert skipped == []
    assert operation.input_schema["properties"] == {
        "id": {"type": "integer"},
        "dry": {"type": "boolean"},
        "header_id": {"type": "string"},
        "name": {"type": "string"},
    }
    assert operation.input_schema["required"] == ["id"]
    plan = operation.plan
    assert (plan.path_params, plan.query_params, plan.header_params) == (("id",), {"dry"}, (("header_id", "id"),))
    assert plan.body_object
    assert operation.output_schema is None
    request = plan.prepare({"id": 5, "dry": True, "header_id": "h", "name": "n"}, uri="rest://s.putThing")
    assert (request.path, request.query, request.headers, request.body) == (
        "/things/5",
        [("dry", "true")],
        {"id": "h"},
        {"name": "n"},
    )


def test_a_body_clashing_with_a_parameter_becomes_one_body_argument() -> None:
    body = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    spec = _spec(
        {
            "/x/{id}": {
                "post": {
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "requestBody": _json_body(body),
                    "responses": {},
                }
            }
        }
    )
    [operation], _ = read_operations(spec)
    assert operation.tool_name == "post_x_id"
    assert operation.input_schema["properties"]["body"] == body
    assert operation.input_schema["required"] == ["id", "body"]
    assert operation.plan.body_field == "body"


def test_refs_are_collected_as_defs_and_recursion_stays_finite() -> None:
    schemas = {
        "Tree": {
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}},
        },
        "Page": {"type": "object", "properties": {"tree": {"$ref": "#/components/schemas/Tree"}}},
    }
    spec = _spec(
        {
            "/t": {
                "get": {
                    "operationId": "t",
                    "responses": {
                        "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Page"}}}}
                    },
                }
            }
        },
        schemas,
    )
    [operation], _ = read_operations(spec)
    output = operation.output_schema
    assert output is not None
    assert output["$ref"] == "#/$defs/Page"
    assert output["$defs"]["Page"]["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    assert output["$defs"]["Tree"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/Tree"}


def test_names_are_made_unique_and_descriptions_merged() -> None:
    op = {"operationId": "do it!", "summary": "Do it.", "description": "Do it.\n\nAt length.", "responses": {}}
    spec = _spec({"/a": {"get": op, "post": op}, "/b": {"get": {**op, "operationId": "do_it"}}})
    first, second, third = read_operations(spec)[0]
    assert (first.tool_name, second.tool_name, third.tool_name) == ("do_it", "do_it_2", "do_it_3")
    assert first.description == "Do it.\n\nAt length."


def test_an_operation_served_at_several_paths_is_one_tool_that_knows_them_all() -> None:
    op = {"operationId": "GetClusterInfo", "summary": "Get the cluster's info.", "responses": {}}
    spec = _spec({"/api/v1/cluster-info": {"get": op}, "/cluster": {"get": op}, "/other": {"get": op}})
    [operation] = read_operations(spec)[0]
    assert operation.tool_name == "GetClusterInfo"
    assert operation.paths == ("GET /api/v1/cluster-info", "GET /cluster", "GET /other")
    assert operation.plan.path == "/api/v1/cluster-info"


def test_temporal_s_openapi_document_gives_one_tool_per_operation() -> None:
    from pathlib import Path

    import temporalio

    root = Path(temporalio.__file__).parent / "bridge/sdk-core/crates/protos/protos/api_upstream/openapi"
    spec = parse_spec((root / "openapiv3.yaml").read_text(), source="temporal")
    operations, _ = read_operations(spec)
    names = [operation.tool_name for operation in operations]
    assert len(names) == len(set(names)) == 106
    assert not [name for name in names if name.endswith("_2")]
    assert sum(len(operation.paths) for operation in operations) == 228


def test_operations_that_cannot_be_tools_are_skipped_with_a_reason() -> None:
    spec = _spec(
        {
            "/a/{id}": {"get": {"operationId": "undeclared", "responses": {}}},
            "/b": {
                "post": {
                    "operationId": "form",
                    "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {}}}},
                    "responses": {},
                }
            },
            "/c": {"get": {"operationId": "fine", "responses": {}}},
        }
    )
    operations, skipped = read_operations(spec)
    assert [op.tool_name for op in operations] == ["fine"]
    assert [(skip.label, skip.reason) for skip in skipped] == [
        ("GET /a/{id}", "the path placeholders id have no path parameter"),
        ("POST /b", "the form body is not an object of named fields"),
    ]


def test_a_form_body_of_named_fields_becomes_arguments_sent_as_a_form() -> None:
    form = {
        "type": "object",
        "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
        "required": ["channel"],
    }
    body = {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": form}}}
    spec = _spec({"/chat.postMessage": {"post": {"operationId": "post", "requestBody": body, "responses": {}}}})
    [operation], skipped = read_operations(spec)
    assert skipped == []
    assert set(operation.input_schema["properties"]) == {"channel", "text"}
    assert operation.input_schema["required"] == ["channel"]
    assert operation.plan.body_form
    assert operation.plan.body_object


def test_read_only_body_properties_are_not_arguments() -> None:
    pet = {
        "type": "object",
        "properties": {"id": {"type": "integer", "readOnly": True}, "name": {"type": "string"}},
        "required": ["id", "name"],
    }
    spec = _spec({"/pets": {"post": {"operationId": "add", "requestBody": _json_body(pet), "responses": {}}}})
    [operation], _ = read_operations(spec)
    assert operation.input_schema["properties"] == {"name": {"type": "string"}}
    assert operation.input_schema["required"] == ["name"]
