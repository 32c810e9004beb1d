"""A backend's progress on its way to a host (issue 34): ``kavalai serve`` holds a bounded number of progress
notifications for a host that does not read, however many its backend sends (``kavalai.serve._progress``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from tests.serve.test_serve import wait_until

from kavalai import FunctionKernel, McpServer
from kavalai.serve import build_mcp_server
from kavalai.serve._progress import LatestProgress

ROOT = Path(__file__).resolve().parents[2]
FLOOD = 100_000
#: Tasks the gateway may have beyond those it had before the call: the call's own, and the few the SDK's client
#: spawns for notifications read and not yet run.
SPARE_TASKS = 64

pytestmark = pytest.mark.timeout(900)  # 100,000 notifications through a real backend's stdio, under load


def _message(payload: dict[str, Any]) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **payload}, by_name=False))


async def test_a_backend_flooding_progress_to_a_host_that_does_not_read_holds_a_bounded_count(tmp_path: Path) -> None:
    """A real backend (over stdio) sends 100,000 progress notifications during a host's call; the host (the other
    end of the gateway's streams) reads nothing while it does. The gateway's tasks stay within a few of what it had
    before the call (each notification held its own task, blocked on the host: 100,000), and once the host reads
    again it gets at most the progress notification that was under way when the call ended, then the result (it got
    all 100,000 in a row)."""
    log = tmp_path / "backend.log"
    kernel = FunctionKernel()
    backend = {"command": sys.executable, "args": ["-m", "tests.servers.mcp_subscribed", str(log)], "cwd": ROOT}
    kernel.register_mcp_server(McpServer(name="subscribed", protocol="legacy", timeout=600, **backend))
    server = build_mcp_server(kernel)
    to_gateway, gateway_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    gateway_writes, from_gateway = anyio.create_memory_object_stream[SessionMessage](0)  # nothing kept: host reads
    most = 0
    try:
        async with to_gateway, gateway_reads, gateway_writes, from_gateway:
            await kernel.connect()
            with anyio.fail_after(600):
                async with anyio.create_task_group() as group:
                    group.start_soon(server.run, gateway_reads, gateway_writes, server.create_initialization_options())
                    initialize = {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "h", "version": "1"},
                    }
                    await to_gateway.send(_message({"id": 1, "method": "initialize", "params": initialize}))
                    answer = await from_gateway.receive()
                    assert isinstance(answer.message, types.JSONRPCResponse)
                    await to_gateway.send(_message({"method": "notifications/initialized"}))
                    before = len(asyncio.all_tasks())
                    call = {
                        "name": "mcp_subscribed_progress",
                        "arguments": {"count": FLOOD},
                        "_meta": {"progressToken": "p"},
                    }
                    await to_gateway.send(_message({"id": 2, "method": "tools/call", "params": call}))

                    # The host reads nothing until the backend has sent every notification and the gateway has
                    # read them all and the result (the kernel's call has ended); the gateway's tasks are counted at
                    # every turn of the loop meanwhile.
                    def sent_all() -> bool:
                        return log.is_file() and f"sent progress {FLOOD}" in log.read_text()

                    while not (sent_all() and not kernel.calls_in_flight()):
                        most = max(most, len(asyncio.all_tasks()) - before)
                        await anyio.sleep(0.001)
                    progress: list[float] = []
                    while True:
                        received = (await from_gateway.receive()).message
                        if isinstance(received, types.JSONRPCNotification):
                            assert received.method == "notifications/progress"
                            progress.append((received.params or {})["progress"])
                            continue
                        assert isinstance(received, types.JSONRPCResponse), received
                        assert received.id == 2
                        [text] = received.result["content"]
                        assert text["text"] == f"progressed {FLOOD}"
                        break
                    await to_gateway.aclose()
    finally:
        await kernel.close()
    assert most <= SPARE_TASKS, most
    assert len(progress) <= 1, progress  # at most the one under way as the call ended (the waiting one dropped)
    assert progress == sorted(progress)  # never an older one after a newer


class _SlowHost:
    """A request's session whose host takes each progress notification only when the test lets it."""

    def __init__(self) -> None:
        self.sent: list[float] = []
        self.go = anyio.Event()

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self.go.wait()
        self.sent.append(progress)


async def test_progress_while_a_send_is_under_way_keeps_only_the_newest() -> None:
    host = _SlowHost()
    progress = LatestProgress(host)
    async with anyio.create_task_group() as group:
        group.start_soon(progress.report, 1.0, 1000.0, None)
        await wait_until(lambda: progress.unsent == 1, timeout=10)
        for step in range(2, 1001):
            await progress.report(float(step), 1000.0, f"step {step}")  # returns at once: a send is under way
            assert progress.unsent == 2
        assert progress.replaced == 998
        host.go.set()
    assert host.sent == [1.0, 1000.0]
    assert progress.unsent == 0


async def test_a_call_that_ends_drops_its_waiting_progress_and_cuts_the_send() -> None:
    host = _SlowHost()
    progress = LatestProgress(host)
    async with anyio.create_task_group() as group:
        group.start_soon(progress.report, 1.0, None, None)
        await wait_until(lambda: progress.unsent == 1, timeout=10)
        await progress.report(2.0, None, None)
        progress.close()  # the call ended: the send under way is cut, the waiting one dropped
    await progress.report(3.0, None, None)  # after the end: nothing
    assert host.sent == []
    assert progress.unsent == 0
