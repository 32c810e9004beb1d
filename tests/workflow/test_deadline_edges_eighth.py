"""Hostile round 8 of issue 36 (``tests/kernel/hostile_cases_eighth.md``), the workflow cases 20-21: a run timeout
over a function node whose tool calls another tool that hangs, and the kernel's ``aclose()`` racing a run."""

from __future__ import annotations

import asyncio

import anyio
from tests.adapters.test_threads import _until

from kavalai import FunctionKernel, pythontool
from kavalai.workflow import NodeTimeoutError, RunStatus, RunTimeoutError, WorkflowBuilder, WorkflowEngine


def _kernel() -> FunctionKernel:
    kernel = FunctionKernel()

    @pythontool
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "never"

    @pythontool
    async def outer() -> str:
        """Call the hanging tool (a nested call, its own timeout 30 s)."""
        reply = await kernel.call_tool("python://t.hang", timeout=30)
        return str(reply.result)  # type: ignore[attr-defined]

    @pythontool
    async def quick() -> str:
        """Answer."""
        return "quick"

    kernel.register_python_tool("t.hang", hang)
    kernel.register_python_tool("t.outer", outer)
    kernel.register_python_tool("t.quick", quick)
    return kernel


def _workflow(tool: str, timeout: float | None = None) -> WorkflowBuilder:
    builder = (
        WorkflowBuilder("w", input="object", output="any")
        .start(next="first")
        .function("first", tool=tool, next="end")
        .end(outputs={"value": "first.result"})
    )
    return builder.limits(timeout=timeout) if timeout is not None else builder


async def test_case_20_a_run_timeout_cuts_a_nested_call_inside_a_function_node() -> None:
    kernel = _kernel()
    with anyio.fail_after(20):  # a hang's bound: the nested call's own timeout is 30 s
        result = await WorkflowEngine(_workflow("python://t.outer", 0.3).build(), kernel).run({})
    assert result.status is RunStatus.TIMED_OUT
    assert isinstance(result.error, RunTimeoutError)
    assert result.error.node == "first"
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_21_aclose_racing_a_run_ends_it_and_a_later_run_works() -> None:
    kernel = _kernel()
    engine = WorkflowEngine(_workflow("python://t.outer").build(), kernel)
    running = asyncio.create_task(engine.run({}))
    await _until(lambda: len(kernel.calls_in_flight()) == 2)
    with anyio.fail_after(20):
        await kernel.aclose()
        result = await running
    assert result.status is RunStatus.FAILED, result
    assert "closed" in str(result.error), result.error
    assert kernel.calls_in_flight() == []
    again = await WorkflowEngine(_workflow("python://t.quick").build(), kernel).run({})
    assert again.ok, again.error
    assert again.output == {"value": "quick"}
    await kernel.close()


async def test_case_39_a_short_node_timeout_with_retries() -> None:
    kernel = _kernel()
    workflow = (
        WorkflowBuilder("w", input="object", output="any")
        .start(next="first")
        .function("first", tool="python://t.hang", timeout=0.01, retry={"attempts": 3, "backoff": 0}, next="end")
        .end()
        .build()
    )
    with anyio.fail_after(20):
        result = await WorkflowEngine(workflow, kernel).run({})
    assert isinstance(result.error, NodeTimeoutError), result.error
    assert "failed after 3 attempts" in str(result.error)
    assert kernel.calls_in_flight() == []
    await kernel.close()
