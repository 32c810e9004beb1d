"""Connections that heal, against npm's @modelcontextprotocol/server-everything (a handshake-era server; its
``toggle-subscriber-updates`` tool makes it send an update of every subscribed resource every 5 s): over stdio the
server is killed, over streamable HTTP it is killed and started again on the same port; either way the updates of
the subscribed resource arrive again once the kernel has reconnected. Counted events, generous bounded waits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests.adapters.mcp.conftest import MARK_VAR, wait_until
from tests.adapters.mcp.test_server_everything import everything_js

from kavalai import FunctionKernel, McpServer
from kavalai.adapters.mcp import McpChange

__all__ = ["everything_js"]  # the session fixture, shared with test_server_everything.py

URI = "demo://resource/static/document/architecture.md"
WAIT = 60.0  # the server's timer fires every 5 s; node starts in about a second


def _updates(changes: list[McpChange]) -> int:
    return sum(1 for c in changes if c.kind == "resource" and c.uri == URI and c.reason is None)


async def _updates_flow(kernel: FunctionKernel, changes: list[McpChange]) -> None:
    """Switch the server's simulated updates on and wait for two more updates of the subscribed resource."""
    before = _updates(changes)
    await kernel.call_tool("mcp://ev.toggle-subscriber-updates")
    await wait_until(lambda: _updates(changes) >= before + 2, WAIT)


async def test_over_stdio_a_killed_server_sends_the_updates_again_once_restarted(
    everything_js: Path, mark: str
) -> None:
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(
            name="ev",
            command="node",
            args=[str(everything_js), "stdio"],
            env={MARK_VAR: mark},
            on_change=changes.append,
        )
    )
    try:
        await kernel.subscribe_resource("ev", URI)
        await _updates_flow(kernel, changes)
        pid = kernel.get_mcp_server_state("ev").pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await wait_until(lambda: kernel.get_mcp_server_state("ev").status == "failed", WAIT)

        await _updates_flow(kernel, changes)  # the call starts the server again, subscribed again
        state = kernel.get_mcp_server_state("ev")
        assert (state.connects, state.restored, state.lost) == (2, 1, 0)
    finally:
        await kernel.close()


class _NodeHttp:
    """server-everything's streamable HTTP server as a process of this test, on a fixed free port (so that it can be
    started again where the kernel expects it)."""

    def __init__(self, entry: Path, mark: str) -> None:
        self._entry = entry
        self._env = {**os.environ, MARK_VAR: mark}
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._env["PORT"] = str(self.port)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self._process = subprocess.Popen(
            ["node", str(self._entry), "streamableHttp"],
            env=self._env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def wait_listening(self) -> None:
        with anyio.fail_after(WAIT):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", self.port)
                except OSError:
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                return

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=WAIT)
            self._process = None


@pytest.fixture
def node_http(everything_js: Path, mark: str) -> Iterator[_NodeHttp]:
    server = _NodeHttp(everything_js, mark)
    try:
        yield server
    finally:
        server.stop()


async def test_over_streamable_http_a_restarted_server_sends_the_updates_again(node_http: _NodeHttp) -> None:
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(McpServer(name="ev", url=node_http.url, on_change=changes.append))
    node_http.start()
    await node_http.wait_listening()
    try:
        await kernel.subscribe_resource("ev", URI)
        await _updates_flow(kernel, changes)
        node_http.stop()
        node_http.start()  # a new process: it knows no session
        await node_http.wait_listening()

        await _updates_flow(kernel, changes)  # refused for the unknown session, sent again on a new one
        state = kernel.get_mcp_server_state("ev")
        assert (state.connects, state.restored, state.lost) == (2, 1, 0)
    finally:
        await kernel.close()
