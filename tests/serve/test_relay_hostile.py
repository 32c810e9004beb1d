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


async def test_a_backends_log_structure_holding_a_secret_in_its_keys_reaches_the_host_masked() -> None:
    """Hostile round 8, case 19: a backend's ``notifications/message`` whose ``data`` holds a secret of the
    gateway's as a dict key, a nested value and a list item: the host reads it masked everywhere (``for_host``)."""
    from kavalai.secrets import MASK, register_secret

    secret = "relay-log-key-secret-61d0"
    register_secret(secret)
    logs: list[types.LoggingMessageNotificationParams] = []
    logged = anyio.Event()

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)
        logged.set()

    kernel = FunctionKernel()
    hostile = str(ROOT / "tests" / "servers" / "mcp_hostile.py")
    server = McpServer(
        name="leaky", command=sys.executable, args=[hostile, "leaky-log"], env={"LEAK_TOKEN": secret}, timeout=30
    )
    kernel.register_mcp_server(server)
    try:
        served = build_mcp_server(kernel)
        await kernel.connect()
        with anyio.fail_after(60):
            async with Client(served, mode="legacy", logging_callback=log) as host:
                await host.call_tool("mcp_leaky_t0", {"x": "a"})
                await logged.wait()
    finally:
        await kernel.close()
    [message] = logs
    shown = message.model_dump_json()
    assert secret not in shown
    # the gateway relays a backend's structured data as its JSON text (kavalai.adapters.mcp._incoming)
    assert message.data == f'{{"key-{MASK}": {{"nested": ["item {MASK}", {{"{MASK}": "{MASK}"}}]}}}}'
