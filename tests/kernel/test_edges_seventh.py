"""Deadlines and ``close()`` at their edges, seventh session (hostile review 36e): a sync tool that raises
``SystemExit`` or ``KeyboardInterrupt`` in its worker thread, a sync call cut before a thread took it, and an
agent run's timeout of 0."""

from __future__ import annotations

import asyncio
import math

import pytest
from tests.adapters.test_threads import _until

from kavalai import FunctionKernel, pythontool
from kavalai.adapters import _threads
from kavalai.agent import Agent
from kavalai.errors import ToolExecutionError, ToolTimeoutError
from kavalai.testing import ScriptedLLM


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


@pytest.mark.parametrize("timeout", [0, -0.0, -1, math.nan, True, "5"])
async def test_an_agent_runs_timeout_is_a_callers_limit_under_the_one_rule(timeout: object) -> None:
    # Agent.run(timeout=0) (and -0.0) ran, already past its deadline, where every other caller's timeout refuses 0;
    # and a refused value was called "deadline", not the timeout the caller gave.
    agent = Agent(ScriptedLLM(["never asked"]), kernel=FunctionKernel())
    with pytest.raises(ValueError, match=r"^Agent\.run timeout must be"):
        await agent.run("hi", timeout=timeout)  # type: ignore[arg-type]


async def test_an_agent_runs_timeout_above_a_year_is_a_year() -> None:
    agent = Agent(ScriptedLLM(["hello"]), kernel=FunctionKernel())
    assert (await agent.run("hi", timeout=math.inf)).output == "hello"
