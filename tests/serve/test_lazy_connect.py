"""``kavalai serve --lazy``: the first requests share one connect attempt and its failure. A real stdio server that
hangs in ``initialize`` (it counts its starts in a file) is behind the gateway; eight MCP clients' first requests
arrive at once. On main the server was started eight times one after another (the last answer after 8 x
connect_timeout)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp.client import Client

from kavalai import FunctionKernel, McpServer
from kavalai.serve import build_mcp_server

HOSTILE = Path(__file__).resolve().parents[1] / "servers" / "mcp_hostile.py"
CONNECT_TIMEOUT = 1.0


def _hanging_kernel(starts: Path) -> FunctionKernel:
    kernel = FunctionKernel()
    server = McpServer(
        name="slow",
        command=sys.executable,
        args=[str(HOSTILE), "hang"],
        env={"STARTS_FILE": str(starts)},
        connect_timeout=CONNECT_TIMEOUT,
    )
    kernel.register_mcp_server(server)
    return kernel


async def test_concurrent_first_requests_share_one_connect_attempt_and_its_failure(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    kernel = _hanging_kernel(starts)
    gateway = build_mcp_server(kernel, lazy=True)
    listed: list[int] = []
    try:
        async with Client(gateway) as client:

            async def first_request() -> None:
                listed.append(len((await client.list_tools()).tools))

            with anyio.fail_after(60):  # liveness only; the count of starts is the assertion
                async with anyio.create_task_group() as group:
                    for _ in range(8):
                        group.start_soon(first_request)
            assert listed == [0] * 8  # every request answered, without the unreachable server's tools
            assert len(starts.read_text().split()) == 1  # one attempt for all eight
            await client.list_tools()  # at once after the failure: not tried again yet
            assert len(starts.read_text().split()) == 1
    finally:
        await kernel.close()
