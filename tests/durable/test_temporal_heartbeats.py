"""A Temporal step's heartbeats (how a cancel of the run reaches the step in flight) are a task the step's activity
owns: stopped and awaited on every path, so none is left when the activity has ended, whether it returned, raised or
was cancelled. The activity runs in temporalio's activity environment, its target a workflow of a real kernel."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from kavalai import FunctionKernel, pythontool
from kavalai.durable import TemporalRunner
from kavalai.durable import _temporal_workflow as temporal_module
from kavalai.workflow import WorkflowBuilder, WorkflowEngine

QUEUE = "heartbeats"


def heartbeat_tasks() -> list[asyncio.Task[Any]]:
    """The heartbeat tasks not ended yet (a task whose cancel is only requested is one)."""
    return [task for task in asyncio.all_tasks() if task.get_coro().__name__ == "_heartbeats"]  # type: ignore[union-attr]


async def run_step(task: dict[str, Any], left: list[int]) -> Any:
    """The step's activity, and how many heartbeat tasks are left the moment it has ended (in the same task: no turn
    of the event loop in between that could end a task merely cancelled)."""
    try:
        return await temporal_module.run_step(task)
    finally:
        left.append(len(heartbeat_tasks()))


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> tuple[ActivityEnvironment, asyncio.Event]:
    started = asyncio.Event()

    @pythontool
    async def work(how: str) -> str:
        started.set()
        if how == "raise":
            raise KeyError(how)  # not a tool error: an error of the step (no kernel around a redone step's lookup)
        if how == "wait":
            await asyncio.Event().wait()
        return how

    kernel = FunctionKernel()
    kernel.register_python_tool("work", work)
    workflow = (
        WorkflowBuilder("beats", input=dict, output=dict)
        .start(next="a")
        .function("a", tool="python://work", inputs={"how": "input.how"}, next="done")
        .end("done", outputs={"r": "a.result"})
        .build()
    )
    runner = TemporalRunner(task_queue=QUEUE, worker=False)
    runner.register(WorkflowEngine(workflow, kernel, durable=runner))
    monkeypatch.setitem(temporal_module.serving, QUEUE, runner)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, task_queue=QUEUE, heartbeat_timeout=None)
    return env, started


def step(how: str) -> dict[str, Any]:
    request = {"kind": "tool", "uri": "python://work", "arguments": {"how": how}, "key": f"run-1.a.{how}"}
    return {"target": "workflow:beats", "request": request, "run_id": "run-1", "position": 1}


async def test_a_step_that_returns_leaves_no_heartbeats(environment: tuple[ActivityEnvironment, asyncio.Event]) -> None:
    env, _ = environment
    left: list[int] = []
    result = await env.run(run_step, step("done"), left)
    assert "done" in str(result["ok"]), result
    assert left == [0]


async def test_a_step_whose_tool_fails_leaves_no_heartbeats(
    environment: tuple[ActivityEnvironment, asyncio.Event],
) -> None:
    env, _ = environment
    left: list[int] = []
    result = await env.run(run_step, step("raise"), left)
    assert "error" in result
    assert left == [0]


async def test_a_cancelled_step_leaves_no_heartbeats(environment: tuple[ActivityEnvironment, asyncio.Event]) -> None:
    env, started = environment
    left: list[int] = []
    activity = asyncio.ensure_future(env.run(run_step, step("wait"), left))
    await asyncio.wait_for(started.wait(), 30)
    assert len(heartbeat_tasks()) == 1
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await activity
    assert left == [0]
