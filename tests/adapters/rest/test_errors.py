"""HTTP errors, unreachable servers and timeouts: each a FunctionKernelException naming the tool."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from kavalai import (
    FunctionKernel,
    HTTPStatusError,
    RestServer,
    ServerConnectionError,
    ToolExecutionError,
    ToolTimeoutError,
)
from kavalai.adapters.rest._session import BODY_EXCERPT_CHARS

CODE = {"type": "object", "properties": {"code": {"type": "integer"}}, "required": ["code"]}


@pytest.mark.parametrize("code", [401, 404, 500, 503])
async def test_error_statuses_raise_http_status_error(shop: FunctionKernel, code: int) -> None:
    shop.register_rest_tool("shop", "status", "GET", CODE, path="/status/{code}")
    with pytest.raises(HTTPStatusError) as info:
        await shop.call_tool("rest://shop.status", {"code": code})
    error = info.value
    assert (error.uri, error.method, error.status_code) == ("rest://shop.status", "GET", code)
    assert error.body == f'{{"error":"status {code} as asked"}}'
    assert str(error).startswith(f"rest://shop.status: GET /status/{code} answered {code} ")
    assert error.__cause__ is None  # a status is an answer, not a foreign error


async def test_the_body_excerpt_is_bounded(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "crash", "GET")
    with pytest.raises(HTTPStatusError) as info:
        await shop.call_tool("rest://shop.crash")
    assert info.value.status_code == 500
    assert info.value.body.startswith("Internal Server Error: xxx")
    assert len(info.value.body) == BODY_EXCERPT_CHARS + 3
    assert info.value.body.endswith("...")
    assert len(str(info.value)) < BODY_EXCERPT_CHARS + 200


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_unreachable_server_raises_server_connection_error(kernel: FunctionKernel) -> None:
    kernel.register_rest_server(RestServer(name="down", url=f"http://127.0.0.1:{_closed_port()}"))
    kernel.register_rest_tool("down", "ping", "GET")
    with pytest.raises(ServerConnectionError, match=r"rest://down\.ping: cannot reach REST server 'down'") as info:
        await kernel.call_tool("rest://down.ping")
    assert info.value.server == "down"
    assert info.value.uri == "rest://down.ping"
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectionError)


async def test_the_tool_timeout_applies(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "slow", "GET", timeout=0.1)
    with pytest.raises(ToolTimeoutError, match=r"rest://shop\.slow timed out after 0\.1 s") as info:
        await shop.call_tool("rest://shop.slow")
    assert info.value.timeout == 0.1


async def test_the_server_timeout_is_the_default(kernel: FunctionKernel, shop_url: str) -> None:
    kernel.register_rest_server(RestServer(name="impatient", url=shop_url, timeout=0.1))
    kernel.register_rest_tool("impatient", "slow", "GET")
    assert kernel.get_tool_definition("rest://impatient.slow").timeout == 0.1
    with pytest.raises(ToolTimeoutError):
        await kernel.call_tool("rest://impatient.slow")


async def test_a_call_timeout_overrides_the_default(shop: FunctionKernel) -> None:
    shop.register_rest_tool("shop", "slow", "GET", {"type": "object", "properties": {"delay": {"type": "number"}}})
    with pytest.raises(ToolTimeoutError):
        await shop.call_tool("rest://shop.slow", {"delay": 3}, timeout=0.1)
    # the pool survives a cancelled request
    fast = await shop.call_tool("rest://shop.slow", {"delay": 0}, timeout=10)
    assert fast.result == {"slept": 0.0}  # type: ignore[attr-defined]


async def test_a_request_aiohttp_refuses_is_an_execution_error(shop: FunctionKernel) -> None:
    # aiohttp raises a plain ValueError for a header value that would inject another header.
    await shop.register_openapi("shop", "/openapi.json", include=["search"])
    with pytest.raises(
        ToolExecutionError, match=r"rest://shop\.search: GET /search failed: ValueError: .*control"
    ) as info:
        await shop.call_tool("rest://shop.search", {"q": "x", "x-trace": "a\r\nX-Evil: 1"})
    assert info.value.uri == "rest://shop.search"
    assert type(info.value.__cause__) is ValueError
