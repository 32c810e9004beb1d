"""Hostile round 8 of issue 36 (``tests/kernel/hostile_cases_eighth.md``), the agent cases 18-19: a model call that
hangs inside a run's deadline, and a tool call whose own timeout is longer than what is left of the run."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.errors import DeadlineExceededError
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call


async def test_case_18_a_hanging_model_call_is_cut_at_the_runs_deadline() -> None:
    async def never(request: ScriptedRequest) -> str:
        await asyncio.Event().wait()
        return "never"

    agent = Agent(ScriptedLLM(never), kernel=FunctionKernel())
    with anyio.fail_after(20), pytest.raises(DeadlineExceededError):  # a hang's bound
        await agent.run("hi", timeout=0.3)


async def test_case_19_a_tool_call_is_cut_at_the_runs_deadline_not_its_own() -> None:
    @pythontool(timeout=30)
    async def slow() -> str:
        """Sleep 30 s."""
        await asyncio.sleep(30)
        return "slept"

    kernel = FunctionKernel()
    kernel.register_python_tool("slow", slow)
    agent = Agent(ScriptedLLM([tool_call("python://slow"), "done"]), kernel=kernel)
    with anyio.fail_after(20), pytest.raises(DeadlineExceededError):
        await agent.run("hi", timeout=0.3)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_40_a_short_run_timeout_cuts_a_slow_model() -> None:
    answered: list[str] = []

    async def slow(request: ScriptedRequest) -> str:
        await asyncio.sleep(0.2)
        answered.append("answered")
        return "late"

    agent = Agent(ScriptedLLM(slow), kernel=FunctionKernel())
    with anyio.fail_after(20), pytest.raises(DeadlineExceededError):
        await agent.run("hi", timeout=0.05)
    assert answered == []  # cut, not awaited to its end


async def test_case_48_a_numpy_run_timeout() -> None:
    numpy = pytest.importorskip("numpy")

    async def slow(request: ScriptedRequest) -> str:
        await asyncio.sleep(0.2)
        return "late"

    agent = Agent(ScriptedLLM(slow), kernel=FunctionKernel())
    with anyio.fail_after(20), pytest.raises(DeadlineExceededError):
        await agent.run("hi", timeout=numpy.float64(0.05))
