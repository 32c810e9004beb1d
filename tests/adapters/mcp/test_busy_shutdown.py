"""Closing a stdio server that still works on a call the kernel gave up on (cut by its timeout): many servers keep
running while a timer or task of theirs is pending, so stdin's end alone would cost the whole two-second grace before
SIGTERM. The kernel knows which requests went unanswered and sends SIGTERM sooner (`kavalai tools call --timeout 1`
ended 1.7 s after its timeout on npm's server-everything)."""

from __future__ import annotations

import logging

import pytest
from tests.adapters.mcp.conftest import StdioFactory

from kavalai import FunctionKernel
from kavalai.errors import ToolTimeoutError

REAPER = "kavalai.adapters.mcp._reaper"


async def test_a_server_busy_with_a_cut_call_is_stopped_without_the_idle_grace(
    stdio_server: StdioFactory, caplog: pytest.LogCaptureFixture
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("d", module="tests.servers.mcp_deadline"))
    await kernel.connect_mcp_servers()  # the short timeout is the call's, not the server's start
    with caplog.at_level(logging.DEBUG, logger=REAPER):
        with pytest.raises(ToolTimeoutError, match="mcp://d.sleep"):
            await kernel.call_tool("mcp://d.sleep", {"seconds": 60}, timeout=0.3)
        await kernel.close()
    busy = [r.getMessage() for r in caplog.records if r.name == REAPER and "nobody awaits" in r.getMessage()]
    assert len(busy) == 1, caplog.text


async def test_an_idle_server_gets_the_whole_grace(
    stdio_server: StdioFactory, caplog: pytest.LogCaptureFixture
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("d", module="tests.servers.mcp_deadline"))
    with caplog.at_level(logging.DEBUG, logger=REAPER):
        assert (await kernel.call_tool("mcp://d.echo", {"text": "hi"})).result == "hi"
        await kernel.close()
    assert not [r for r in caplog.records if r.name == REAPER and "nobody awaits" in r.getMessage()], caplog.text
