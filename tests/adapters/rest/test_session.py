"""One pooled session per server: created on first use, shared, closed by kernel.close(), re-created after."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from kavalai import FunctionKernel, RestServer
from kavalai.adapters.rest._session import MAX_PARSED_URLS, ServerSession
from kavalai.errors import HTTPStatusError, ServerConnectionError

ITEM = {"type": "object", "properties": {"item_id": {"type": "integer"}}, "required": ["item_id"]}


def _session(kernel: FunctionKernel, server: str = "shop") -> ServerSession:
    return kernel._rest()._servers[server]


async def test_the_session_is_created_on_first_use_and_shared(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "get", "GET", ITEM, path="/items/{item_id}")
    assert _session(shop).client_session is None  # registering sends nothing
    first = await shop.call_tool("rest://shop.get", {"item_id": 1})
    session = _session(shop).client_session
    assert isinstance(session, aiohttp.ClientSession)
    results = await asyncio.gather(*(shop.call_tool("rest://shop.get", {"item_id": i % 3 + 1}) for i in range(64)))
    assert _session(shop).client_session is session
    assert {r.result["id"] for r in results} == {1, 2, 3}  # type: ignore[attr-defined]
    assert first.result["name"] == "apple"  # type: ignore[attr-defined]


async def test_close_closes_the_session_and_the_next_call_reopens_it(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "get", "GET", ITEM, path="/items/{item_id}")
    await shop.call_tool("rest://shop.get", {"item_id": 1})
    session = _session(shop).client_session
    assert session is not None
    await shop.close()
    assert session.closed
    await shop.close()  # idempotent
    again = await shop.call_tool("rest://shop.get", {"item_id": 2})
    assert again.result["name"] == "bread"  # type: ignore[attr-defined]
    assert _session(shop).client_session is not session


async def test_servers_have_separate_sessions(kernel: FunctionKernel, shop_url: str) -> None:
    for name in ("one", "two"):
        kernel.register_rest_server(RestServer(name=name, url=shop_url))
        kernel.register_rest_tool(name, "get", "GET", ITEM, path="/items/{item_id}")
        await kernel.call_tool(f"rest://{name}.get", {"item_id": 1})
    assert _session(kernel, "one").client_session is not _session(kernel, "two").client_session


async def test_replacing_a_server_repoints_its_tools_and_closes_the_old_pool(
    kernel: FunctionKernel, shop_url: str
) -> None:
    kernel.register_rest_server(RestServer(name="s", url="http://127.0.0.1:1"))
    kernel.register_rest_tool("s", "get", "GET", ITEM, path="/items/{item_id}")
    old = _session(kernel, "s")
    kernel.register_rest_server(RestServer(name="s", url=shop_url), replace=True)
    result = await kernel.call_tool("rest://s.get", {"item_id": 3})
    assert result.result["name"] == "cheese"  # type: ignore[attr-defined]
    assert old in kernel._rest()._retired
    await kernel.close()
    assert kernel._rest()._retired == []


def test_a_kernel_can_be_used_from_two_event_loops(shop_url: str) -> None:
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="s", url=shop_url))
    kernel.register_rest_tool("s", "get", "GET", ITEM, path="/items/{item_id}")

    async def call_then_close() -> str:
        try:
            return str((await kernel.call_tool("rest://s.get", {"item_id": 1})).result["name"])  # type: ignore[attr-defined]
        finally:
            await kernel.close()

    assert asyncio.run(call_then_close()) == "apple"
    assert asyncio.run(call_then_close()) == "apple"


async def test_tools_follow_a_replaced_servers_timeout_unless_they_set_their_own(kernel: FunctionKernel) -> None:
    kernel.register_rest_server(RestServer(name="s", url="http://127.0.0.1:1", timeout=5))
    kernel.register_rest_tool("s", "default", "GET")
    kernel.register_rest_tool("s", "own", "GET", timeout=2)
    kernel.register_rest_server(RestServer(name="s", url="http://127.0.0.1:1", timeout=9), replace=True)
    assert kernel.get_tool_definition("rest://s.default").timeout == 9
    assert kernel.get_tool_definition("rest://s.own").timeout == 2


def test_a_session_never_closed_is_closed_when_its_event_loop_ends(shop_url: str) -> None:
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="s", url=shop_url))
    kernel.register_rest_tool("s", "get", "GET", ITEM, path="/items/{item_id}")

    async def call() -> aiohttp.ClientSession | None:
        await kernel.call_tool("rest://s.get", {"item_id": 1})
        return _session(kernel, "s").client_session

    pooled = asyncio.run(call())  # no kernel.close(): asyncio.run() shuts the loop down
    assert pooled is not None
    assert pooled.closed
    assert asyncio.run(call()) is not pooled  # the next loop opens its own
    asyncio.run(kernel.close())


async def test_a_parsed_url_follows_the_base_url_read_again_and_the_cache_stays_bounded(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session keeps its requests' URLs parsed by path; a reopened session reads url_env again, so a URL parsed
    # under the old base URL must not be reused.
    monkeypatch.setenv("KT_SHOP_URL", "http://127.0.0.1:1")
    kernel.register_rest_server(RestServer(name="s", url_env="KT_SHOP_URL", timeout=30))
    kernel.register_rest_tool("s", "get", "GET", ITEM, path="/items/{item_id}")
    with pytest.raises(ServerConnectionError):
        await kernel.call_tool("rest://s.get", {"item_id": 1})
    await kernel.close()
    monkeypatch.setenv("KT_SHOP_URL", shop_url)
    found = await kernel.call_tool("rest://s.get", {"item_id": 1})
    assert found.result["name"] == "apple"  # type: ignore[attr-defined]
    for item_id in range(4, 4 + MAX_PARSED_URLS + 20):  # more distinct paths than are kept
        with pytest.raises(HTTPStatusError):
            await kernel.call_tool("rest://s.get", {"item_id": item_id})
    assert len(_session(kernel, "s")._urls) == MAX_PARSED_URLS
    again = await kernel.call_tool("rest://s.get", {"item_id": 3})  # a path past the bound: parsed each time
    assert again.result["name"] == "cheese"  # type: ignore[attr-defined]
