"""``kavalai serve`` fronting a server that misbehaves toward the gateway (hostile review of the relay, issue 42).

The backend is a real stdio process (``tests/servers/mcp_hostile.py``); the host is the official SDK's client.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
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


RELAY_HOSTILE = str(ROOT / "tests" / "servers" / "mcp_relay_hostile.py")


async def _call_relaying(mode: str, secret: str, env: dict[str, str] | None = None, **callbacks: Any) -> None:
    """Call the ``mode`` backend's tool through a gateway, as a host with ``callbacks``; ``env``: the backend's
    (by default, the secret as its ``LEAK_TOKEN``; else it reads the secret from its arguments)."""
    kernel = FunctionKernel()
    env = {"LEAK_TOKEN": secret} if env is None else env
    server = McpServer(name="x", command=sys.executable, args=[RELAY_HOSTILE, mode, secret], env=env)
    kernel.register_mcp_server(server)
    try:
        served = build_mcp_server(kernel)
        await kernel.connect()
        with anyio.fail_after(60):
            async with Client(served, mode="legacy", **callbacks) as host:
                answer = await host.call_tool("mcp_x_t0", {})
                await anyio.sleep(0.2)  # a notification sent before the answer is handed over by now
    finally:
        await kernel.close()
    assert [block.text for block in answer.content if isinstance(block, types.TextContent)] == ["fine"]


async def test_a_backends_log_message_with_a_megabyte_logger_name_is_cut_in_the_log_and_the_relay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Hostile round 9, case 2: the data of a backend's log message was cut at 10,000 characters in kavalai's log
    and the relay, its logger name not at all: a 1,000,000-character name made a 1 MB log line (and went to the
    host whole). Both are cut by the one reader of a server's log messages (``ServerLog``); masked as before."""
    from kavalai.secrets import MASK, register_secret

    secret = "relay-r9-logger-secret-5b1e"
    register_secret(secret)
    logs: list[types.LoggingMessageNotificationParams] = []

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with caplog.at_level(logging.INFO, logger="kavalai.mcp.x"):
        await _call_relaying("big-log", secret, logging_callback=log)
    [message] = logs
    assert message.logger is not None
    assert MASK in message.logger
    assert len(message.logger) < 300
    assert secret not in message.model_dump_json()
    [record] = [
        record
        for record in caplog.records
        if record.name == "kavalai.mcp.x" and "a message" in record.msg % record.args
    ]
    assert len(record.getMessage()) < 11_000
    assert secret not in record.getMessage()


async def test_a_relayed_logger_name_cut_through_a_secret_shows_no_piece_of_it() -> None:
    """Hostile round 10 (E3): the logger name was masked with the server's own secrets, cut at 200, then masked
    with the process's: a registered secret that is not the server's own (here in its arguments), across the cut,
    reached the host as its first characters."""
    from kavalai.secrets import register_secret

    secret = "relay-r10-logger-cut-secret-77"
    register_secret(secret)
    logs: list[types.LoggingMessageNotificationParams] = []

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    await _call_relaying("big-log", secret, env={"LEAK_PAD": "163", "LOGGER_CHARS": "400"}, logging_callback=log)
    [message] = logs
    assert message.logger is not None
    assert "ppp" in message.logger
    assert secret[:6] not in message.logger


async def test_a_secret_in_base64_inside_a_relayed_sampling_image_is_masked() -> None:
    """Hostile round 9, case 10 (held): the base64 of ``token=<secret>`` as a sampling request's image data reaches
    the host masked (the secret gate's encoded forms, through ``for_host``)."""
    import base64

    from kavalai.secrets import register_secret

    secret = "relay-r9-sampling-secret-0c4d"
    register_secret(secret)
    asked: list[str] = []

    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params.model_dump_json())
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="ok"), model="m")

    await _call_relaying("sampling-b64", secret, sampling_callback=sample)
    [shown] = asked
    assert base64.b64encode(f"token={secret}".encode()).decode() not in shown
    assert base64.b64encode(f"token={secret}".encode()).decode()[:8] in shown  # the message is relayed, masked
