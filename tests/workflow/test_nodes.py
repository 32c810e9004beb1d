"""Every node kind at run time, and validation of every value that crosses a node boundary."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel, ToolExecutionError, ToolInputError
from kavalai.workflow import (
    ExpressionError,
    NodeError,
    NodeValidationError,
    RunStatus,
    WorkflowBuilder,
    WorkflowEngine,
)


class Numbers(BaseModel):
    a: int
    b: int


class Sum(BaseModel):
    total: int
    doubled: int


def _adder() -> WorkflowBuilder:
    return (
        WorkflowBuilder("adder", input=Numbers, output=Sum)
        .start(next="add")
        .function("add", tool="python://t.add", inputs={"a": "input.a", "b": "input.b"}, next="done")
        .end("done", outputs={"total": "add.result", "doubled": {"expr": "add.result * 2"}})
    )


async def test_function_node_runs_and_traces(tools_kernel: FunctionKernel) -> None:
    engine = WorkflowEngine(_adder().build(), tools_kernel)
    result = await engine.run({"a": 2, "b": "40"})
    assert result.status is RunStatus.SUCCEEDED
    assert result.ok
    assert result.output == Sum(total=42, doubled=84)
    assert result.error is None
    assert result.failed_node is None
    assert [(t.node, t.kind, t.visit, t.status) for t in result.trace] == [
        ("start", "start", 1, "succeeded"),
        ("add", "function", 1, "succeeded"),
        ("done", "end", 1, "succeeded"),
    ]
    add = result.trace[1]
    assert (add.inputs, add.output, add.next, add.attempts) == ({"a": 2, "b": 40}, {"result": 42}, "done", 1)
    assert all(t.duration >= 0 for t in result.trace)
    assert result.trace[0].output == {"a": 2, "b": 40}  # the validated (coerced) input
    assert result.to_dict()["output"] == {"total": 42, "doubled": 84}
    assert result.raise_for_status() is result


async def test_workflow_input_is_validated_at_start(tools_kernel: FunctionKernel) -> None:
    result = await WorkflowEngine(_adder().build(), tools_kernel).run({"a": "two"})
    assert result.status is RunStatus.FAILED
    error = result.error
    assert isinstance(error, NodeValidationError)
    assert (error.node, error.field) == ("start", "input.a")
    assert "Node 'start': the workflow input does not fit type 'Numbers'" in str(error)
    assert "a: Input should be a valid integer" in str(error)
    assert "b: Field required" in str(error)
    assert [t.status for t in result.trace] == ["failed"]
    with pytest.raises(NodeValidationError):
        result.raise_for_status()


async def test_workflow_output_is_validated_at_end(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input=Numbers, output=Sum)
        .start(next="add")
        .function("add", tool="python://t.add", inputs={"a": "input.a", "b": "input.b"}, next="done")
        .end("done", outputs={"total": "add.result", "doubled": "not a number"})
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({"a": 1, "b": 2})
    assert isinstance(result.error, NodeValidationError)
    assert (result.error.node, result.error.field) == ("done", "output.doubled")
    assert "the workflow output does not fit type 'Sum': doubled: Input should be a valid integer" in str(result.error)
    assert [t.node for t in result.trace] == ["start", "add", "done"]  # everything up to the failure


async def test_node_output_is_validated_against_its_declared_type(tools_kernel: FunctionKernel) -> None:
    class Numeric(BaseModel):
        result: int

    workflow = (
        WorkflowBuilder("t", input=int, output="any")
        .start(next="name")
        .function("name", tool="python://t.label", inputs={"n": "input"}, output=Numeric, next="end")
        .end()
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel)
    ok = await engine.run(12)
    assert ok.output == {"result": 12}  # "12" coerced by the declared type, then passed on as data
    failed = await engine.run(7)
    assert isinstance(failed.error, NodeValidationError)
    assert (failed.error.node, failed.error.field) == ("name", "output.result")
    assert "Node 'name': the output does not fit type 'Numeric': result: Input should be a valid integer" in str(
        failed.error
    )
    assert failed.error.errors[0]["loc"] == ("result",)


async def test_tool_input_errors_name_node_and_field(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="add")
        .function("add", tool="python://t.add", inputs={"a": "input.a", "b": "oops"}, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({"a": 1})
    error = result.error
    assert isinstance(error, NodeValidationError)
    assert (error.node, error.field, error.uri) == ("add", "inputs.b", "python://t.add")
    assert str(error) == (
        "Node 'add': the inputs do not fit tool python://t.add: "
        "b: Input should be a valid integer, unable to parse string as an integer (got 'oops')"
    )
    assert isinstance(error.__cause__, ToolInputError)


async def test_failing_tool_fails_the_node_with_the_cause_chained(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="boom")
        .function("boom", tool="python://t.explode", inputs={"reason": "input.why"}, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({"why": "testing"})
    assert result.failed_node == "boom"
    assert isinstance(result.error, NodeError)
    assert str(result.error) == "Node 'boom': Tool python://t.explode failed: ValueError: exploded: testing"
    assert isinstance(result.error.__cause__, ToolExecutionError)
    assert result.trace[-1].error == str(result.error)
    assert result.trace[-1].inputs == {"reason": "testing"}


async def test_unknown_tool_fails_with_a_suggestion(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="x")
        .function("x", tool="python://t.ad", inputs={"a": 1, "b": 2}, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert "Unknown tool 'python://t.ad'. Did you mean 'python://t.add'?" in str(result.error)


async def test_missing_path_fails_naming_node_and_expression(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="add")
        .function("add", tool="python://t.add", inputs={"a": "input.a", "b": "input.b"}, next="end")
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({"a": 1})
    assert isinstance(result.error, ExpressionError)
    assert (result.error.node, result.error.field) == ("add", "inputs.b")
    assert str(result.error) == "Node 'add': field 'inputs.b': expression 'input.b': no key 'b' (keys: 'a')"


async def test_model_outputs_are_read_by_field_and_end_takes_the_previous_output(
    tools_kernel: FunctionKernel,
) -> None:
    def build(output: str) -> WorkflowBuilder:
        return (
            WorkflowBuilder("t", input=str, output=output)
            .start(next="pair")
            .function("pair", tool="python://t.split", inputs={"pair": "input"}, next="total")
            .function("total", tool="python://t.add", inputs={"a": "pair.left", "b": "pair.right"}, next="end")
            .end("end", outputs=None)
        )

    result = await WorkflowEngine(build("object").build(), tools_kernel).run("3,4")
    assert result.output == {"result": 7}
    mismatch = await WorkflowEngine(build("integer").build(), tools_kernel).run("3,4")
    with pytest.raises(NodeValidationError, match="the workflow output does not fit type 'integer'"):
        mismatch.raise_for_status()


async def test_if_node_branches(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input=int, output="object")
        .start(next="check")
        .if_("check", condition="input > 10", then="big", else_="small")
        .function("big", tool="python://t.label", inputs={"n": {"expr": "input * 100"}}, next="end")
        .function("small", tool="python://t.label", inputs={"n": "input"}, next="end")
        .end("end", outputs=None)
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel)
    big, small = await engine.run(11), await engine.run(3)
    assert big.output == {"result": "1100"}
    assert small.output == {"result": "3"}
    assert [t.node for t in big.trace] == ["start", "check", "big", "end"]
    assert (big.trace[1].output, big.trace[1].next) == (True, "big")
    assert [t.node for t in small.trace] == ["start", "check", "small", "end"]


def _router() -> WorkflowBuilder:
    return (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="route")
        .switch("route", value="input.kind", cases={"a": "first", 2: "second", True: "third"}, default="other")
        .function("first", tool="python://t.label", inputs={"n": 1}, next="end")
        .function("second", tool="python://t.label", inputs={"n": 2}, next="end")
        .function("third", tool="python://t.label", inputs={"n": 3}, next="end")
        .function("other", tool="python://t.label", inputs={"n": 4}, next="end")
        .end(
            "end",
            outputs={
                "label": {"expr": "get('first.result') or get('second.result') or get('third.result') or other.result"}
            },
        )
    )


@pytest.mark.parametrize(("kind", "label"), [("a", "1"), (2, "2"), (2.0, "2"), (True, "3"), (1, "4"), ("zzz", "4")])
async def test_switch_node_routes_by_case(tools_kernel: FunctionKernel, kind: object, label: str) -> None:
    result = await WorkflowEngine(_router().build(), tools_kernel).run({"kind": kind})
    assert result.output == {"label": label}


async def test_switch_without_match_or_default_fails(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="any")
        .start(next="route")
        .switch("route", value="input.kind", cases={"a": "end"})
        .end()
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({"kind": "b"})
    assert isinstance(result.error, NodeError)
    assert (result.error.node, result.error.field) == ("route", "value")
    assert "field 'value' is 'b', which matches no case ('a') and there is no default" in str(result.error)


async def test_parallel_branches_run_concurrently_and_join(tools_kernel: FunctionKernel) -> None:
    # Each branch waits for the other one's event: sequential branches would never finish (the run timeout
    # would end the run), so success proves the branches ran at the same time.
    workflow = (
        WorkflowBuilder("t", input="object", output="object")
        .start(next="fan")
        .parallel("fan", branches=["left", "right"], next="end")
        .function("left", tool="python://t.meet", inputs={"mine": "L", "theirs": "R"}, next="left_words")
        .function("left_words", tool="python://t.words", inputs={"text": "left.result"})
        .function("right", tool="python://t.meet", inputs={"mine": "R", "theirs": "L"})
        .end(
            "end", outputs={"left": "fan.left.result", "right": "right.result", "n": {"expr": "len(left_words.result)"}}
        )
        .limits(timeout=20)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.ok, result.error
    assert result.output == {"left": ["L", "met", "R"], "right": "R met L", "n": 3}
    branches = {t.node: t.branch for t in result.trace}
    assert branches == {
        "start": None,
        "left": "fan.left",
        "right": "fan.right",
        "left_words": "fan.left",
        "fan": None,
        "end": None,
    }
    fan = next(t for t in result.trace if t.node == "fan")
    assert fan.output == {"left": {"result": ["L", "met", "R"]}, "right": {"result": "R met L"}}


async def test_a_failing_branch_fails_the_parallel_node_and_cancels_the_others(
    tools_kernel: FunctionKernel,
) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="object")
        .start(next="fan")
        .parallel("fan", branches=["slow", "boom"], next="end")
        .function("slow", tool="python://t.hang")
        .function("boom", tool="python://t.explode", inputs={"reason": "branch"})
        .end()
        .limits(timeout=20)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.status is RunStatus.FAILED
    assert result.failed_node == "boom"
    records = {t.node: t for t in result.trace}
    assert records["boom"].status == "failed"
    assert "exploded: branch" in (records["boom"].error or "")
    assert records["slow"].status == "failed"
    assert records["slow"].error == ("cancelled before it finished: another branch failed or a timeout ran out")
    assert records["fan"].status == "failed"


async def test_nested_parallel_and_a_loop_inside_a_branch(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output="object")
        .start(next="outer")
        .parallel("outer", branches=["counting", "inner"], next="end")
        .function("counting", tool="python://t.inc", inputs={"x": {"expr": "get('counting.result', 0)"}}, next="again")
        .if_("again", condition="counting.result < 3", then="counting", else_="last")
        .function("last", tool="python://t.label", inputs={"n": "counting.result"})
        .parallel("inner", branches=["x", "y"])
        .function("x", tool="python://t.add", inputs={"a": 1, "b": 2})
        .function("y", tool="python://t.add", inputs={"a": 3, "b": 4})
        .end("end", outputs={"outer": "outer"})
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.ok, result.error
    assert result.output == {
        "outer": {
            "counting": {"result": "3"},
            "inner": {"x": {"result": 3}, "y": {"result": 7}},
        }
    }
    branches = {(t.node, t.branch) for t in result.trace}
    assert ("x", "inner.x") in branches
    assert ("counting", "outer.counting") in branches
    assert [t.visit for t in result.trace if t.node == "counting"] == [1, 2, 3]


def test_result_to_dict_is_json_ready() -> None:
    import json
    from datetime import UTC, datetime

    from kavalai.workflow import NodeTrace, RunResult, ToolCallTrace

    record = NodeTrace(
        node="n",
        kind="agent",
        visit=1,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        output=Numbers(a=1, b=2),
        tool_calls=[ToolCallTrace("python://t.add", {"a": 1}, {"result": 1})],
    )
    result = RunResult(
        run_id="r",
        workflow="w",
        status=RunStatus.SUCCEEDED,
        started_at=record.started_at,
        output=Sum(total=1, doubled=2),
        trace=[record],
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["output"] == {"total": 1, "doubled": 2}
    assert data["trace"][0]["output"] == {"a": 1, "b": 2}
    assert data["trace"][0]["started_at"] == "2026-01-01T00:00:00Z"
    assert data["trace"][0]["tool_calls"] == [
        {"tool": "python://t.add", "arguments": {"a": 1}, "output": {"result": 1}, "error": None}
    ]


async def test_each_visit_s_start_is_a_utc_datetime_within_the_run(tools_kernel: FunctionKernel) -> None:
    # A run stores a visit's start as epoch seconds and the record makes the datetime when it is read.
    from datetime import UTC, datetime

    from kavalai.workflow import RunResult

    engine = WorkflowEngine(_adder().build(), tools_kernel)
    result = await engine.run({"a": 2, "b": 40})
    after = datetime.now(UTC)
    starts = [record.started_at for record in result.trace]
    assert [type(start) for start in starts] == [datetime] * 3
    assert all(start.tzinfo is UTC for start in starts)
    assert result.started_at <= starts[0]
    assert starts == sorted(starts)
    assert starts[-1] <= after
    assert result.trace[0].started_at is starts[0]  # made once, kept
    assert type(result.started_at) is datetime  # the run's own start too
    assert result.started_at.tzinfo is UTC
    assert result.started_at is result.started_at
    back = RunResult.from_dict(result.to_dict())
    assert [record.started_at for record in back.trace] == starts
    assert back.trace == result.trace
    assert back.started_at == result.started_at


async def test_a_run_s_records_hold_every_field_of_a_node_trace(tools_kernel: FunctionKernel) -> None:
    # The run makes its records without NodeTrace's __init__ (field by field): a field added to NodeTrace and not
    # set there would be missing (an AttributeError on reading it) rather than at its default.
    from dataclasses import fields

    from kavalai.workflow import NodeTrace

    engine = WorkflowEngine(_adder().build(), tools_kernel)
    result = await engine.run({"a": 2, "b": 40})
    assert result.ok, result.error
    for record in result.trace:
        values = {field.name: getattr(record, field.name) for field in fields(NodeTrace)}
        assert NodeTrace(**values) == record
    add = result.trace[1]
    assert (add.node, add.kind, add.visit, add.status, add.attempts, add.branch, add.next) == (
        "add",
        "function",
        1,
        "succeeded",
        1,
        None,
        "done",
    )
    assert (add.inputs, add.output, add.error, add.tool_calls) == ({"a": 2, "b": 40}, {"result": 42}, None, [])
