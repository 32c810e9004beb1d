"""Hostile round 8 of issue 36 (``tests/kernel/hostile_cases_eighth.md``), case 17: ``close()`` of the kernel while
a DBOS-run workflow's function node hangs in a tool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.durable import DbosRunner
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.adapters.test_threads import _until


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[DbosRunner]:
    started = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        yield started
    finally:
        await started.aclose()


async def test_case_17_close_of_the_kernel_during_a_dbos_step_ends_the_run(runner: DbosRunner) -> None:
    @pythontool
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "never"

    kernel = FunctionKernel()
    kernel.register_python_tool("hang", hang)
    workflow = (
        WorkflowBuilder("hangs", input=dict, output=dict)
        .start(next="stuck")
        .function("stuck", tool="python://hang", next="done")
        .end("done", outputs={"value": "stuck.result"})
        .build()
    )
    engine = WorkflowEngine(workflow, kernel, durable=runner)
    running = asyncio.create_task(engine.run({}, run_id="close-1"))
    await _until(lambda: len(kernel.calls_in_flight()) == 1, timeout=60)
    with anyio.fail_after(30):  # a hang's bound: close() waits 5 s at most for the calls it cuts
        await kernel.close()
        outcome = await asyncio.gather(running, return_exceptions=True)
    [result] = outcome
    assert kernel.calls_in_flight() == []
    if isinstance(result, BaseException):
        assert "closed" in str(result).lower() or "interrupted" in str(result).lower(), repr(result)
    else:
        assert not result.ok
        assert "closed" in str(result.error).lower() or "interrupted" in str(result.error).lower(), result.error
