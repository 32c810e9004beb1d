"""Messages that answer no request (a null id, an id nobody awaits, an unreadable line naming none) are dropped,
counted in the server's state and logged a bounded number of times; the session goes on."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio
import pytest

from kavalai import FunctionKernel, McpServer

SERVER = Path(__file__).resolve().parents[2] / "servers" / "mcp_null_ids.py"


def _server(strays: int = 0) -> McpServer:
    return McpServer(name="map", command=sys.executable, args=[str(SERVER), str(strays)])


def _stray_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kavalai.mcp" and "ignored" in r.getMessage()]


async def test_a_server_that_answers_notifications_with_a_null_id_connects(caplog: pytest.LogCaptureFixture) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_server())
    try:
        with caplog.at_level(logging.WARNING, logger="kavalai.mcp"), anyio.fail_after(20):
            result = await kernel.call_tool("mcp://map.primitive")
        assert result.result == "42"  # type: ignore[attr-defined]  (text stays text)
        state = kernel.get_mcp_server_state("map")
        assert state.status == "connected"
        assert state.stray_messages == 1  # its "answer" to notifications/initialized
        [line] = _stray_lines(caplog)
        assert "'map'" in line.getMessage()
        assert "naming no request" in line.getMessage()
    finally:
        await kernel.close()


async def test_many_stray_messages_are_counted_and_logged_a_bounded_number_of_times(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_server(strays=150))
    try:
        with caplog.at_level(logging.WARNING, logger="kavalai.mcp"), anyio.fail_after(30):
            for _ in range(2):
                assert (await kernel.call_tool("mcp://map.primitive")).result == "42"  # type: ignore[attr-defined]
        state = kernel.get_mcp_server_state("map")
        assert state.stray_messages == 1 + 2 * 150
        lines = [r.getMessage() for r in _stray_lines(caplog)]
        # The first three one by one (an unreadable line, a null id, an id nobody awaits), then at 10 and 100.
        assert len(lines) == 5
        assert "naming no request" in lines[0]
        assert "an answer with id None" in lines[1]
        assert "an answer with id 900001" in lines[2]
        assert "later ones are counted" in lines[2]
        assert lines[-1].endswith("has sent 100 messages that answer no request; ignored")
    finally:
        await kernel.close()
