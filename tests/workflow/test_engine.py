"""The engine's lifecycle (connect, aclose, async with), shared connections, concurrent runs and streaming."""

from __future__ import annotations

import os
from contextlib import aclosing

import anyio
import pytest
from tests.workflow.conftest import EVENTS, text_mcp_server, wait_for

from kavalai import FunctionKernel, McpServer, ServerConnectionError
from kavalai.workflow import (
    NodeFailed,
    NodeFinished,
    NodeStarted,
    RunFinished,
    RunStarted,
    WorkflowBuilder,
    WorkflowEngine,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _word_counter() -> WorkflowBuilder:
    return (
        WorkflowBuilder("words", input=str, output="object")
        .start(next="count")
        .function("count", tool="mcp://text.word_count", inputs={"text": "input"}, next="check")
        .if_("check", condition="count.result > 3", then="long", else_="short")
        .function("long", tool="python://t.label", inputs={"n": "count.result"}, next="end")
        .function("short", tool="python://t.inc", inputs={"x": "count.result"}, next="end")
        .end("end", outputs={"words": "count.result", "long": "check"})
    )


@pytest.fixture
async def mcp_kernel(tools_kernel: FunctionKernel) -> FunctionKernel:
    tools_kernel.register_mcp_server(text_mcp_server())
    return tools_kernel


async def test_async_with_connects_up_front_and_leaves_no_process(mcp_kernel: FunctionKernel) -> None:
    engine = WorkflowEngine(_word_counter().build(), mcp_kernel)
    async with engine as entered:
        assert entered is engine
        state = mcp_kernel.get_mcp_server_state("text")
        assert state.pid is not None
        assert _alive(state.pid)
        assert state.connects == 1
        pid = state.pid
        first = await engine.run("one two three four five")
        second = await engine.run("just two")
        assert (first.output, second.output) == ({"words": 5, "long": True}, {"words": 2, "long": False})
        # runs neither reconnect nor close: the same process served both
        after = mcp_kernel.get_mcp_server_state("text")
        assert (after.pid, after.connects) == (pid, 1)
    assert _alive(pid)  # the kernel was passed in: it stays the caller's, open, after the engine closes
    await mcp_kernel.close()
    assert not _alive(pid)  # the caller's close() stops and reaps the process
    assert mcp_kernel.get_mcp_server_state("text").pid is None


async def test_an_engine_closes_the_kernel_it_made_or_was_handed(mcp_kernel: FunctionKernel) -> None:
    closed: list[str] = []

    async def note() -> None:
        closed.append("closed")

    async with WorkflowEngine(_word_counter().build(), mcp_kernel, owns_kernel=True) as engine:
        pid = engine.kernel.get_mcp_server_state("text").pid
        assert pid is not None
    assert not _alive(pid)  # handed over with owns_kernel=True: the engine closed it
    own = WorkflowEngine(_word_counter().build())
    own.kernel.on_close(note)
    await own.aclose()
    assert closed == ["closed"]  # a kernel the engine made is the engine's to close


async def test_connect_and_aclose_by_hand(mcp_kernel: FunctionKernel) -> None:
    engine = WorkflowEngine(_word_counter().build(), mcp_kernel)
    await engine.connect()
    pid = mcp_kernel.get_mcp_server_state("text").pid
    assert pid is not None
    assert _alive(pid)
    assert (await engine.run("a b c d e f")).ok
    await engine.aclose()
    await engine.aclose()  # idempotent
    assert _alive(pid)  # the caller's kernel stays open
    await mcp_kernel.close()
    assert mcp_kernel.get_mcp_server_state("text").pid is None
    assert not _alive(pid)


async def test_a_misconfigured_server_fails_at_connect_before_any_run(tools_kernel: FunctionKernel) -> None:
    tools_kernel.register_mcp_server(McpServer(name="text", command="kavalai-no-such-command-xyz"))
    engine = WorkflowEngine(_word_counter().build(), tools_kernel)
    with pytest.raises(ServerConnectionError, match="text"):
        async with engine:
            pytest.fail("the body must not run")  # pragma: no cover


async def test_concurrent_runs_share_one_engine(mcp_kernel: FunctionKernel) -> None:
    engine = WorkflowEngine(_word_counter().build(), mcp_kernel)
    texts = [" ".join(["w"] * n) for n in range(1, 21)]
    results: dict[int, object] = {}

    async def run_one(n: int, text: str) -> None:
        results[n] = (await engine.run(text)).output

    async with engine:
        async with anyio.create_task_group() as group:
            for n, text in enumerate(texts, start=1):
                group.start_soon(run_one, n, text)
        assert mcp_kernel.get_mcp_server_state("text").connects == 1
    assert results == {n: {"words": n, "long": n > 3} for n in range(1, 21)}


async def test_stream_yields_events_as_the_run_goes(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input=int, output="any")
        .start(next="bump")
        .function("bump", tool="python://t.inc", inputs={"x": "input"}, next="end")
        .end("end", outputs={"value": "bump.result"})
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel)
    events = [event async for event in engine.stream(1)]
    assert [type(e).__name__ for e in events] == [
        "RunStarted",
        "NodeStarted",
        "NodeFinished",
        "NodeStarted",
        "NodeFinished",
        "NodeStarted",
        "NodeFinished",
        "RunFinished",
    ]
    assert isinstance(events[0], RunStarted)
    assert events[0].input == 1
    assert isinstance(events[3], NodeStarted)
    assert (events[3].node, events[3].kind) == ("bump", "function")
    assert isinstance(events[4], NodeFinished)
    assert events[4].trace.output == {"result": 2}
    assert isinstance(events[-1], RunFinished)
    assert events[-1].result.output == {"value": 2}
    assert {e.run_id for e in events} == {events[0].run_id}


async def test_stream_reports_the_failed_node(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="boom")
        .function("boom", tool="python://t.explode", inputs={"reason": "stream"}, next="end")
        .end()
        .build()
    )
    events = [event async for event in WorkflowEngine(workflow, tools_kernel).stream({})]
    failed = [e for e in events if isinstance(e, NodeFailed)]
    assert len(failed) == 1
    assert failed[0].trace.node == "boom"
    assert "exploded: stream" in str(failed[0].error)
    assert isinstance(events[-1], RunFinished)
    assert events[-1].result.failed_node == "boom"


async def test_stream_parallel_branch_events_carry_their_branch(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="fan")
        .parallel("fan", branches=["a", "b"], next="end")
        .function("a", tool="python://t.inc", inputs={"x": 1})
        .function("b", tool="python://t.inc", inputs={"x": 2})
        .end()
        .build()
    )
    events = [event async for event in WorkflowEngine(workflow, tools_kernel).stream({})]
    started = [(e.node, e.branch) for e in events if isinstance(e, NodeStarted)]
    assert started[:2] == [("start", None), ("fan", None)]
    assert sorted(started[2:4]) == [("a", "fan.a"), ("b", "fan.b")]
    assert started[4] == ("end", None)
    finished = [e.trace.node for e in events if isinstance(e, NodeFinished)]
    assert finished.index("fan") > max(finished.index("a"), finished.index("b"))


async def test_stream_reports_branch_nodes_while_the_branches_run(tools_kernel: FunctionKernel) -> None:
    # Branch "slow" waits until the consumer has seen branch "quick" finish: were branch events held back until
    # the join, "slow" would wait forever and the run would time out.
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="fan")
        .parallel("fan", branches=["slow", "quick"], next="end")
        .function("slow", tool="python://t.meet", inputs={"mine": "slow_branch", "theirs": "consumer"})
        .function("quick", tool="python://t.inc", inputs={"x": 1})
        .end()
        .limits(timeout=20)
        .build()
    )
    seen: list[tuple[str, str]] = []
    async for event in WorkflowEngine(workflow, tools_kernel).stream({}):
        if isinstance(event, NodeStarted | NodeFinished):
            node = event.node if isinstance(event, NodeStarted) else event.trace.node
            seen.append((type(event).__name__, node))
            if isinstance(event, NodeFinished) and node == "quick":
                EVENTS.setdefault("consumer", anyio.Event()).set()
        if isinstance(event, RunFinished):
            assert event.result.ok, event.result.error
    finished = [node for kind, node in seen if kind == "NodeFinished"]
    assert finished == ["start", "quick", "slow", "fan", "end"]


async def test_leaving_a_stream_cancels_the_run(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="fan")
        .parallel("fan", branches=["wait"], next="end")
        .function("wait", tool="python://t.hang")
        .end()
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel)
    async with aclosing(engine.stream({})) as events:
        async for event in events:
            if isinstance(event, NodeStarted) and event.node == "wait":
                await wait_for("hang.started")
                break
    await wait_for("hang.ended")


async def test_an_abandoned_stream_is_finalized_and_cancels_the_run(tools_kernel: FunctionKernel) -> None:
    import gc

    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="fan")
        .parallel("fan", branches=["wait"], next="end")
        .function("wait", tool="python://t.hang")
        .end()
        .build()
    )
    events = WorkflowEngine(workflow, tools_kernel).stream({})
    while not isinstance(await anext(events), NodeStarted):
        pass
    await wait_for("hang.started")
    del events  # never closed: the event loop's async-generator finalizer closes it
    gc.collect()
    await wait_for("hang.ended")


async def test_a_stream_consumer_cancelled_from_outside_stops_the_run(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="wait")
        .function("wait", tool="python://t.hang", next="end")
        .end()
        .build()
    )
    kinds: list[str] = []
    with anyio.CancelScope() as scope:
        async for event in WorkflowEngine(workflow, tools_kernel).stream({}):
            kinds.append(type(event).__name__)
            if isinstance(event, NodeStarted) and event.node == "wait":
                await wait_for("hang.started")
                scope.cancel()  # as a timeout or a cancelled task of the caller would
    assert scope.cancelled_caught
    assert kinds == ["RunStarted", "NodeStarted", "NodeFinished", "NodeStarted"]
    await wait_for("hang.ended")


async def test_stopping_a_stream_early_is_safe(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input=int, output="any")
        .start(next="bump")
        .function("bump", tool="python://t.inc", inputs={"x": "input"}, next="end")
        .end()
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel)
    async with aclosing(engine.stream(1)) as events:
        async for event in events:
            if isinstance(event, NodeStarted):
                break
    assert (await engine.run(1)).ok  # the engine is unaffected


async def test_engine_builds_its_own_kernel_and_repr(tools_kernel: FunctionKernel) -> None:
    workflow = WorkflowBuilder("t").start(next="end").end().build()
    async with WorkflowEngine(workflow) as engine:
        assert isinstance(engine.kernel, FunctionKernel)
        result = await engine.run({"k": 1})
        assert result.output == {"k": 1}
        assert repr(engine).startswith("<WorkflowEngine <Workflow 't': 2 nodes, object -> object> on <FunctionKernel")
