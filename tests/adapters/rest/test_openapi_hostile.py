"""Registration records configuration (dict and file specs register at once, URL specs when the server connects),
and hostile OpenAPI documents are refused: paths that leave the server, alias bombs, oversize files, deep nesting."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from kavalai import ConfigurationError, FunctionKernel, RestServer

SPEC = {
    "openapi": "3.1.0",
    "info": {"title": "t", "version": "1"},
    "paths": {"/search": {"get": {"operationId": "search", "parameters": [{"name": "q", "in": "query"}]}}},
}


def test_a_dict_spec_registers_at_once_without_await(shop: FunctionKernel) -> None:
    uris = shop.register_openapi("shop", SPEC)
    assert uris == ["rest://shop.search"]
    assert shop.list_tools() == ["rest://shop.search"]


async def test_a_spec_at_a_url_is_fetched_when_the_server_connects(shop: FunctionKernel) -> None:
    recorded = shop.register_openapi("shop", "/openapi.json", include=["search"])
    assert recorded == []  # recorded, not fetched
    assert shop.list_tools() == []
    described = await shop.get_tool_descriptions()  # a listing connects, as for an MCP server
    assert [d["name"] for d in described] == ["rest://shop.search"]
    assert recorded == ["rest://shop.search"]
    assert await recorded == ["rest://shop.search"]  # awaiting an import that is done gives it again


async def test_a_call_of_a_tool_of_a_pending_spec_imports_it_first(shop: FunctionKernel) -> None:
    shop.register_openapi("shop", "/openapi.json", include=["search"])
    result = await shop.call_tool("rest://shop.search", {"q": "x"})
    assert result.result["q"] == "x"  # type: ignore[attr-defined]


async def test_a_failing_url_spec_is_a_connection_error_naming_the_server(shop: FunctionKernel) -> None:
    shop.register_openapi("shop", "/missing.json")
    with pytest.raises(Exception, match="REST server 'shop'") as info:
        await shop.connect()
    assert "404" in str(info.value)


@pytest.mark.parametrize(
    "path", ["https://evil.example/steal", "//evil.example/steal", "http:/x", "steal", "/\\\\evil.example/x"]
)
def test_a_path_that_is_not_on_the_server_is_refused_naming_the_operation(shop: FunctionKernel, path: str) -> None:
    spec = {**SPEC, "paths": {path: {"get": {"operationId": "leak"}}}}
    with pytest.raises(ConfigurationError, match=r"not a path on the server.*operations: leak|operations: leak"):
        shop.register_openapi("shop", spec)
    assert shop.list_tools() == []


def test_a_yaml_alias_bomb_is_refused_at_once(shop: FunctionKernel, tmp_path: Path) -> None:
    lines = ["openapi: 3.0.0", 'a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\npaths: {}\n")
    assert bomb.stat().st_size < 1024
    with pytest.raises(ConfigurationError, match="billion laughs"):  # refused before walking its 10**10 nodes
        shop.register_openapi("shop", bomb)


def test_an_oversize_or_deeply_nested_spec_file_is_refused(shop: FunctionKernel, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"openapi": "3.0.0", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigurationError, match="nested too deeply"):
        shop.register_openapi("shop", deep)
    big = tmp_path / "big.json"
    with big.open("w") as f:
        f.write('{"openapi": "3.0.0", "pad": "')
        f.write("x" * (33 * 1024 * 1024))
        f.write('"}')
    with pytest.raises(ConfigurationError, match="over the limit of 33,554,432 bytes"):
        shop.register_openapi("shop", big)


async def test_the_server_variable_is_read_when_the_spec_is_fetched(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KT_SPEC_URL", raising=False)
    kernel.register_rest_server(RestServer(name="later", url_env="KT_SPEC_URL"))
    pending = kernel.register_openapi("later", "/openapi.json", include=["search"])
    monkeypatch.setenv("KT_SPEC_URL", shop_url)
    assert await pending == ["rest://later.search"]


def test_aliased_schemas_are_copied_and_built_once_not_once_per_path(shop: FunctionKernel, tmp_path: Path) -> None:
    """15 nested aliases, well under the node limit: copied or built per path, this took 42 s."""
    depth = 15
    lines = ["openapi: 3.0.0", "info: {title: t, version: '1'}", "x-shapes:"]
    lines.append("  s0: &s0 {type: object, properties: {v: {type: string}}}")
    lines += [
        f"  s{i}: &s{i} {{type: object, properties: {{a: *s{i - 1}, b: *s{i - 1}}}}}" for i in range(1, depth + 1)
    ]
    lines += [
        "paths:",
        "  /deep:",
        "    post:",
        "      operationId: deep",
        f"      requestBody: {{content: {{application/json: {{schema: *s{depth}}}}}}}",
        "      responses: {'200': {description: ok}}",
    ]
    spec = tmp_path / "aliased.yaml"
    spec.write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        shop.register_openapi("shop", spec)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    print(f"peak while importing 2**15 aliased paths: {peak:.1f} MiB")
    assert peak < 5  # one copy per shared schema; a copy per path (2**16 nodes of dicts) is tens of MiB
    fields = shop.get_input_model("rest://shop.deep").model_fields
    assert fields["a"].annotation is fields["b"].annotation  # the shared schema became one shared model
