"""A function node's tool progress reaches a streamed run's consumer as NodeProgress events."""

from __future__ import annotations

from kavalai import FunctionKernel, pythontool
from kavalai.kernel import current_call
from kavalai.workflow import NodeProgress, RunFinished, WorkflowBuilder, WorkflowEngine


@pythontool
async def crunch(n: int) -> int:
    """Work in n steps, reporting each."""
    call = current_call()
    assert call is not None
    for i in range(n):
        await call.report_progress(i + 1, n, None)
    return n


async def test_a_streamed_run_reports_a_nodes_progress() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("work.crunch", crunch)
    workflow = (
        WorkflowBuilder("crunching")
        .start(next="work")
        .function("work", tool="python://work.crunch", inputs={"n": 3}, next="done")
        .end("done", outputs={"steps": "work.result"})
        .build()
    )
    async with WorkflowEngine(workflow, kernel) as engine:
        events = [event async for event in engine.stream({})]
        plain = await engine.run({})  # not streamed: no progress asked for, same result
    progress = [(e.node, e.progress, e.total) for e in events if isinstance(e, NodeProgress)]
    assert progress == [("work", 1, 3), ("work", 2, 3), ("work", 3, 3)]
    assert isinstance(events[-1], RunFinished)
    assert events[-1].result.output == plain.output == {"steps": 3}
