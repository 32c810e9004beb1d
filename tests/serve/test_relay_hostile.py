"""``kavalai serve`` fronting a server that misbehaves toward the gateway (hostile review of the relay, issue 42).

The backend is a real stdio process (``tests/servers/mcp_hostile.py``); the host is the official SDK's client.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.client import Client

from kavalai import FunctionKernel, McpServer
from kavalai.serve import build_mcp_server

ROOT = Path(__file__).resolve().parents[2]


async def test_a_backend_answering_a_call_twice_gives_the_host_its_first_answer_once() -> None:
    """The backend answers every ``tools/call`` twice under one id: the host gets the first answer, once, and the
    next call is answered as its own (the second answer is dropped, never taken for the next call's)."""
    kernel = FunctionKernel()
    hostile = str(ROOT / "tests" / "servers" / "mcp_hostile.py")
    kernel.register_mcp_server(McpServer(name="twice", command=sys.executable, args=[hostile, "twice"], timeout=30))
    try:
        server = build_mcp_server(kernel)
        await kernel.connect()
        with anyio.fail_after(60):
            async with Client(server, mode="legacy") as host:
                answers = [await host.call_tool("mcp_twice_t0", {"x": "a"}) for _ in range(3)]
    finally:
        await kernel.close()
    texts = [block.text for answer in answers for block in answer.content if isinstance(block, types.TextContent)]
    assert texts == ["fine", "fine", "fine"]
    assert not any(answer.is_error for answer in answers)
