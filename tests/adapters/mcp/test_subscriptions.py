"""2026-07-28 era: ``subscribe_resource`` and ``unsubscribe_resource`` return once the change is in force (the
``subscriptions/listen`` stream with the new filter is open), so an update sent right after the await is told (or,
after unsubscribing, is not); the server's state lists the subscriptions in force."""

from __future__ import annotations

import anyio
from tests.adapters.mcp.conftest import StdioFactory, wait_until

from kavalai import FunctionKernel
from kavalai.adapters.mcp import McpChange

ROUNDS = 20


async def test_an_update_sent_at_once_after_subscribing_arrives_and_after_unsubscribing_does_not(
    stdio_server: StdioFactory,
) -> None:
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    server = stdio_server("upd", module="tests.servers.mcp_updates", protocol="2026-07-28", on_change=changes.append)
    kernel.register_mcp_server(server)
    keep = "notes://keep"

    def told(uri: str) -> int:
        return changes.count(McpChange(server="upd", kind="resource", uri=uri))

    try:
        with anyio.fail_after(120):
            await kernel.subscribe_resource("upd", keep)
            for i in range(ROUNDS):
                uri = f"notes://n{i}"
                await kernel.subscribe_resource("upd", uri)
                assert kernel.get_mcp_server_state("upd").subscriptions == tuple(sorted((keep, uri)))
                await kernel.call_tool("mcp://upd.touch", {"uri": uri})
                await wait_until(lambda uri=uri: told(uri) == 1)  # type: ignore[misc]
                await kernel.unsubscribe_resource("upd", uri)
                assert kernel.get_mcp_server_state("upd").subscriptions == (keep,)
                await kernel.call_tool("mcp://upd.touch", {"uri": uri})
                # The stream delivers in order: once the next update of `keep` is told, one of `uri` would have been.
                await kernel.call_tool("mcp://upd.touch", {"uri": keep})
                await wait_until(lambda i=i: told(keep) == i + 1)  # type: ignore[misc]
                assert told(uri) == 1, f"round {i}: an update after unsubscribing arrived"
    finally:
        await kernel.close()
