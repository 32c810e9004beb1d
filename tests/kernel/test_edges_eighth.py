"""Deadlines and ``close()`` at their edges, eighth session: the items left by the seventh (a call kept waiting for
a thread names who holds the turns; timeouts shorter than a timer slot) and the hostile cases of
``tests/kernel/hostile_cases_eighth.md``."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from tests.adapters.test_threads import _until

from kavalai import FunctionKernel, pythontool
from kavalai.adapters import _threads
from kavalai.errors import ToolTimeoutError


async def test_a_call_kept_waiting_for_a_thread_logs_the_uris_holding_the_turns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The seventh session's line said only that all 40 turns were busy: a loop whose turns were all held by hung,
    # cut calls of one tool did not say which tool to look at.
    monkeypatch.setattr(_threads, "WAIT_WARNING", 0.05)
    release = threading.Event()

    @pythontool
    def hang() -> str:
        """Hang until the test lets go."""
        release.wait(timeout=30)
        return "late"

    @pythontool
    def quick() -> str:
        """Answer."""
        return "quick"

    kernel = FunctionKernel()
    kernel.register_python_tool("hang", hang)
    kernel.register_python_tool("quick", quick)
    loop = asyncio.get_running_loop()
    try:
        cut = [
            asyncio.create_task(kernel.call_tool("python://hang", timeout=0.05)) for _ in range(_threads.MAX_THREADS)
        ]
        for task in cut:
            with pytest.raises(ToolTimeoutError):
                await task
        assert len(kernel.threads_in_flight()) == _threads.MAX_THREADS
        with caplog.at_level(logging.WARNING, logger="kavalai.threads"):
            waiting = asyncio.create_task(kernel.call_tool("python://quick"))
            await _until(lambda: any(record.name == "kavalai.threads" for record in caplog.records))
    finally:
        release.set()
    assert (await waiting).result == "quick"  # type: ignore[attr-defined]
    [told] = [record.getMessage() for record in caplog.records if record.name == "kavalai.threads"]
    assert f"python://hang x{_threads.MAX_THREADS}" in told
    assert "by calls running: none" in told
    await _until(lambda: _threads._turns[loop].free == _threads.MAX_THREADS)
    assert _threads._turns[loop].holders == {}
    await kernel.close()
