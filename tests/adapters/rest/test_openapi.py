"""OpenAPI import: from the real app's /openapi.json, from files and dicts, with filters and $refs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.servers.rest_app import create_app

from kavalai import (
    ConfigurationError,
    FunctionKernel,
    HTTPStatusError,
    RestServer,
    ToolInputError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from kavalai.adapters.rest._adapter import _origin


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    """The test shop's OpenAPI document, as FastAPI generates it."""
    return create_app().openapi()


async def test_import_from_the_servers_own_openapi_json(shop: FunctionKernel) -> None:
    uris = await shop.register_openapi("shop", "/openapi.json")
    assert "rest://shop.get_item_items__item_id__get" in uris
    assert "rest://shop.count_nodes" in uris
    assert "rest://shop.head_item" not in " ".join(uris)  # not in the schema
    assert sorted(uris) == shop.list_tools("rest://shop.*")

    item = await shop.call_tool("rest://shop.get_item_items__item_id__get", {"item_id": "1"})
    assert {"id", "name", "price", "tags"} <= set(type(item).model_fields)
    assert (item.id, item.name) == (1, "apple")  # type: ignore[attr-defined]
    rows = await shop.call_tool("rest://shop.list_items_items_get", {"limit": 1, "tag": "bakery"})
    assert [row.name for row in rows.result] == ["bread"]  # type: ignore[attr-defined]


async def test_descriptions_and_schemas_come_from_the_spec(shop: FunctionKernel) -> None:
    await shop.register_openapi("shop", "/openapi.json", include=["items"])
    listed = shop.get_tool_definition("rest://shop.list_items_items_get")
    assert listed.description.startswith("List items\n\nItems in id order")
    assert listed.metadata["tags"] == ["items"]
    create = shop.get_tool_definition("rest://shop.create_item_items_post")
    schema = create.get_input_schema()
    assert set(schema["properties"]) == {"name", "price", "tags"}
    assert schema["required"] == ["name", "price"]
    assert schema["properties"]["name"]["description"] == "The item's name."
    assert create.metadata["method"] == "POST"


async def test_every_method_through_imported_tools(shop: FunctionKernel) -> None:
    await shop.register_openapi("shop", "/openapi.json", include=["items"])
    created = await shop.call_tool("rest://shop.create_item_items_post", {"name": "egg", "price": 0.3})
    new_id = created.id  # type: ignore[attr-defined]
    put = await shop.call_tool(
        "rest://shop.replace_item_items__item_id__put", {"item_id": new_id, "name": "eggs", "price": 2}
    )
    assert put.name == "eggs"  # type: ignore[attr-defined]
    patched = await shop.call_tool("rest://shop.patch_item_items__item_id__patch", {"item_id": new_id, "price": 3})
    assert (patched.name, patched.price) == ("eggs", 3.0)  # type: ignore[attr-defined]
    deleted = await shop.call_tool("rest://shop.delete_item_items__item_id__delete", {"item_id": new_id})
    assert deleted.result is None  # type: ignore[attr-defined]
    with pytest.raises(HTTPStatusError) as info:
        await shop.call_tool("rest://shop.get_item_items__item_id__get", {"item_id": new_id})
    assert info.value.status_code == 404


async def test_body_price_constraint_from_the_spec_is_enforced(shop: FunctionKernel) -> None:
    await shop.register_openapi("shop", "/openapi.json", include=["create_item_items_post"])
    with pytest.raises(ToolInputError, match="price"):
        await shop.call_tool("rest://shop.create_item_items_post", {"name": "x", "price": -1})


async def test_circular_refs_array_bodies_and_header_parameters(shop: FunctionKernel) -> None:
    await shop.register_openapi("shop", "/openapi.json", include=["tree", "misc"])
    tree = {"label": "root", "children": [{"label": "a", "children": [{"label": "b"}]}, {"label": "c"}]}
    assert (await shop.call_tool("rest://shop.count_nodes", tree)).result == 4  # type: ignore[attr-defined]
    assert (await shop.call_tool("rest://shop.sum_numbers", {"body": [1, 2, 3.5]})).result == 6.5  # type: ignore[attr-defined]
    found = await shop.call_tool("rest://shop.search", {"q": "tea", "x-trace": "t-9", "flags": ["a", "b"]})
    assert found.result == {"q": "tea", "page": 1, "trace": "t-9", "flags": ["a", "b"]}  # type: ignore[attr-defined]


async def test_include_and_exclude_by_tag_and_operation_id(shop: FunctionKernel) -> None:
    uris = await shop.register_openapi(
        "shop", "/openapi.json", include=["auth", "search"], exclude=["auth_basic_auth_basic_get"]
    )
    names = {uri.removeprefix("rest://shop.") for uri in uris}
    assert "search" in names
    assert "auth_bearer_auth_bearer_get" in names
    assert "auth_basic_auth_basic_get" not in names
    assert not any(name.startswith("get_item") for name in names)


async def test_import_from_json_and_yaml_files(shop: FunctionKernel, spec: dict[str, Any], tmp_path: Path) -> None:
    json_file = tmp_path / "shop.json"
    json_file.write_text(json.dumps(spec))
    yaml_file = tmp_path / "shop.yaml"
    yaml_file.write_text(yaml.safe_dump(spec))
    from_json = await shop.register_openapi("shop", str(json_file), include=["items"])
    from_yaml = await shop.register_openapi("shop", yaml_file, include=["items"], replace=True)
    assert from_json == from_yaml
    item = await shop.call_tool("rest://shop.get_item_items__item_id__get", {"item_id": 3})
    assert item.name == "cheese"  # type: ignore[attr-defined]


async def test_duplicates_register_nothing_unless_replacing(shop: FunctionKernel, spec: dict[str, Any]) -> None:
    shop.register_rest_tool("shop", "search", "GET")
    before = shop.list_tools()
    with pytest.raises(ToolRegistrationError, match=r"already registered at rest://shop\.search.*replace=True"):
        await shop.register_openapi("shop", spec)
    assert shop.list_tools() == before
    await shop.register_openapi("shop", spec, include=["search"], replace=True)
    assert shop.get_tool_definition("rest://shop.search").metadata["operation_id"] == "search"


def _spec(paths: dict[str, Any], components: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, "components": components or {}}


async def test_operations_without_ids_get_method_and_path_names(shop: FunctionKernel) -> None:
    spec = _spec(
        {
            "/items/{item_id}": {
                "parameters": [{"$ref": "#/components/parameters/ItemId"}],
                "get": {"responses": {"200": {"$ref": "#/components/responses/Item"}}},
            }
        },
        {
            "parameters": {
                "ItemId": {"name": "item_id", "in": "path", "required": True, "schema": {"type": "integer"}}
            },
            "responses": {
                "Item": {
                    "description": "ok",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}},
                }
            },
            "schemas": {
                "Item": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string", "nullable": True}},
                    "required": ["id"],
                }
            },
        },
    )
    assert await shop.register_openapi("shop", spec) == ["rest://shop.get_items_item_id"]
    definition = shop.get_tool_definition("rest://shop.get_items_item_id")
    assert definition.description == "GET /items/{item_id}"
    assert definition.get_input_schema()["required"] == ["item_id"]
    item = await shop.call_tool("rest://shop.get_items_item_id", {"item_id": 2})
    assert (item.id, item.name) == (2, "bread")  # type: ignore[attr-defined]


async def test_non_json_bodies_are_skipped_and_reported(shop: FunctionKernel, caplog: pytest.LogCaptureFixture) -> None:
    spec = _spec(
        {
            "/upload": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}},
                    "responses": {"204": {"description": "done"}},
                }
            },
            "/text": {"get": {"operationId": "text", "responses": {"200": {"description": "text"}}}},
        }
    )
    with caplog.at_level(logging.WARNING, logger="kavalai.rest"):
        uris = await shop.register_openapi("shop", spec)
    assert uris == ["rest://shop.text"]
    assert "skipped POST /upload: the request body is neither JSON nor a form (multipart/form-data)" in caplog.text
    assert (await shop.call_tool("rest://shop.text")).result == "plain old text"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"swagger": "2.0", "paths": {}}, "declares swagger 2.0; only OpenAPI 3.x"),
        ([1, 2], "takes a dict, a file path or a URL path, not list"),
        (
            _spec({"/x": {"get": {"parameters": [{"$ref": "other.yaml#/P"}], "responses": {}}}}),
            r"GET /x: the \$ref 'other.yaml#/P' points outside the document",
        ),
        (
            _spec({"/x": {"get": {"parameters": [{"$ref": "#/components/parameters/Nope"}], "responses": {}}}}),
            "does not resolve",
        ),
        ("no-such-file.yaml", "is not a file, and not a URL path"),
    ],
)
async def test_bad_specs_are_configuration_errors(shop: FunctionKernel, spec: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        await shop.register_openapi("shop", spec)


async def test_a_spec_url_that_fails_raises_the_http_error(shop: FunctionKernel) -> None:
    with pytest.raises(HTTPStatusError, match="REST server 'shop': GET /missing.json answered 404"):
        await shop.register_openapi("shop", "/missing.json")


async def test_a_broken_spec_file_names_the_file(shop: FunctionKernel, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("openapi: [unclosed")
    with pytest.raises(ConfigurationError, match="broken.yaml.* is not valid YAML"):
        await shop.register_openapi("shop", broken)


async def test_a_full_spec_url_on_the_server_is_fetched(shop: FunctionKernel, shop_url: str) -> None:
    uris = await shop.register_openapi("shop", f"{shop_url}/openapi.json", include=["search"])
    assert uris == ["rest://shop.search"]


async def test_credentials_are_not_sent_to_another_origin(shop: FunctionKernel) -> None:
    with pytest.raises(ConfigurationError, match="is not on REST server 'shop'; its credentials"):
        await shop.register_openapi("shop", "http://127.0.0.2:1/openapi.json")


def test_a_default_port_written_out_is_the_same_origin() -> None:
    assert _origin("HTTP://Example.org/api") == _origin("http://example.org:80/openapi.json")
    assert _origin("https://example.org") == _origin("https://example.org:443/x")
    assert _origin("https://example.org") != _origin("http://example.org")
    assert _origin("http://example.org") != _origin("http://example.org:8080")


async def test_a_filter_naming_nothing_in_the_spec_is_caught(shop: FunctionKernel) -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"server 'shop': include/exclude list 'itemz' \(did you mean 'items'\?\), not an operationId or tag",
    ):
        await shop.register_openapi("shop", "/openapi.json", include=["itemz"])
    assert shop.list_tools() == []


async def test_fetching_the_spec_is_bounded_by_the_server_timeout(kernel: FunctionKernel, shop_url: str) -> None:
    kernel.register_rest_server(RestServer(name="slow", url=shop_url, timeout=0.2))
    with pytest.raises(
        ToolTimeoutError, match=r"REST server 'slow': fetching the OpenAPI spec '/slow' timed out"
    ) as info:
        await kernel.register_openapi("slow", "/slow")
    assert info.value.timeout == 0.2
    assert kernel.list_tools() == []


async def test_a_header_parameter_passed_as_none_is_not_sent(shop: FunctionKernel) -> None:
    await shop.register_openapi("shop", "/openapi.json", include=["search"])
    found = await shop.call_tool("rest://shop.search", {"q": "tea", "x-trace": None})
    assert found.result["trace"] is None  # type: ignore[attr-defined]


async def test_an_optional_request_body_is_only_sent_with_content(shop: FunctionKernel) -> None:
    note = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
    operation = {
        "operationId": "echo",
        "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
        "requestBody": {"required": False, "content": {"application/json": {"schema": note}}},
        "responses": {"200": {"description": "the request as received"}},
    }
    await shop.register_openapi("shop", _spec({"/echo/body": {"post": operation}}))
    bare = (await shop.call_tool("rest://shop.echo", {"q": "1"})).result  # type: ignore[attr-defined]
    assert (bare["json"], bare["query"]) == (None, {"q": "1"})  # no body at all, not an empty object
    full = (await shop.call_tool("rest://shop.echo", {"note": "hi"})).result  # type: ignore[attr-defined]
    assert full == {"json": {"note": "hi"}, "content_type": "application/json", "query": {}}


async def test_each_schema_carries_only_the_defs_it_uses(shop: FunctionKernel) -> None:
    await shop.register_openapi("shop", "/openapi.json", include=["create_item_items_post", "count_nodes"])
    create = shop.get_tool_definition("rest://shop.create_item_items_post")
    assert "$defs" not in create.get_input_schema()  # the ItemIn body is inlined as arguments
    assert set(create.get_output_schema()["$defs"]) == {"Item"}
    count = shop.get_tool_definition("rest://shop.count_nodes")
    assert set(count.get_input_schema()["$defs"]) == {"Node"}
    assert "$defs" not in count.get_output_schema()


async def test_a_malformed_operation_is_a_configuration_error_naming_it(shop: FunctionKernel) -> None:
    spec = _spec({"/x": {"get": {"operationId": "x", "tags": "not-a-list", "responses": ["200"]}}})
    with pytest.raises(ConfigurationError, match=r"OpenAPI operation GET /x is malformed \(TypeError: "):
        await shop.register_openapi("shop", spec)


async def test_a_filter_given_as_a_string_is_caught(shop: FunctionKernel) -> None:
    with pytest.raises(ConfigurationError, match=r"include takes a list .* did you mean include=\['items'\]\?"):
        await shop.register_openapi("shop", "/openapi.json", include="items")  # type: ignore[arg-type]


async def test_query_lists_follow_the_explode_setting(shop: FunctionKernel) -> None:
    strings = {"type": "array", "items": {"type": "string"}}
    operation = {
        "operationId": "echo",
        "parameters": [
            {"name": "joined", "in": "query", "explode": False, "schema": strings},
            {"name": "repeated", "in": "query", "schema": strings},
        ],
        "responses": {"200": {"description": "the query as received"}},
    }
    await shop.register_openapi("shop", _spec({"/echo/query": {"get": operation}}))
    echoed = await shop.call_tool("rest://shop.echo", {"joined": ["a", "b"], "repeated": ["c", "d"]})
    assert echoed.result == {"joined": ["a,b"], "repeated": ["c", "d"]}  # type: ignore[attr-defined]


async def test_a_form_body_reaches_the_server_form_encoded(shop: FunctionKernel) -> None:
    form = {
        "type": "object",
        "properties": {
            "channel": {"type": "string"},
            "unfurl": {"type": "boolean"},
            "users": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "properties": {"k": {"type": "integer"}}},
            "note": {"type": "string"},
        },
        "required": ["channel"],
    }
    body = {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": form}}}
    post = {"operationId": "post_form", "requestBody": body, "responses": {"200": {"description": "echo"}}}
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/echo/form": {"post": post}}}
    [uri] = await shop.register_openapi("shop", spec)
    arguments = {"channel": "#général & co", "unfurl": False, "users": ["a", "b"], "meta": {"k": 1}}
    echoed = (await shop.call_tool(uri, arguments)).result  # type: ignore[attr-defined]
    assert echoed["content_type"] == "application/x-www-form-urlencoded"
    assert echoed["form"] == [
        ["channel", "#général & co"],
        ["unfurl", "false"],
        ["users", "a"],
        ["users", "b"],
        ["meta", '{"k":1}'],
    ]  # the unset `note` is not sent
