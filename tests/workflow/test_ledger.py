"""The run ledger's own counting of common values agrees with the general size walk it short-cuts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel, pythontool
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from kavalai.workflow._executor import Execution
from kavalai.workflow._ledger import RunLedger, _size, flat_size
from kavalai.workflow._sizes import text_size
from kavalai.workflow.errors import RunMemoryError

SHORT_CUT: list[Any] = [
    {},
    {"result": 5},
    {"result": "a text", "n": None, "f": 1.5, "b": False},
    {str(i): i for i in range(16)},
    {"nested": {"result": 5}},  # one key holding a flat dict (a start node's inputs)
]
WALKED: list[Any] = [
    {str(i): i for i in range(17)},  # past the short cut's 16 keys
    {1: "a key that is no text"},
    {"nested": {"deeper": {"result": 5}}},
    {"two": {"result": 5}, "keys": 1},
    {"items": [1, 2, 3]},
    [1, "two", {"three": 3}],
]


@pytest.mark.parametrize("value", SHORT_CUT, ids=repr)
def test_a_flat_dict_is_counted_no_lower_than_the_general_walk_counts_it(value: Any) -> None:
    assert _size(value, 10**9) >= text_size(value, 10**9)


@pytest.mark.parametrize("value", WALKED, ids=repr)
def test_other_values_are_counted_by_the_general_walk(value: Any) -> None:
    assert _size(value, 10**9) == text_size(value, 10**9)


def test_numbers_and_texts_are_counted_at_once() -> None:
    assert [_size(value, 10**9) for value in (5, 2.5, True, None, "", "a text")] == [8, 8, 8, 8, 0, 6]


def test_holding_a_growing_value_fails_the_run_naming_the_node() -> None:
    ledger = RunLedger(max_value_size=10)  # a run budget of 640
    ledger.hold("grow", {"result": "x" * 300})
    ledger.hold("grow", {"result": "x" * 600})  # replaces the earlier value: 600 + a little, under 640
    with pytest.raises(RunMemoryError) as caught:
        ledger.hold("other", {"result": "x" * 100})
    assert caught.value.node == "other"


class _Echo(BaseModel):
    text: str
    number: float
    count: int
    flag: bool
    nothing: None = None


@pythontool
async def echo(text: str, number: float, count: int, flag: bool, nothing: None = None) -> _Echo:
    """Return the arguments as a model of plain fields."""
    return _Echo(text=text, number=number, count=count, flag=flag, nothing=nothing)


@pytest.mark.parametrize("number", [2.5, float("inf")], ids=["finite", "infinite"])
async def test_a_run_counts_its_function_nodes_as_the_ledger_sizes_their_values(number: float) -> None:
    # A function node's output and inputs are sized where they are copied (runners), each with flat_size's
    # counting written out; a run's trace total must be what the ledger's own sizing gives for the same values.
    kernel = FunctionKernel()
    kernel.register_python_tool("t.echo", echo)
    inputs = {"text": "a text of some length", "number": number, "count": 7, "flag": True, "nothing": None}
    builder = WorkflowBuilder("sizes").start(next="one")
    builder.function("one", tool="python://t.echo", inputs=inputs, next="two")
    builder.function(
        "two", tool="python://t.echo", inputs={**inputs, "text": "one.text", "count": "one.count"}, next="end"
    )
    engine = WorkflowEngine(builder.end("end").build(), kernel)
    execution = engine._execution({}, None, engine.timeout)
    assert isinstance(execution, Execution)
    result = await execution.run()
    assert result.ok, result.error
    ledger = execution._ledger
    functions = [record for record in result.trace if record.kind == "function"]
    assert len(functions) == 2
    expected = sum(_size(record.output, 10**9) for record in result.trace)
    expected += sum(_size(record.inputs, 10**9) for record in result.trace if record.inputs is not None)
    assert ledger._trace_total == expected
    assert ledger.total == expected + sum(ledger._held.values())
    for record in functions:
        if number == 2.5:
            assert flat_size(record.inputs) >= 0  # sized in the copying pass
            assert flat_size(record.output) >= 0
        else:
            assert flat_size(record.inputs) == -1  # an infinite float: the general way


async def test_a_function_nodes_inputs_keep_the_order_and_values_of_its_bindings() -> None:
    # The bindings are read from a template holding the literals in place (Workflow.reading): each path's value
    # fills its own key, so the trace and the tool see the bindings in the order they were written.
    kernel = FunctionKernel()
    kernel.register_python_tool("t.echo", echo)
    literals = {"text": "first", "number": 1.5, "count": 3, "flag": False}
    builder = WorkflowBuilder("order").start(next="one")
    builder.function("one", tool="python://t.echo", inputs=literals, next="two")
    mixed = {"count": "one.count", "flag": True, "text": "one.text", "number": 2.0}
    builder.function("two", tool="python://t.echo", inputs=mixed, next="end")
    result = await WorkflowEngine(builder.end("end").build(), kernel).run({})
    assert result.ok, result.error
    one, two = (record for record in result.trace if record.kind == "function")
    assert list(one.inputs or {}) == ["text", "number", "count", "flag"]
    assert list(two.inputs or {}) == ["count", "flag", "text", "number"]
    assert two.inputs == {"count": 3, "flag": True, "text": "first", "number": 2.0}
    assert two.output == {"text": "first", "number": 2.0, "count": 3, "flag": True, "nothing": None}


@pythontool
def counts_in(options: Any) -> str:
    """Report the options as given, then count this call in them (a tool changing its input)."""
    seen = repr(options)
    options["calls"] = options.get("calls", 0) + 1
    options["list"].append("x")
    return seen


async def test_a_literal_dict_or_list_binding_is_each_runs_own() -> None:
    # A node's literal bindings are read from a template made once per workflow: a dict or list literal handed to a
    # tool as it is would let the tool change it for every later run of the workflow.
    kernel = FunctionKernel()
    kernel.register_python_tool("t.counts_in", counts_in)
    builder = WorkflowBuilder("literals").start(next="one")
    builder.function("one", tool="python://t.counts_in", inputs={"options": {"k": 1, "list": []}}, next="end")
    engine = WorkflowEngine(builder.end("end").build(), kernel)
    seen = []
    for _ in range(3):
        result = await engine.run({})
        assert result.ok, result.error
        seen.append(result.trace[-2].output)
    assert seen == [{"result": "{'k': 1, 'list': []}"}] * 3
