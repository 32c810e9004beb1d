"""Loading Kaval.AI 1.0 documents: detection by shape, the three entry points, and every load-time check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kavalai import FunctionKernel
from kavalai.workflow import EndNode, StartNode, WorkflowDefinitionError, WorkflowEngine
from kavalai.workflow.kaval import is_kaval_document

from .conftest import DATA

TYPES = {
    "input": {"type": "object", "properties": {"user_message": {"type": "string"}}},
    "output": {"type": "object", "properties": {"agent_response": {"type": "string"}}},
}


def doc(nodes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "wf", "data_types": dict(TYPES), "nodes": nodes, **extra}


MINIMAL = [{"name": "s", "type": "start", "next": "e"}, {"name": "e", "type": "end", "output": "output"}]


def test_every_example_loads_from_its_file() -> None:
    for path in sorted(DATA.glob("*.yaml")):
        engine = WorkflowEngine.from_yaml_path(path)
        assert engine.workflow.nodes, path
        assert isinstance(engine.workflow.nodes[engine.workflow.start], StartNode)


def test_from_yaml_takes_text_a_path_string_or_a_path(tmp_path: Path) -> None:
    text = (DATA / "support_agent.yaml").read_text()
    by_text = WorkflowEngine.from_yaml(text)
    by_str = WorkflowEngine.from_yaml(str(DATA / "support_agent.yaml"))
    by_path = WorkflowEngine.from_yaml(DATA / "support_agent.yaml")
    by_dict = WorkflowEngine.from_dict(yaml.safe_load(text))
    names = [list(e.workflow.nodes) for e in (by_text, by_str, by_path, by_dict)]
    assert names[0] == ["begin", "classify", "route", "technical_help", "refund_reply", "general_reply", "finish"]
    assert names.count(names[0]) == 4


def test_our_own_format_still_loads_from_a_path_and_from_text(tmp_path: Path) -> None:
    ours = (
        "name: ours\ninput: object\noutput: object\nnodes:\n  - {id: s, kind: start, next: e}\n  - {id: e, kind: end}\n"
    )
    file = tmp_path / "ours.yaml"
    file.write_text(ours)
    assert WorkflowEngine.from_yaml(file).workflow.name == "ours"
    assert WorkflowEngine.from_yaml(str(file)).workflow.name == "ours"
    assert WorkflowEngine.from_yaml(ours).workflow.name == "ours"
    assert WorkflowEngine.from_dict(yaml.safe_load(ours)).workflow.name == "ours"


def test_a_missing_file_is_named() -> None:
    with pytest.raises(WorkflowDefinitionError, match="Cannot read workflow file 'nowhere.yaml'"):
        WorkflowEngine.from_yaml("nowhere.yaml")


def test_detection_by_shape() -> None:
    assert is_kaval_document({"nodes": [{"name": "s", "type": "start"}]})
    assert is_kaval_document({"data_types": {}, "nodes": []})
    assert not is_kaval_document({"nodes": [{"id": "s", "kind": "start"}]})
    assert not is_kaval_document({"name": "x", "types": {}, "nodes": []})
    assert not is_kaval_document(["not", "a", "mapping"])


def test_the_tools_are_registered_on_the_given_kernel() -> None:
    kernel = FunctionKernel()
    engine = WorkflowEngine.from_yaml_path(DATA / "ponds.yaml", kernel=kernel)
    assert engine.kernel is kernel
    assert str(kernel.get_tool_definition("python://measure_pond").uri) == "python://measure_pond"


def test_end_node_and_types_are_ours() -> None:
    engine = WorkflowEngine.from_dict(doc(MINIMAL))
    assert isinstance(engine.workflow.nodes["e"], EndNode)
    assert engine.workflow.input_type.name == "input"
    assert engine.workflow.output_type.name == "output"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (doc([{"name": "e", "type": "end"}]), "exactly one 'start' node, found 0"),
        (doc([{"name": "s", "type": "start", "next": "s"}]), "at least one 'end' node"),
        (
            doc([*MINIMAL, {"name": "e2", "type": "end", "output": "other"}], data_types={**TYPES, "other": {}}),
            r"same output data type, found \['other', 'output'\]",
        ),
        (doc([{"name": "s", "type": "start", "next": "ee"}, MINIMAL[1]]), "unknown node 'ee'. Did you mean 'e'?"),
        (doc(MINIMAL, start="begin"), "Field 'start' names 'begin', but the start node is 's'"),
        (doc(MINIMAL, llm_model="gpt-4o"), "'provider/model' form"),
        (doc(MINIMAL, llm_model="my.pkg.Client/x"), "never an importable Python path"),
        (doc(MINIMAL, llm_kwargs={"max_tokens": 5}), r"unknown llm_kwargs \['max_tokens'\]"),
        (doc(MINIMAL, llm_kwargs={"top_p": 0.5}), "not sent by kavalai's model clients"),
        (doc(MINIMAL, data_types={**TYPES, "x": {"properties": {"a": {"$ref": "nope"}}}}), "not a declared data type"),
        (doc(MINIMAL, data_types={**TYPES, "x": {"propertys": {}}}), "unknown attribute 'propertys'"),
        (doc([{"name": "s", "type": "start", "next": "e", "nxt": "e"}, MINIMAL[1]]), "nodes.0.start.nxt"),
    ],
)
def test_load_time_checks(document: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        WorkflowEngine.from_dict(document)


def _llm(name: str = "ask", **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": "llm", "prompt": "p", "output": "output", "next": "e", **fields}


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (_llm(output="undeclared"), "output 'undeclared' is not declared in data_types."),
        (_llm(prompt="{{ templates.tone }}"), "reads templates.tone, which is not declared"),
        (_llm(prompt="{{ context.clasification.intent }}"), "'clasification', which is neither 'input' nor"),
        (_llm(inputs={"x": {"type": "context", "value": "inptu.x"}}), r"Did you mean 'input'\?"),
        (_llm(inputs={"x": {"type": "context", "value": "__import__('os')"}}), "field 'inputs.x'"),
        (_llm(llm_kwargs={"temperature": "hot"}), "invalid llm_kwargs"),
        (
            {"name": "r", "type": "rag_query", "query": "q", "output": "hits", "next": "e", "service": "pg://u@h/db"},
            "looks like a connection string",
        ),
    ],
)
def test_node_checks(node: dict[str, Any], message: str) -> None:
    document = doc([{"name": "s", "type": "start", "next": node["name"]}, node, MINIMAL[1]])
    with pytest.raises(WorkflowDefinitionError, match=message):
        WorkflowEngine.from_dict(document)


def test_an_if_condition_reading_an_unknown_variable_fails_at_load() -> None:
    nodes = [
        {"name": "s", "type": "start", "next": "b"},
        {"name": "b", "type": "if", "condition": "scroe > 3", "then": "e", "else": "e"},
        MINIMAL[1],
    ]
    with pytest.raises(WorkflowDefinitionError, match=r"Node 'b': field 'condition': 'scroe > 3' reads 'scroe'"):
        WorkflowEngine.from_dict(doc(nodes))


def test_parallel_branches_must_write_different_outputs() -> None:
    nodes = [
        {"name": "s", "type": "start", "next": "fan"},
        {"name": "fan", "type": "parallel", "branches": ["a", "b"], "next": "e"},
        _llm("a"),
        _llm("b"),
        MINIMAL[1],
    ]
    with pytest.raises(WorkflowDefinitionError, match=r"branches 'a' and 'b' both write \['output'\]"):
        WorkflowEngine.from_dict(doc(nodes))


def test_a_node_named_like_a_reserved_word_keeps_working() -> None:
    nodes = [{"name": "s", "type": "start", "next": "input"}, _llm("input"), MINIMAL[1]]
    engine = WorkflowEngine.from_dict(doc(nodes))
    assert "input#" in engine.workflow.nodes


def test_node_names_need_not_be_identifiers() -> None:
    nodes = [{"name": "s", "type": "start", "next": "ask-model"}, _llm("ask-model"), MINIMAL[1]]
    assert "ask-model" in WorkflowEngine.from_dict(doc(nodes)).workflow.nodes


def test_dialect_required_false_ref_and_required_list() -> None:
    types = {
        **TYPES,
        "line": {"properties": {"sku": {}, "qty": {"type": "integer", "required": False, "default": 1}}},
        "order": {"properties": {"lines": {"type": "array", "items": {"$ref": "line"}}}},
        "scored": {
            "properties": {"intent": {"type": "string"}, "confidence": {"type": "number"}},
            "required": ["intent"],
        },
    }
    workflow = WorkflowEngine.from_dict(doc(MINIMAL, data_types=types)).workflow
    order = workflow.types.get("order")
    assert order is not None
    value = order.validate({"lines": [{"sku": "bun"}]})
    assert (value.lines[0].sku, value.lines[0].qty) == ("bun", 1)
    with pytest.raises(ValueError, match="sku"):
        order.validate({"lines": [{"qty": 2}]})  # sku is required: upstream's default
    with pytest.raises(ValueError, match="extra"):
        order.validate({"lines": [], "surplus": 1})
    scored = workflow.types.get("scored")
    assert scored is not None
    assert scored.validate({"intent": "x"}).confidence is None


def test_our_graph_checks_apply_unreachable_nodes_and_loops_to_start() -> None:
    stray = [*MINIMAL, _llm("stray")]
    with pytest.raises(WorkflowDefinitionError, match="Node 'stray' cannot be reached from the start node 's'"):
        WorkflowEngine.from_dict(doc(stray))
    back = [{"name": "s", "type": "start", "next": "ask"}, _llm("ask", next="s"), MINIMAL[1]]
    with pytest.raises(WorkflowDefinitionError, match="leads back to the start node 's'"):
        WorkflowEngine.from_dict(doc(back))


def test_stream_flags_and_history_settings_are_accepted() -> None:
    node = _llm(stream_output=True, stream_delta=True, use_history=False, history_limit=3, history_max_chars=100)
    engine = WorkflowEngine.from_dict(doc([{"name": "s", "type": "start", "next": "ask"}, node, MINIMAL[1]]))
    assert "ask" in engine.workflow.nodes


def test_a_directly_built_document_raises_pydantics_error_with_upstreams_wording() -> None:
    from pydantic import ValidationError

    from kavalai.workflow.kaval import LLMNode, WorkflowGraph

    with pytest.raises(ValidationError, match="exactly one 'start' node, found 0"):
        WorkflowGraph(name="wf", data_types=dict(TYPES), nodes=[{"name": "e", "type": "end"}])
    graph = WorkflowGraph(name="wf", data_types=dict(TYPES), nodes=MINIMAL)
    assert (graph.start, graph.output_type, list(graph.node_map)) == ("s", "output", ["s", "e"])
    assert LLMNode(name="n", prompt="p", output="output", next="e").use_history is True


def test_the_tool_server_sections_register_servers_without_connecting() -> None:
    document = doc(
        MINIMAL,
        rest_servers=[
            {"name": "crm", "url": "https://crm.example.com/api", "username_env": "CRM_U", "password_env": "CRM_P"},
            {"name": "other", "url_env": "OTHER_URL"},
        ],
        mcp_servers=[{"name": "village", "command": "python", "args": ["-m", "village_mcp"]}],
    )
    kernel = WorkflowEngine.from_dict(document).kernel
    assert [state.name for state in kernel.mcp_server_states()] == ["village"]
    with pytest.raises(WorkflowDefinitionError, match=r"Field 'rest_servers\[0\]'") as caught:
        WorkflowEngine.from_dict(doc(MINIMAL, rest_servers=[{"name": "bad"}]))
    assert caught.value.field == "rest_servers[0]"


def test_a_python_function_that_cannot_be_imported_is_named() -> None:
    document = doc(MINIMAL, python_functions=[{"name": "x", "path": "no_such_module_here.func"}])
    with pytest.raises(WorkflowDefinitionError, match=r"python_functions\[0\]'.*cannot import module"):
        WorkflowEngine.from_dict(document)
