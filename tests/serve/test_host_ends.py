"""A host of ``kavalai serve`` whose session ends without unsubscribing leaves nothing subscribed behind it: the
gateway takes its subscriptions back at the backend, but those another host still holds.

Real processes throughout: ``kavalai serve`` (over streamable HTTP, or over stdio), fronting a real stdio MCP server
of the handshake era that records every ``resources/subscribe`` and ``resources/unsubscribe`` it is sent
(``tests/servers/mcp_subscribed.py``); the hosts are the official SDK's client in the handshake era (which deletes
its HTTP session when it closes), or a host writing JSON-RPC lines on the gateway's stdin and then closing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client import Client
from tests.serve.test_serve import http_server, read, serve_command, wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Where the backend records the subscription requests it is sent."""
    return tmp_path / "subscriptions.log"


@pytest.fixture
def config(tmp_path: Path, log: Path) -> Path:
    """``kavalai serve``'s configuration: the recording backend over stdio, in the handshake era."""
    return _configured(tmp_path / "tools.yaml", log)


def _configured(path: Path, log: Path, **settings: Any) -> Path:
    """Write at ``path`` a configuration of the recording backend (logging to ``log``) with ``settings``."""
    backend = {
        "name": "subscribed",
        "command": sys.executable,
        "args": ["-m", "tests.servers.mcp_subscribed", str(log)],
        "cwd": str(ROOT),
        "protocol": "legacy",
        **settings,
    }
    path.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return path


def _sent(log: Path) -> list[str]:
    return read(log).splitlines()


async def _subscribe(client: Client, uri: str) -> None:
    """``resources/subscribe``, as a handshake-era host sends it."""
    request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    await client.session.send_request(request, types.EmptyResult)


async def test_a_resource_stays_subscribed_until_the_last_http_host_holding_it_has_gone(
    config: Path, log: Path
) -> None:
    with anyio.fail_after(120):
        async with http_server(config) as (url, _):
            async with Client(url, mode="legacy") as staying:
                async with Client(url, mode="legacy") as leaving:
                    await _subscribe(leaving, "mcp://subscribed/notes://a")
                    await _subscribe(leaving, "mcp://subscribed/notes://b")
                    await _subscribe(staying, "mcp://subscribed/notes://a")
                # The leaving host's session is deleted: what it alone held is unsubscribed, notes://a is kept.
                await wait_until(lambda: "unsubscribe notes://b" in _sent(log), timeout=60)
                assert "unsubscribe notes://a" not in _sent(log)
                [note] = (await staying.read_resource("mcp://subscribed/notes://a")).contents
                assert isinstance(note, types.TextResourceContents)
            # The last host holding notes://a has gone: the backend is unsubscribed.
            await wait_until(lambda: "unsubscribe notes://a" in _sent(log), timeout=60)
    assert _sent(log) == [
        "subscribe notes://a",
        "subscribe notes://b",
        "subscribe notes://a",
        "unsubscribe notes://b",
        "unsubscribe notes://a",
    ]


async def test_a_stdio_hosts_subscriptions_are_taken_back_when_it_closes_stdin(config: Path, log: Path) -> None:
    assert await _stdio_host_leaves_subscribed(config, "mcp://subscribed/notes://a") == 0
    # The gateway unsubscribed at the backend before it closed the backend.
    assert _sent(log) == ["subscribe notes://a", "unsubscribe notes://a"]


async def _stdio_host_leaves_subscribed(config: Path, uri: str) -> int:
    """A host on the stdio gateway's stdin: initializes, subscribes to ``uri``, then closes stdin without
    unsubscribing; the gateway's exit status."""
    with anyio.fail_after(120):
        process = await anyio.open_process(serve_command(config), stderr=subprocess.DEVNULL, cwd=config.parent)
        async with process:
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            initialize = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "host", "version": "1"},
            }
            await _ask(process, lines, 1, "initialize", initialize)
            await _write(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            await _ask(process, lines, 2, "resources/subscribe", {"uri": uri})
            await process.stdin.aclose()  # the host leaves without unsubscribing
            return await process.wait()


async def _write(process: Process, message: dict[str, Any]) -> None:
    assert process.stdin is not None
    await process.stdin.send(json.dumps(message).encode() + b"\n")


async def _ask(
    process: Process, lines: BufferedByteReceiveStream, request_id: int, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Send a request on the gateway's stdin; its answer (notifications before it are passed over)."""
    await _write(process, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    while True:
        message = json.loads(await lines.receive_until(b"\n", 1 << 20))
        if message.get("id") == request_id:
            assert "result" in message, message
            result: dict[str, Any] = message["result"]
            return result


async def test_a_host_that_leaves_while_its_subscription_is_asked_has_it_taken_back(config: Path, log: Path) -> None:
    """The backend recorded the subscription but has not answered when the host's session is deleted: the gateway
    held it from before it asked, so the session's end unsubscribes it (it was left subscribed for good)."""
    with anyio.fail_after(120):
        async with http_server(config) as (url, _):
            async with Client(url, mode="legacy") as leaving, anyio.create_task_group() as tg:
                tg.start_soon(_subscribe, leaving, "mcp://subscribed/notes://c")  # never answered by the backend
                await wait_until(lambda: "subscribe notes://c" in _sent(log), timeout=60)
                tg.cancel_scope.cancel()  # the host gives up and leaves: its session is deleted
            await wait_until(lambda: "unsubscribe notes://c" in _sent(log), timeout=60)
    assert _sent(log) == ["subscribe notes://c", "unsubscribe notes://c"]


async def test_a_stdio_gateway_ends_although_the_backend_never_answers_its_unsubscribe(
    tmp_path: Path, log: Path
) -> None:
    """The host closes stdin holding ``notes://d``, whose ``resources/unsubscribe`` the backend records and never
    answers: the gateway's teardown gives up after the backend's timeout and exits 0 (nothing waits for good)."""
    config = _configured(tmp_path / "hanging.yaml", log, timeout=3)
    assert await _stdio_host_leaves_subscribed(config, "mcp://subscribed/notes://d") == 0
    assert _sent(log) == ["subscribe notes://d", "unsubscribe notes://d"]
