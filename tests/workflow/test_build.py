"""Build-time validation: every definition error is caught by build() or the YAML loader, before any run."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from kavalai.workflow import (
    FunctionNode,
    RetryPolicy,
    StartNode,
    Workflow,
    WorkflowBuilder,
    WorkflowDefinitionError,
)
from kavalai.workflow._document import workflow_from_document


class Folder(BaseModel):
    folder: str


class Count(BaseModel):
    files: int


def _doc(*nodes: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": "t", "input": "object", "output": "object", **top, "nodes": list(nodes)}


START = {"id": "start", "kind": "start", "next": "work"}
WORK = {"id": "work", "kind": "function", "tool": "python://t.inc", "inputs": {"x": 1}, "next": "end"}
END = {"id": "end", "kind": "end"}


def _fails(document: dict[str, Any], message: str) -> WorkflowDefinitionError:
    with pytest.raises(WorkflowDefinitionError, match=message) as caught:
        workflow_from_document(document)
    return caught.value


def test_builder_builds_a_checked_workflow() -> None:
    workflow = (
        WorkflowBuilder("count", input=Folder, output=Count, description="Count files.")
        .start(next="listing")
        .function("listing", tool="python://fs.ls", inputs={"path": "input.folder"}, next="done", timeout=5)
        .end("done", outputs={"files": {"expr": "len(listing.entries)"}})
        .limits(max_visits=10, timeout=30)
        .build()
    )
    assert isinstance(workflow, Workflow)
    assert (workflow.start, workflow.input_type.name, workflow.output_type.name) == ("start", "Folder", "Count")
    assert (workflow.max_visits, workflow.timeout) == (10, 30)
    assert list(workflow.nodes) == ["start", "listing", "done"]
    assert isinstance(workflow.nodes["listing"], FunctionNode)
    assert workflow.bindings("listing")["path"].kind == "path"
    assert workflow.bindings("done")["files"].kind == "expr"
    assert repr(workflow) == "<Workflow 'count': 3 nodes, Folder -> Count>"


def test_bindings_tell_paths_from_literals() -> None:
    workflow = workflow_from_document(
        _doc(
            START,
            {
                "id": "work",
                "kind": "function",
                "tool": "python://t.x",
                "inputs": {
                    "path": "input.folder",
                    "word": "docs",
                    "forced": {"literal": "input.folder"},
                    "number": 3,
                    "listing": ["a", "b"],
                    "own": "work.result[0]",
                },
                "next": "end",
            },
            END,
        )
    )
    kinds = {
        name: (b.kind, b.value if b.kind == "literal" else b.value.source)
        for name, b in workflow.bindings("work").items()
    }
    assert kinds == {
        "path": ("path", "input.folder"),
        "word": ("literal", "docs"),
        "forced": ("literal", "input.folder"),
        "number": ("literal", 3),
        "listing": ("literal", ["a", "b"]),
        "own": ("path", "work.result[0]"),
    }


def test_unknown_next_node_is_named_with_a_suggestion() -> None:
    error = _fails(
        _doc(START, {**WORK, "next": "edn"}, END),
        "Node 'work': field 'next' names the unknown node 'edn'. Did you mean 'end'?",
    )
    assert (error.node, error.field) == ("work", "next")


def test_unknown_branch_and_case_targets() -> None:
    parallel = {"id": "fan", "kind": "parallel", "branches": ["work", "nope"], "next": "end"}
    _fails(_doc({**START, "next": "fan"}, parallel, {**WORK, "next": None}, END), "field 'branches\\[1\\]'")
    switch = {"id": "route", "kind": "switch", "value": "input.k", "cases": {"a": "work", "b": "wrok"}}
    _fails(_doc({**START, "next": "route"}, switch, WORK, END), "field 'cases.b' names the unknown node 'wrok'")


def test_undeclared_type_is_named() -> None:
    error = _fails(
        _doc(START, {**WORK, "output": "Listng"}, END, types={"Listing": {"type": "object"}}),
        "Node 'work': field 'output' names the undeclared type 'Listng'. Did you mean 'Listing'?",
    )
    assert error.field == "output"
    _fails(_doc(START, WORK, END, input="Nope"), "Workflow 't': field 'input' names the undeclared type 'Nope'")


def test_missing_input_or_output_type() -> None:
    document = _doc(START, WORK, END)
    del document["output"]
    error = _fails(document, "Workflow 't': field 'output' is missing")
    assert error.field == "output"


def test_start_nodes_none_or_several() -> None:
    _fails(_doc(WORK, END), "no start node")
    error = _fails(_doc(START, {**START, "id": "start2"}, WORK, END), "2 start nodes \\('start', 'start2'\\)")
    assert error.node == "start2"


def test_unreachable_node() -> None:
    error = _fails(_doc(START, WORK, END, {**WORK, "id": "orphan"}), "Node 'orphan' cannot be reached")
    assert error.node == "orphan"


def test_end_that_cannot_be_reached() -> None:
    loop = {"id": "check", "kind": "if", "condition": "True", "then": "work", "else": "work"}
    _fails(_doc(START, {**WORK, "next": "check"}, loop, END), "No end node can be reached")


def test_dead_end_outside_a_branch() -> None:
    check = {"id": "check", "kind": "if", "condition": "input.x", "then": "end", "else": "work"}
    error = _fails(
        _doc({**START, "next": "check"}, check, {**WORK, "next": None}, END), "Node 'work' has no 'next' node"
    )
    assert error.field == "next"


def test_branches_must_stay_inside_their_parallel_node() -> None:
    parallel = {"id": "fan", "kind": "parallel", "branches": ["work"], "next": "end"}
    _fails(_doc({**START, "next": "fan"}, parallel, WORK, END), "End node 'end' is reached inside branch 'work'")
    shared = {"id": "fan", "kind": "parallel", "branches": ["a", "b"], "next": "end"}
    a, b = {**WORK, "id": "a", "next": "c"}, {**WORK, "id": "b", "next": "c"}
    _fails(
        _doc({**START, "next": "fan"}, shared, a, b, {**WORK, "id": "c", "next": None}, END),
        "Node 'c' is reached from both branch '.' of parallel node 'fan' and branch '.' of parallel node 'fan'",
    )


def test_duplicate_and_reserved_ids() -> None:
    _fails(_doc(START, WORK, WORK, END), "Node id 'work' is used twice")
    _fails(_doc({**START, "next": "input"}, {**WORK, "id": "input"}, END), "Node id 'input' is reserved")
    _fails(_doc({**START, "next": "len"}, {**WORK, "id": "len"}, END), "Node id 'len' is reserved")


def test_loop_back_to_start_is_refused() -> None:
    check = {"id": "check", "kind": "if", "condition": "True", "then": "end", "else": "start"}
    _fails(_doc(START, {**WORK, "next": "check"}, check, END), "leads back to the start node")


def test_expressions_are_checked() -> None:
    check = {"id": "check", "kind": "if", "condition": "lisitng.result", "then": "end", "else": "end"}
    error = _fails(
        _doc({**START, "next": "check"}, check, END),
        "Node 'check': field 'condition': expression 'lisitng.result' reads 'lisitng'",
    )
    assert error.field == "condition"
    bad = {"id": "check", "kind": "if", "condition": "open('x')", "then": "end", "else": "end"}
    _fails(_doc({**START, "next": "check"}, bad, END), "field 'condition': .* only these functions")
    expr = {**WORK, "inputs": {"x": {"expr": "work.result +"}}}
    _fails(_doc(START, expr, END), "field 'inputs.x'.*does not parse")


def test_templates_and_model_output_types_are_checked() -> None:
    agent = {"id": "work", "kind": "agent", "prompt": "{{ unclosed", "next": "end"}
    _fails(_doc(START, agent, END), "Node 'work': field 'prompt' is not a valid template")
    llm = {"id": "work", "kind": "llm", "prompt": "hi", "output": "integer", "next": "end"}
    _fails(_doc(START, llm, END), "a model's answer is either text")


def test_node_fields_are_validated_with_node_and_field_named() -> None:
    error = _fails(
        _doc(START, {**WORK, "timeout": -1}, END),
        "Node 'work' \\(function\\): field 'timeout': Input should be greater than 0",
    )
    assert (error.node, error.field) == ("work", "timeout")
    _fails(_doc(START, {**WORK, "tool": None}, END), "field 'tool'")
    _fails(_doc(START, {**WORK, "colour": "red"}, END), "field 'colour' is not a known field")
    _fails(_doc(START, {**WORK, "kind": "loop"}, END), "Node 'work': field 'kind' is 'loop'; it must be one of")
    _fails(_doc(START, {**WORK, "id": "9lives"}, END), "field 'id': String should match pattern")
    _fails(_doc(START, WORK, {"kind": "end"}), "Node #3 \\(end\\): field 'id': Field required")


def test_retry_on_names_real_error_classes() -> None:
    _fails(
        _doc(START, {**WORK, "retry": {"retry_on": ["ToolTimeoutErr"]}}, END),
        "'ToolTimeoutErr', which is not a kavalai error class. Did you mean 'ToolTimeoutError'",
    )


def test_retry_policy_delays_grow_and_cap() -> None:
    policy = RetryPolicy(attempts=5, backoff=0.5, multiplier=2, max_backoff=1.5)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, 1.5]


def test_builder_type_conflicts_and_limits() -> None:
    class Folder(BaseModel):  # another class with the same name
        path: str

    builder = WorkflowBuilder("t", input=globals()["Folder"], output=Count)
    with pytest.raises(WorkflowDefinitionError, match="type 'Folder' is declared twice"):
        builder.declare_type(Folder)
    with pytest.raises(WorkflowDefinitionError, match="'max_visits' must be a positive integer"):
        WorkflowBuilder("t").start(next="end").end().limits(max_visits=0).build()


def test_builder_scalar_types_use_builtin_names() -> None:
    workflow = (
        WorkflowBuilder("t", input=int, output=str)
        .start(next="work")
        .function("work", tool="python://t.label", inputs={"n": "input"}, output=str, next="end")
        .end()
        .build()
    )
    assert (workflow.input_type.name, workflow.output_type.name, workflow.node_types["work"].name) == (
        "integer",
        "string",
        "string",
    )


def test_tool_uri_syntax_is_checked_at_build() -> None:
    error = _fails(_doc(START, {**WORK, "tool": "python//t.inc"}, END), "Node 'work': field 'tool': Invalid tool URI")
    assert (error.node, error.field) == ("work", "tool")


def test_a_misspelt_path_is_refused_and_dotted_text_stays_literal() -> None:
    error = _fails(
        _doc(START, {**WORK, "inputs": {"x": "inptu.n"}}, END),
        "Node 'work': field 'inputs.x': 'inptu.n' reads 'inptu', which is neither 'input' nor a node id. "
        "Did you mean 'input'\\? \\(For the text itself, write \\{literal: 'inptu.n'\\}.\\)",
    )
    assert error.field == "inputs.x"
    workflow = workflow_from_document(_doc(START, {**WORK, "inputs": {"file": "notes.md", "x": "work.result"}}, END))
    assert {name: b.kind for name, b in workflow.bindings("work").items()} == {"file": "literal", "x": "path"}


def test_prompt_templates_may_read_only_the_node_inputs() -> None:
    llm = {"id": "work", "kind": "llm", "prompt": "Sum {{ a }} and {{ b }}", "inputs": {"a": 1}, "next": "end"}
    error = _fails(_doc(START, llm, END), "Node 'work': field 'prompt': the template reads 'b', which is not one of")
    assert error.field == "prompt"
    workflow_from_document(_doc(START, {**llm, "prompt": "Sum {{ a }} and {{ input.b }}"}, END))


def test_parallel_branch_mistakes_are_named() -> None:
    twice = {"id": "fan", "kind": "parallel", "branches": ["work", "work"], "next": "end"}
    error = _fails(
        _doc({**START, "next": "fan"}, twice, {**WORK, "next": None}, END),
        "Node 'fan': field 'branches\\[1\\]' names 'work' a second time",
    )
    assert error.field == "branches[1]"
    back = {"id": "fan", "kind": "parallel", "branches": ["work"], "next": "end"}
    _fails(
        _doc({**START, "next": "fan"}, back, {**WORK, "next": "fan"}, END),
        "Node 'fan' is reached from both the main path and branch 'work' of parallel node 'fan'",
    )


def test_a_node_without_next_is_named_before_the_missing_end() -> None:
    error = _fails(_doc(START, {**WORK, "next": None}, END), "Node 'work' has no 'next' node")
    assert (error.node, error.field) == ("work", "next")


def test_json_schema_type_names_are_checked() -> None:
    types = {"Item": {"type": "object", "properties": {"type": {"type": "string"}, "n": {"type": "integr"}}}}
    _fails(
        _doc(START, WORK, END, types=types),
        "Type 'Item' is not a usable JSON Schema: Item.properties.n.type is 'integr', which is not a JSON Schema type",
    )
    fine = {"Item": {"type": "object", "properties": {"type": {"type": "string", "default": {"type": "x"}}}}}
    assert workflow_from_document(_doc(START, WORK, END, types=fine)).types.get("Item") is not None


def test_add_node_takes_node_models_built_elsewhere() -> None:
    workflow = (
        WorkflowBuilder("t")
        .add_node(StartNode(id="begin", next="work"))
        .add_node(FunctionNode(id="work", tool="python://t.inc", inputs={"x": 1}, next="end"))
        .end()
        .build()
    )
    assert (workflow.start, list(workflow.nodes)) == ("begin", ["begin", "work", "end"])
    with pytest.raises(WorkflowDefinitionError, match="Node 'work': field 'next' names the unknown node 'nowhere'"):
        WorkflowBuilder("t").add_node(StartNode(id="begin", next="work")).add_node(
            FunctionNode(id="work", tool="python://t.inc", next="nowhere")
        ).end().build()
