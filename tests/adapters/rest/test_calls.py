"""Calls through hand-registered ``rest://`` tools against the real test shop."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from kavalai import FunctionKernel, RestServer, ToolExecutionError, ToolInputError, ToolOutputError
from kavalai.adapters.rest import ApiKeyAuth, BearerAuth
from kavalai.kernel import MAX_SECONDS, deadline

ITEM_ID = {"item_id": {"type": "integer"}}
ITEM_FIELDS = {
    "name": {"type": "string"},
    "price": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}},
}
ITEM_OUT = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, **ITEM_FIELDS},
    "required": ["id", "name", "price"],
}


def obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


async def test_get_with_query_parameters(shop: FunctionKernel) -> None:
    shop.register_rest_tool(
        "shop",
        "list_items",
        "GET",
        obj({"limit": {"type": "integer"}, "tag": {"type": "string"}}),
        {"type": "array", "items": ITEM_OUT},
        path="/items",
    )
    result = await shop.call_tool("rest://shop.list_items", {"limit": "2"})
    assert [item.name for item in result.result] == ["apple", "bread"]  # type: ignore[attr-defined]
    fruit = await shop.call_tool("rest://shop.list_items", {"tag": "fruit"})
    assert [item.id for item in fruit.result] == [1]  # type: ignore[attr-defined]


async def test_get_with_a_path_parameter_and_an_object_output(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "get_item", "GET", obj(ITEM_ID, ("item_id",)), ITEM_OUT, path="/items/{item_id}")
    item = await shop.call_tool("rest://shop.get_item", {"item_id": 2})
    assert (item.id, item.name, item.price) == (2, "bread", 2.25)  # type: ignore[attr-defined]
    assert isinstance(item, shop.get_output_model("rest://shop.get_item"))  # the object schema is the model itself
    assert set(type(item).model_fields) == {"id", "name", "price", "tags"}


async def test_post_put_patch_and_delete(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "create", "POST", obj(ITEM_FIELDS, ("name", "price")), ITEM_OUT, path="/items")
    shop.register_rest_tool(
        "shop", "replace", "PUT", obj({**ITEM_ID, **ITEM_FIELDS}), ITEM_OUT, path="/items/{item_id}"
    )
    shop.register_rest_tool(
        "shop", "change", "PATCH", obj({**ITEM_ID, **ITEM_FIELDS}), ITEM_OUT, path="/items/{item_id}"
    )
    shop.register_rest_tool("shop", "delete", "DELETE", obj(ITEM_ID), None, path="/items/{item_id}")
    shop.register_rest_tool("shop", "get", "GET", obj(ITEM_ID), ITEM_OUT, path="/items/{item_id}")

    created = await shop.call_tool("rest://shop.create", {"name": "dates", "price": "3.5", "tags": ["dried"]})
    new_id = created.id  # type: ignore[attr-defined]
    assert (created.name, created.price, created.tags) == ("dates", 3.5, ["dried"])  # type: ignore[attr-defined]

    replaced = await shop.call_tool("rest://shop.replace", {"item_id": new_id, "name": "figs", "price": 4})
    assert (replaced.name, replaced.tags) == ("figs", [])  # type: ignore[attr-defined]

    changed = await shop.call_tool("rest://shop.change", {"item_id": new_id, "price": 9})
    # only the price was sent: the name stays, nothing was reset to a default
    assert (changed.name, changed.price) == ("figs", 9.0)  # type: ignore[attr-defined]

    deleted = await shop.call_tool("rest://shop.delete", {"item_id": new_id})
    assert deleted.result is None  # type: ignore[attr-defined]
    with pytest.raises(ToolExecutionError, match="404"):
        await shop.call_tool("rest://shop.get", {"item_id": new_id})


async def test_head_returns_none_and_fails_on_404(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "exists", "HEAD", obj(ITEM_ID), None, path="/items/{item_id}")
    assert (await shop.call_tool("rest://shop.exists", {"item_id": 1})).result is None  # type: ignore[attr-defined]
    with pytest.raises(ToolExecutionError, match="HEAD /items/999 answered 404"):
        await shop.call_tool("rest://shop.exists", {"item_id": 999})


async def test_path_values_are_url_encoded(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "echo", "GET", obj({"value": {"type": "string"}}), None, path="/echo/path/{value}")
    result = await shop.call_tool("rest://shop.echo", {"value": "a b/c?d#e%"})
    assert result.result == {  # type: ignore[attr-defined]
        "raw_path": "/echo/path/a%20b%2Fc%3Fd%23e%25",
        "value": "a b/c?d#e%",
    }
    with pytest.raises(
        ToolInputError, match=r"rest://shop\.echo: value: '\.\.' cannot fill the path /echo/path/\{value\}"
    ):
        await shop.call_tool("rest://shop.echo", {"value": ".."})  # would have requested /echo


async def test_arguments_left_out_are_not_sent(shop: FunctionKernel) -> None:
    schema = obj({"a": {"type": "integer", "default": 5}, "b": {"type": ["string", "null"]}, "c": {"type": "boolean"}})
    shop.register_rest_tool("shop", "query", "GET", schema, None, path="/echo/query")
    shop.register_rest_tool("shop", "body", "POST", schema, None, path="/echo/body")
    assert (await shop.call_tool("rest://shop.query", {"c": False})).result == {"c": ["false"]}  # type: ignore[attr-defined]
    body = (await shop.call_tool("rest://shop.body", {"b": None})).result  # type: ignore[attr-defined]
    assert body == {"json": {"b": None}, "content_type": "application/json", "query": {}}
    empty = (await shop.call_tool("rest://shop.body", {})).result  # type: ignore[attr-defined]
    assert empty["json"] == {}


async def test_list_arguments_repeat_the_query_key(shop: FunctionKernel) -> None:
    shop.register_rest_tool(
        "shop", "q", "GET", obj({"tag": {"type": "array", "items": {"type": "integer"}}}), None, path="/echo/query"
    )
    assert (await shop.call_tool("rest://shop.q", {"tag": [1, "2"]})).result == {"tag": ["1", "2"]}  # type: ignore[attr-defined]


async def test_default_headers_are_sent(kernel: FunctionKernel, shop_url: str) -> None:
    kernel.register_rest_server(RestServer(name="h", url=shop_url, headers={"X-Client": "kavalai-tests"}))
    kernel.register_rest_tool("h", "headers", "GET", path="/echo/headers")
    headers = (await kernel.call_tool("rest://h.headers")).result  # type: ignore[attr-defined]
    assert headers["x-client"] == "kavalai-tests"


@pytest.mark.parametrize("name", ["Content-Type", "content-type", "CONTENT-TYPE"])
async def test_a_json_body_is_sent_as_json_over_the_servers_default_content_type(
    kernel: FunctionKernel, shop_url: str, name: str
) -> None:
    """The body's own type wins over a default header (the payload carries it when no header is set)."""
    kernel.register_rest_server(RestServer(name="h", url=shop_url, headers={name: "text/plain", "X-Client": "t"}))
    kernel.register_rest_server(RestServer(name="plain", url=shop_url))
    for server in ("h", "plain"):
        kernel.register_rest_tool(server, "body", "POST", obj({"s": {"type": "string"}}), None, path="/echo/body")
        body = (await kernel.call_tool(f"rest://{server}.body", {"s": "x"})).result  # type: ignore[attr-defined]
        assert body == {"json": {"s": "x"}, "content_type": "application/json", "query": {}}


async def test_a_base_url_with_a_path_prefix(kernel: FunctionKernel, shop_url: str) -> None:
    kernel.register_rest_server(RestServer(name="p", url=f"{shop_url}/items/"))
    kernel.register_rest_tool("p", "first", "GET", path="/1")
    assert (await kernel.call_tool("rest://p.first")).result["name"] == "apple"  # type: ignore[attr-defined]


async def test_non_json_empty_and_large_responses(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "text", "GET")
    shop.register_rest_tool("shop", "empty", "GET", output_schema={"type": "null"})
    shop.register_rest_tool(
        "shop",
        "large",
        "GET",
        obj({"n": {"type": "integer"}}),
        {"type": "array", "items": {"type": "object", "properties": {"i": {"type": "integer"}}}},
    )
    assert (await shop.call_tool("rest://shop.text")).result == "plain old text"  # type: ignore[attr-defined]
    assert (await shop.call_tool("rest://shop.empty")).result is None  # type: ignore[attr-defined]
    rows = (await shop.call_tool("rest://shop.large", {"n": 100_000})).result  # type: ignore[attr-defined]
    assert len(rows) == 100_000
    assert rows[-1].i == 99_999


async def test_arguments_are_validated_before_any_request(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "get", "GET", obj(ITEM_ID, ("item_id",)), None, path="/items/{item_id}")
    with pytest.raises(ToolInputError, match=r"rest://shop\.get: item_id: Field required"):
        await shop.call_tool("rest://shop.get", {})
    with pytest.raises(ToolInputError, match="unexpected argument"):
        await shop.call_tool("rest://shop.get", {"item_id": 1, "extra": 2})


async def test_a_response_that_does_not_fit_the_output_schema(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "get", "GET", obj(ITEM_ID), {"type": "array"}, path="/items/{item_id}")
    with pytest.raises(ToolOutputError, match=r"rest://shop\.get returned"):
        await shop.call_tool("rest://shop.get", {"item_id": 1})


async def test_invalid_json_is_an_execution_error(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "bad", "GET", path="/bad-json")
    with pytest.raises(ToolExecutionError, match=r"rest://shop\.bad: GET /bad-json failed: .*not valid JSON") as info:
        await shop.call_tool("rest://shop.bad")
    assert info.value.uri == "rest://shop.bad"


async def test_unicode_and_big_numbers_survive_the_round_trip(shop: FunctionKernel) -> None:
    shop.register_rest_tool(
        "shop", "echo", "POST", obj({"s": {"type": "string"}, "n": {"type": "integer"}}), None, path="/echo/body"
    )
    sent = {"s": 'café ☕ "quoted" \\ 日本', "n": 12345678901234567890123}
    assert (await shop.call_tool("rest://shop.echo", sent)).result["json"] == sent  # type: ignore[attr-defined]


async def test_a_server_that_opts_in_hears_the_call_deadline(kernel: FunctionKernel, shop_url: str) -> None:
    kernel.register_rest_server(RestServer(name="d", url=shop_url, deadline_header="X-Request-Deadline-Ms"))
    kernel.register_rest_server(RestServer(name="quiet", url=shop_url))  # no opt-in: nothing sent
    kernel.register_rest_tool("d", "headers", "GET", path="/echo/headers")
    kernel.register_rest_tool("quiet", "headers", "GET", path="/echo/headers")
    seen = (await kernel.call_tool("rest://d.headers", timeout=5)).result  # type: ignore[attr-defined]
    assert 4000 <= int(seen["x-request-deadline-ms"]) <= 5000
    with deadline(2):  # the run around the call is the nearer deadline
        seen = (await kernel.call_tool("rest://d.headers", timeout=60)).result  # type: ignore[attr-defined]
    assert 1000 <= int(seen["x-request-deadline-ms"]) <= 2000
    unbounded = (await kernel.call_tool("rest://d.headers", timeout=None)).result  # type: ignore[attr-defined]
    assert "x-request-deadline-ms" not in unbounded
    quiet = (await kernel.call_tool("rest://quiet.headers", timeout=5)).result  # type: ignore[attr-defined]
    assert not any("deadline" in name for name in quiet)
    with pytest.raises(ValidationError):
        RestServer(name="bad", url=shop_url, deadline_header="Bad Header: x")


async def test_an_infinite_or_huge_timeout_is_clamped_not_an_overflow(kernel: FunctionKernel, shop_url: str) -> None:
    # Issue 36, finding 2: timeout=math.inf or 1e308 failed with ToolExecutionError caused by OverflowError.
    kernel.register_rest_server(RestServer(name="d", url=shop_url, deadline_header="X-Request-Deadline-Ms"))
    kernel.register_rest_tool("d", "headers", "GET", path="/echo/headers")
    for huge in (math.inf, 1e308):
        seen = (await kernel.call_tool("rest://d.headers", timeout=huge)).result  # type: ignore[attr-defined]
        assert int(seen["x-request-deadline-ms"]) > (MAX_SECONDS - 60) * 1000
    with pytest.raises(ValueError, match="got '5'"):
        await kernel.call_tool("rest://d.headers", timeout="5")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "header",
    ["Authorization", "proxy-authorization", "Cookie", "Content-Length", "Transfer-Encoding", "Host", "Connection",
     "TE", "Upgrade", "X-API-Key", "X-Auth-Token", "Idempotency-Key"],
)  # fmt: skip
def test_a_deadline_header_may_not_replace_a_credential_framing_or_hop_by_hop_header(header: str) -> None:
    # Issue 36, finding 3: "Authorization" replaced the credential with milliseconds, "Content-Length" hung.
    with pytest.raises(ValidationError, match="would replace a credential, framing or hop-by-hop header"):
        RestServer(name="bad", url="http://h", deadline_header=header)


def test_a_deadline_header_may_not_replace_one_the_server_already_sends() -> None:
    with pytest.raises(ValidationError, match="deadline_header 'X-Tenant'"):
        RestServer(name="bad", url="http://h", headers={"x-tenant": "a"}, deadline_header="X-Tenant")
    auth = ApiKeyAuth(key="k", name="X-Shop")
    with pytest.raises(ValidationError, match="deadline_header 'x-shop'"):
        RestServer(name="bad", url="http://h", auth=auth, deadline_header="x-shop")
    assert RestServer(name="ok", url="http://h", auth=auth, deadline_header="X-Deadline").deadline_header


async def test_the_deadline_header_never_touches_the_credential(kernel: FunctionKernel, shop_url: str) -> None:
    auth = BearerAuth(token="sesame")
    kernel.register_rest_server(RestServer(name="d", url=shop_url, auth=auth, deadline_header="X-Deadline-Ms"))
    kernel.register_rest_tool("d", "headers", "GET", path="/echo/headers")
    seen = (await kernel.call_tool("rest://d.headers", timeout=5)).result  # type: ignore[attr-defined]
    assert seen["authorization"] == "Bearer sesame"
    assert seen["x-deadline-ms"].isdigit()


def _header_list_spec(declared: str) -> dict[str, Any]:
    """An OpenAPI document of one operation, ``headers``, taking the header ``declared`` and answering with the
    header lines the shop received."""
    operation = {
        "operationId": "headers",
        "parameters": [{"name": declared, "in": "header", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}},
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "h", "version": "1"},
        "paths": {"/echo/header-list": {"get": operation}},
    }


@pytest.mark.parametrize("declared", ["x-deadline-ms", "X-DEADLINE-MS", "X-Deadline-Ms"])
async def test_the_call_deadline_is_sent_once_over_a_tools_own_header_of_that_name(
    kernel: FunctionKernel, shop_url: str, declared: str
) -> None:
    kernel.register_rest_server(RestServer(name="dl", url=shop_url, deadline_header="X-Deadline-Ms"))
    await kernel.register_openapi("dl", _header_list_spec(declared))
    lines = (await kernel.call_tool("rest://dl.headers", {declared: "999999999"}, timeout=5)).result  # type: ignore[attr-defined]
    sent = [value for name, value in lines if name.lower() == "x-deadline-ms"]
    assert len(sent) == 1
    assert 4000 <= int(sent[0]) <= 5000


@pytest.mark.parametrize("declared", ["idempotency-key", "IDEMPOTENCY-KEY", "Idempotency-Key"])
async def test_a_documented_idempotency_key_header_is_sent_once(
    kernel: FunctionKernel, shop_url: str, declared: str
) -> None:
    """An operation documenting the key header in any case: the caller's key is the one sent, alone (the step's key
    was added beside it under another spelling: two ``Idempotency-Key`` lines); without one, the step's."""
    kernel.register_rest_server(RestServer(name="keyed", url=shop_url))
    await kernel.register_openapi("keyed", _header_list_spec(declared))

    async def step_key(call: Any, call_next: Any) -> Any:
        call.metadata["idempotency_key"] = "the-step-key"
        return await call_next(call)

    kernel.add_middleware(step_key)
    for arguments, sent in (({declared: "the-callers-key"}, "the-callers-key"), ({}, "the-step-key")):
        lines = (await kernel.call_tool("rest://keyed.headers", arguments)).result  # type: ignore[attr-defined]
        assert [value for name, value in lines if name.lower() == "idempotency-key"] == [sent]
