"""Deadlines and ``close()`` at their edges, seventh session (hostile review 36e): a sync tool that raises
``SystemExit`` or ``KeyboardInterrupt`` in its worker thread, and a sync call cut before a thread took it."""

from __future__ import annotations

import asyncio

import pytest
from tests.adapters.test_threads import _until

from kavalai import FunctionKernel, pythontool
from kavalai.adapters import _threads
from kavalai.errors import ToolExecutionError, ToolTimeoutError


@pytest.mark.parametrize("raised", [SystemExit(2), KeyboardInterrupt()])
async def test_a_sync_tool_that_exits_fails_its_call_and_the_loop_goes_on(raised: BaseException) -> None:
    # A tool wrapping a CLI's main() (argparse exits with 2 on a bad flag) ended the whole event loop: asyncio
    # re-raises SystemExit and KeyboardInterrupt out of it, and a `kavalai serve` process with it.
    @pythontool
    def cli() -> str:
        """Exit as a command line does."""
        raise raised

    @pythontool
    def fine() -> str:
        """Answer."""
        return "fine"

    kernel = FunctionKernel()
    kernel.register_python_tool("cli", cli)
    kernel.register_python_tool("fine", fine)
    for _ in range(3):  # in a task of its own, as a gateway runs each request
        task = asyncio.create_task(kernel.call_tool("python://cli"))
        with pytest.raises(ToolExecutionError) as info:
            await task
        assert info.value.uri == "python://cli"
        assert f"{type(raised).__name__}" in str(info.value)
        assert info.value.__cause__ is not None
        assert info.value.__cause__.__cause__ is raised
    assert (await kernel.call_tool("python://fine")).result == "fine"  # type: ignore[attr-defined]
    assert kernel.calls_in_flight() == []
    assert kernel.threads_in_flight() == []
    await kernel.close()


async def test_a_sync_call_cut_before_a_thread_took_it_never_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A call cut by its deadline while queued for a thread ran its function after its caller had its
    # ToolTimeoutError (1 in ~640 calls with a 0.5 ms timeout); now a thread skips it.
    ran: list[str] = []

    @pythontool
    def effect() -> str:
        """An effect that must not happen after its caller was told the call ended."""
        ran.append("ran")
        return "done"

    kernel = FunctionKernel()
    kernel.register_python_tool("effect", effect)
    held: list[_threads._Turns] = []
    monkeypatch.setattr(_threads, "_wake", held.append)  # no thread takes the call until the test says so
    with pytest.raises(ToolTimeoutError):
        await kernel.call_tool("python://effect", timeout=0.05)
    monkeypatch.undo()
    _threads._wake(held[0])
    await _until(lambda: _threads._turns[asyncio.get_running_loop()].free == _threads.MAX_THREADS)
    assert ran == []
    assert kernel.threads_in_flight() == []
    assert (await kernel.call_tool("python://effect")).result == "done"  # type: ignore[attr-defined]
    assert ran == ["ran"]
    await kernel.close()
