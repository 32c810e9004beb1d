"""Kaval.AI 1.0's REST calls against the real test shop: ad-hoc calls by method, `[METHOD]` URIs, env-var settings."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError
from tests.servers.rest_app import BASIC_PASSWORD, BASIC_USER

from kavalai import ConfigurationError, FunctionKernel, HTTPStatusError, RestServer, ToolNotFoundError


class Found(BaseModel):
    q: str
    page: int


async def test_ad_hoc_calls_by_method_reach_server_url_slash_tool(shop: FunctionKernel) -> None:
    got = await shop.call_tool("rest://shop.search", {"q": "pear", "page": 2}, method="GET")  # query parameters
    assert got.result == {"q": "pear", "page": 2, "trace": None, "flags": []}  # type: ignore[attr-defined]
    posted = await shop.call_tool("rest://shop.items [post]", {"name": "pear", "price": 1.5, "tags": []})
    assert posted.result["name"] == "pear"  # type: ignore[attr-defined]  # a JSON body
    assert shop.list_tools() == []  # ad-hoc tools are not listed
    via_compat = await shop._call_rest_tool("shop", "items", {"tag": "fruit"})
    assert [item["name"] for item in via_compat] == ["apple"]  # the GET carried ?tag=fruit
    with pytest.raises(HTTPStatusError) as info:
        await shop.call_tool("rest://shop.search", {}, method="GET")  # q is required by the server
    assert info.value.status_code == 422
    typed = await shop._call_rest_tool("shop", "search", {"q": "a"}, output_type=Found)
    assert typed == Found(q="a", page=1)


async def test_without_a_method_an_unregistered_name_is_still_an_unknown_tool(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "search", "GET", path="/search")
    with pytest.raises(ToolNotFoundError, match="Did you mean 'rest://shop.search'"):
        await shop.call_tool("rest://shop.serch", {})
    # a registered tool named with its own method is that tool; with another method it is not found
    assert shop.get_tool_definition("rest://shop.search") is await shop.resolve_tool("rest://shop.search [GET]")
    with pytest.raises(ToolNotFoundError, match=r"'rest://shop.search \[POST\]'"):
        await shop.resolve_tool("rest://shop.search [POST]")


async def test_username_env_and_password_env_send_basic_auth_when_both_are_set(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KT_USER", BASIC_USER)
    monkeypatch.setenv("KT_PASS", BASIC_PASSWORD)
    kernel.register_rest_server(RestServer(name="api", url=shop_url, username_env="KT_USER", password_env="KT_PASS"))
    assert await kernel._call_rest_tool("api", "auth_check", {}) == {"user": BASIC_USER}
    monkeypatch.delenv("KT_PASS")  # read at every request: no password now, so no auth is sent (as in 1.0)
    with pytest.raises(HTTPStatusError) as info:
        await kernel._call_rest_tool("api", "auth_check", {})
    assert info.value.status_code == 401
    monkeypatch.setenv("KT_PASS", BASIC_PASSWORD)  # and set again, sent again, on the same session
    assert await kernel._call_rest_tool("api", "auth_check", {}) == {"user": BASIC_USER}
    with pytest.raises(ValidationError, match="both username_env and password_env"):
        RestServer(name="x", url=shop_url, username_env="KT_USER")


async def test_url_env_is_read_at_the_first_call(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KT_NO_URL", raising=False)
    kernel.register_rest_server(RestServer(name="later", url_env="KT_NO_URL"))
    with pytest.raises(ConfigurationError, match="URL for REST server 'later' not found"):
        await kernel._call_rest_tool("later", "search", {})
    monkeypatch.setenv("KT_URL", shop_url)
    kernel.register_rest_server(RestServer(name="env", url_env="KT_URL"))
    assert (await kernel._call_rest_tool("env", "search", {"q": "x"}))["q"] == "x"


@pytest.mark.parametrize("value", ["..;", "%2e%2e", "%2E%2e", "%252e%252e", ".%2e", "..\\x", "\uff0e\uff0e", "a/../b"])
async def test_dot_segment_variants_cannot_fill_a_path(shop: FunctionKernel, value: str) -> None:
    from kavalai import ToolInputError

    shop.register_rest_tool(
        "shop", "get", "GET", {"type": "object", "properties": {"item_id": {}}}, None, path="/items/{item_id}"
    )
    with pytest.raises(ToolInputError, match="cannot fill the path"):
        await shop.call_tool("rest://shop.get", {"item_id": value})


async def test_nan_and_infinity_are_refused_for_a_json_body(shop: FunctionKernel) -> None:
    from kavalai import ToolInputError

    with pytest.raises(ToolInputError, match="NaN or Infinity"):
        await shop.call_tool("rest://shop.items", {"name": "x", "price": float("nan"), "tags": []}, method="POST")
    shop.register_rest_tool(
        "shop", "create", "POST", {"type": "object", "properties": {"price": {"type": "number"}}}, None, path="/items"
    )
    with pytest.raises(ToolInputError, match="price"):
        await shop.call_tool("rest://shop.create", {"price": float("inf")})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), [1, {"x": float("nan")}]])
def test_a_body_holding_nan_or_infinity_anywhere_is_refused(value: object) -> None:
    from kavalai import ToolInputError
    from kavalai.adapters.rest._session import _json_body

    with pytest.raises(ToolInputError, match="NaN or Infinity"):
        _json_body({"v": value}, "rest://s.t", "rest://s.t")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "IN", 12.5, [1, 2], None])
def test_a_body_with_the_words_or_letters_in_strings_is_sent(value: object) -> None:
    from kavalai.adapters.rest._session import _json_body

    assert json.loads(_json_body({"v": value}, "rest://s.t", "rest://s.t")) == {"v": value}
