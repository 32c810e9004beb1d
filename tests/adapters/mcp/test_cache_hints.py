"""Cache hints on list results (2026-07-28): a tool listing kept ``ttlMs`` is listed again at the first call after
it runs out; without a hint it is kept until the server says the list changed. Against a real server whose listing
grows by one tool each time it answers."""

from __future__ import annotations

import anyio
import pytest
from tests.adapters.mcp.conftest import StdioFactory, wait_until

from kavalai import FunctionKernel, McpServer


def _server(stdio_server: StdioFactory, ttl_ms: str, protocol: str) -> McpServer:
    return stdio_server("cached", module="tests.servers.mcp_cached", protocol=protocol, env={"CACHED_TTL_MS": ttl_ms})


async def _listings(kernel: FunctionKernel) -> int:
    found = await kernel.call_tool("mcp://cached.listings", {})
    return int(found.result["result"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("protocol", ["2026-07-28", "auto"])
async def test_a_listing_past_its_ttl_is_listed_again_at_the_next_call(
    stdio_server: StdioFactory, protocol: str
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_server(stdio_server, "400", protocol))
    try:
        await kernel.connect_mcp_servers()
        assert kernel.list_tools("mcp://cached.*") == ["mcp://cached.listings", "mcp://cached.t1"]
        assert await _listings(kernel) == 1
        assert await _listings(kernel) == 1  # within the hint: the listing is kept
        await anyio.sleep(0.5)
        assert await _listings(kernel) == 1  # this call finds the hint run out, and asks for a new listing
        await wait_until(lambda: "mcp://cached.t2" in kernel.list_tools(), timeout=10)
        assert kernel.list_tools("mcp://cached.*") == ["mcp://cached.listings", "mcp://cached.t1", "mcp://cached.t2"]
        assert await _listings(kernel) == 2
        assert (await kernel.call_tool("mcp://cached.t2", {})).result == {"result": "t2"}  # type: ignore[attr-defined]
    finally:
        await kernel.close()


async def test_a_listing_without_a_hint_is_kept(stdio_server: StdioFactory) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_server(stdio_server, "0", "2026-07-28"))
    try:
        await kernel.connect_mcp_servers()
        await anyio.sleep(0.5)
        assert await _listings(kernel) == 1
        await anyio.sleep(0.3)
        assert await _listings(kernel) == 1
        assert kernel.list_tools("mcp://cached.*") == ["mcp://cached.listings", "mcp://cached.t1"]
    finally:
        await kernel.close()
