"""Loops and the visit limit, the run timeout, per-node timeouts and function-node retries."""

from __future__ import annotations

import pytest
from tests.workflow.conftest import make_flaky

from kavalai import FunctionKernel, ToolExecutionError, ToolTimeoutError
from kavalai.workflow import (
    NodeError,
    NodeTimeoutError,
    NodeValidationError,
    RetryPolicy,
    RunStatus,
    RunTimeoutError,
    VisitLimitError,
    WorkflowBuilder,
    WorkflowEngine,
)


def _counter(limit_expr: str = "bump.result < input.until") -> WorkflowBuilder:
    return (
        WorkflowBuilder("loop", input="object", output="object")
        .start(next="bump")
        .function(
            "bump", tool="python://t.inc", inputs={"x": {"expr": "get('bump.result', input.start)"}}, next="check"
        )
        .if_("check", condition=limit_expr, then="bump", else_="done")
        .end("done", outputs={"value": "bump.result", "visits": {"expr": "input.until - input.start"}})
    )


async def test_loops_run_until_their_exit(tools_kernel: FunctionKernel) -> None:
    result = await WorkflowEngine(_counter().build(), tools_kernel).run({"start": 0, "until": 5})
    assert result.ok
    assert result.output == {"value": 5, "visits": 5}
    bumps = [t for t in result.trace if t.node == "bump"]
    assert [t.visit for t in bumps] == [1, 2, 3, 4, 5]
    assert [t.inputs for t in bumps] == [{"x": 0}, {"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}]


async def test_runaway_loop_is_stopped_by_the_visit_limit(tools_kernel: FunctionKernel) -> None:
    workflow = _counter("True or done").limits(max_visits=25).build()
    result = await WorkflowEngine(workflow, tools_kernel).run({"start": 0, "until": 1})
    assert result.status is RunStatus.FAILED
    assert isinstance(result.error, VisitLimitError)
    assert result.error.limit == 25
    assert "reached its limit of 25 node visits at node 'bump'" in str(result.error)
    assert len(result.trace) == 25  # every visit up to the limit is kept
    assert result.trace[-1].node == "check"
    assert result.trace[-1].status == "succeeded"


async def test_visit_limit_per_run_and_per_engine(tools_kernel: FunctionKernel) -> None:
    engine = WorkflowEngine(_counter().build(), tools_kernel, max_visits=6)
    assert isinstance((await engine.run({"start": 0, "until": 5})).error, VisitLimitError)
    assert (await engine.run({"start": 0, "until": 5}, max_visits=100)).ok
    assert (await engine.run({"start": 0, "until": 2})).ok  # 1 + 2*2 + 1 = 6 visits fit


async def test_run_timeout_ends_the_run_and_names_the_running_node(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="wait")
        .function("wait", tool="python://t.hang", next="end")
        .end()
        .limits(timeout=0.2)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.status is RunStatus.TIMED_OUT
    assert isinstance(result.error, RunTimeoutError)
    assert (result.error.node, result.error.timeout) == ("wait", 0.2)
    assert str(result.error) == "The run timed out after 0.2 s while node 'wait' was running."
    assert [(t.node, t.status) for t in result.trace] == [("start", "succeeded"), ("wait", "failed")]


async def test_run_timeout_covers_parallel_branches(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="fan")
        .parallel("fan", branches=["a", "b"], next="end")
        .function("a", tool="python://t.hang")
        .function("b", tool="python://t.inc", inputs={"x": 1})
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel, timeout=0.2).run({})
    assert result.status is RunStatus.TIMED_OUT
    assert result.failed_node == "fan"
    statuses = {t.node: t.status for t in result.trace}
    assert statuses == {"start": "succeeded", "b": "succeeded", "a": "failed", "fan": "failed"}


async def test_function_node_timeout_applies_per_attempt(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="wait")
        .function("wait", tool="python://t.hang", timeout=0.05, retry={"attempts": 2, "backoff": 0}, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.status is RunStatus.FAILED
    assert isinstance(result.error, NodeTimeoutError)
    assert result.error.node == "wait"
    assert result.error.timeout == 0.05
    assert str(result.error) == "Node 'wait' failed after 2 attempts: Tool python://t.hang timed out after 0.05 s."
    assert isinstance(result.error.__cause__, ToolTimeoutError)
    assert result.trace[-1].attempts == 2


async def test_parallel_node_timeout(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="fan")
        .parallel("fan", branches=["a"], next="end", timeout=0.05)
        .function("a", tool="python://t.hang")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert isinstance(result.error, NodeTimeoutError)
    assert str(result.error) == "Node 'fan' did not finish within its timeout of 0.05 s."


async def test_retries_with_backoff_until_success(tools_kernel: FunctionKernel) -> None:
    flaky, calls = make_flaky(failures=2)
    tools_kernel.register_python_tool("t.flaky", flaky)
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="attempt")
        .function(
            "attempt",
            tool="python://t.flaky",
            inputs={"x": 4},
            retry=RetryPolicy(attempts=3, backoff=0.001),
            next="end",
        )
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.ok, result.error
    assert result.output == {"result": 40}
    assert calls == [4, 4, 4]
    assert result.trace[1].attempts == 3


async def test_retries_wait_with_growing_backoff(tools_kernel: FunctionKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    from kavalai.workflow import _runners

    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(_runners, "_sleep", record)
    flaky, calls = make_flaky(failures=3)
    tools_kernel.register_python_tool("t.flaky", flaky)
    policy = RetryPolicy(attempts=4, backoff=0.25, multiplier=3, max_backoff=1.0)
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="attempt")
        .function("attempt", tool="python://t.flaky", inputs={"x": 1}, retry=policy, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.ok, result.error
    assert (len(calls), waits) == (4, [0.25, 0.75, 1.0])


async def test_no_retry_unless_asked(tools_kernel: FunctionKernel) -> None:
    flaky, calls = make_flaky(failures=1)
    tools_kernel.register_python_tool("t.flaky", flaky)
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="attempt")
        .function("attempt", tool="python://t.flaky", inputs={"x": 4}, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert isinstance(result.error, NodeError)
    assert calls == [4]
    assert str(result.error) == "Node 'attempt': Tool python://t.flaky failed: RuntimeError: transient failure 1"
    assert isinstance(result.error.__cause__, ToolExecutionError)


async def test_retries_exhausted_and_errors_not_retried(tools_kernel: FunctionKernel) -> None:
    flaky, calls = make_flaky(failures=5)
    tools_kernel.register_python_tool("t.flaky", flaky)
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="attempt")
        .function(
            "attempt", tool="python://t.flaky", inputs={"x": "input.x"}, retry={"attempts": 3, "backoff": 0}, next="end"
        )
        .end()
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel)
    exhausted = await engine.run({"x": 1})
    assert calls == [1, 1, 1]
    assert str(exhausted.error) == (
        "Node 'attempt' failed after 3 attempts: Tool python://t.flaky failed: RuntimeError: transient failure 3"
    )
    bad_input = await engine.run({"x": "one"})  # a ToolInputError is not retried: it would fail again
    assert isinstance(bad_input.error, NodeValidationError)
    assert calls == [1, 1, 1]
    assert bad_input.trace[-1].attempts == 1


async def test_retry_on_selects_the_errors_retried(tools_kernel: FunctionKernel) -> None:
    flaky, calls = make_flaky(failures=1)
    tools_kernel.register_python_tool("t.flaky", flaky)
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="attempt")
        .function(
            "attempt",
            tool="python://t.flaky",
            inputs={"x": 2},
            retry={"attempts": 3, "backoff": 0, "retry_on": ["ToolTimeoutError"]},
            next="end",
        )
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert not result.ok
    assert calls == [2]


@pytest.mark.parametrize("timeout", [0, -1.5])
def test_invalid_run_timeout_is_a_definition_error(timeout: float) -> None:
    from kavalai.workflow import WorkflowDefinitionError

    with pytest.raises(WorkflowDefinitionError, match=r"'timeout' must be positive \(in seconds\) or None"):
        WorkflowBuilder("t").start(next="end").end().limits(timeout=timeout).build()


def test_builder_limits_keep_what_is_not_given() -> None:
    workflow = WorkflowBuilder("t").start(next="end").end().limits(timeout=5).limits(max_visits=7).build()
    assert (workflow.max_visits, workflow.timeout) == (7, 5)


@pytest.mark.parametrize(("option", "value"), [("max_visits", 0), ("max_visits", True), ("timeout", -1.0)])
async def test_engine_and_run_limits_must_be_positive(tools_kernel: FunctionKernel, option: str, value: object) -> None:
    workflow = WorkflowBuilder("t").start(next="end").end().build()
    with pytest.raises(ValueError, match=f"{option} must be (a )?positive"):
        WorkflowEngine(workflow, tools_kernel, **{option: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"{option} must be (a )?positive"):
        await WorkflowEngine(workflow, tools_kernel).run({}, **{option: value})  # type: ignore[arg-type]
