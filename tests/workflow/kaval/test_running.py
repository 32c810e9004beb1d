"""Running Kaval.AI 1.0 documents on our engine: offline where no model is needed, with ScriptedLLM otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from kavalai.llm.messages import AssistantMessage, SystemMessage, UserMessage
from kavalai.testing import ScriptedLLM, tool_call
from kavalai.workflow import (
    NodeFinished,
    NodeStarted,
    RunFinished,
    RunStatus,
    VisitLimitError,
    WorkflowEngine,
)
from kavalai.workflow.kaval import InMemoryHistory

from .conftest import DATA, ListRetriever

TYPES = {
    "input": {"type": "object", "properties": {"user_message": {"type": "string"}}},
    "output": {"type": "object", "properties": {"agent_response": {"type": "string"}}},
}


def doc(nodes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "wf", "data_types": {**TYPES, **extra.pop("types", {})}, "nodes": nodes, **extra}


def chain(*middle: dict[str, Any]) -> list[dict[str, Any]]:
    """start -> middle... -> end, each node's ``next`` filled in."""
    nodes: list[dict[str, Any]] = [{"name": "s", "type": "start", "next": middle[0]["name"]}]
    for node, after in zip(middle, [*middle[1:], {"name": "e"}], strict=True):
        nodes.append({**node, "next": after["name"]} if node.get("type") not in ("if", "switch") else node)
    return [*nodes, {"name": "e", "type": "end", "output": "output"}]


async def test_a_function_workflow_runs_offline() -> None:
    engine = WorkflowEngine.from_yaml_path(DATA / "ponds.yaml")
    deep = await engine.run({"pond": "mill"})
    shallow = await engine.run({"pond": "duck"})
    assert deep.completed
    assert deep.status == "completed"
    assert deep.result.status is RunStatus.SUCCEEDED
    assert deep.output_data == {"depth_cm": 140, "unit": "cm"}
    assert deep.visited == ["begin", "measure", "deep_enough", "finish"]
    assert shallow.visited == ["begin", "measure", "deep_enough", "finish_shallow"]
    assert deep.result.trace[1].inputs == {"name": "mill", "unit": "cm"}


async def test_support_agent_routes_on_the_classification() -> None:
    llm = ScriptedLLM([{"intent": "refund"}, {"agent_response": "Your refund is on its way."}])
    engine = WorkflowEngine.from_yaml_path(DATA / "support_agent.yaml", llm=llm)
    result = await engine.run({"user_message": "I want my money back"})
    assert result.completed, result.error
    assert result.output_data == {"agent_response": "Your refund is on its way."}
    assert result.visited == ["begin", "classify", "route", "refund_reply", "finish"]
    system, user = llm.requests[0].messages
    assert isinstance(system, SystemMessage)
    assert system.content.endswith('INPUT DATA:\ninput:{"user_message": "I want my money back"}')
    assert isinstance(user, UserMessage)
    assert user.content == "I want my money back"
    assert llm.requests[0].response_model is not None


async def test_support_agent_technical_branch_runs_an_agent_with_tools() -> None:
    llm = ScriptedLLM(
        [
            {"intent": "technical"},
            tool_call("python://measure_pond", {"name": "mill", "unit": "cm"}),
            {"agent_response": "The mill pond is 140 cm deep."},
        ]
    )
    engine = WorkflowEngine.from_yaml_path(DATA / "support_agent.yaml", llm=llm)
    from .data.pond_tools import measure_pond

    engine.kernel.register_python_tool("measure_pond", measure_pond)
    result = await engine.run({"user_message": "how deep is the mill pond?"})
    assert result.completed, result.error
    assert result.visited[-2:] == ["technical_help", "finish"]
    agent_trace = result.result.trace[-2]
    assert [call.tool for call in agent_trace.tool_calls] == ["python://measure_pond"]
    assert agent_trace.tool_calls[0].output == {"result": {"depth_cm": 140, "unit": "cm"}}


@pytest.mark.parametrize(
    ("parse", "status", "drafts"),
    [
        ({"intent": "order", "order": {"customer": "Mari", "lines": [{"product": "rye", "quantity": 2}]}}, "stored", 1),
        ({"intent": "order", "order": {"lines": [{"product": "rye"}]}}, "needs_details", 1),
        ({"intent": "question", "order": None}, "not_an_order", 1),
    ],
)
async def test_orders_python_decides_and_absent_outputs_read_as_null(
    parse: dict[str, Any], status: str, drafts: int
) -> None:
    llm = ScriptedLLM([parse, {"body": "Thank you."}])
    engine = WorkflowEngine.from_yaml_path(DATA / "orders.yaml", llm=llm)
    result = await engine.run({"message": "Two rye loaves for Friday, Mari"})
    assert result.completed, result.error
    assert result.output_data["status"] == status
    assert (result.output_data["order_id"] is None) == (status != "stored")
    assert len(llm.requests) == 1 + drafts
    # {% ... %} blocks are not Kaval.AI 1.0 syntax: they reach the model as written, as upstream sends them
    assert "{% for line in context.parsed.order.lines %}" in str(llm.requests[0].messages[0].content)


async def test_a_confirmation_prompt_reads_nested_context_values() -> None:
    parse = {"intent": "order", "order": {"customer": "Mari", "lines": [{"product": "rye", "quantity": 2}]}}
    llm = ScriptedLLM([parse, {"body": "ok"}])
    engine = WorkflowEngine.from_yaml_path(DATA / "orders.yaml", llm=llm)
    result = await engine.run({"message": "m"})
    assert result.completed, result.error
    assert llm.requests[1].messages[0].content.startswith("Confirm order ord-")
    assert "for Mari." in str(llm.requests[1].messages[0].content)


async def test_rag_query_reads_the_retriever_and_the_llm_sees_the_hits() -> None:
    retriever = ListRetriever({"f1": "the mill pond is 140 cm deep", "f2": "the village has one bakery"})
    reply = {"agent_response": "140 cm", "grounded": True, "used_ids": ["f1"]}
    llm = ScriptedLLM([reply])
    engine = WorkflowEngine.from_yaml_path(DATA / "grounded_chatbot.yaml", llm=llm, rag_services=retriever)
    result = await engine.run({"user_message": "how deep is the mill pond"})
    assert result.completed, result.error
    assert result.output_data == reply
    assert retriever.queries == [
        {"text": "how deep is the mill pond", "top_k": 3, "collection": "village", "match": None}
    ]
    hits = result.result.trace[1].output
    assert [hit["source_id"] for hit in hits] == ["f1", "f2"]
    assert '"source_id": "f1"' in str(llm.requests[0].messages[0].content)


async def test_rag_query_without_a_retriever_fails_naming_the_node() -> None:
    engine = WorkflowEngine.from_yaml_path(DATA / "grounded_chatbot.yaml", llm=ScriptedLLM([]))
    result = await engine.run({"user_message": "q"})
    assert not result.completed
    assert result.failed_node == "retrieve"
    assert "Node 'retrieve' (rag_query) needs the RAG service 'default', but none is configured" in str(result.error)
    assert "rag_services=" in str(result.error)


async def test_rag_query_content_store_match_and_min_similarity() -> None:
    retriever = ListRetriever(
        {"a": "pond deep water", "b": "pond water", "c": "pond"},
        metadata={"a": {"lang": "en", "year": 2024}, "b": {"lang": "en", "year": 2024}, "c": {"lang": "et"}},
    )
    rag = {
        "name": "find",
        "type": "rag_query",
        "query": "{{ context.input.user_message }}",
        "output": "facts",
        "store": "content",
        "service": "village",
        "min_similarity": 0.2,
        "match": {"lang": "en", "year": "{{ context.input.year }}"},
    }
    answer = {"name": "say", "type": "llm", "prompt": "Facts: {{ context.facts }}", "output": "output"}
    types = {"input": {"properties": {"user_message": {}, "year": {"type": "integer"}}}}
    engine = WorkflowEngine.from_dict(
        doc(chain(rag, answer), types=types),
        llm=ScriptedLLM([{"agent_response": "x"}]),
        rag_services={"village": retriever},
    )
    result = await engine.run({"user_message": "pond deep water", "year": 2024})
    assert result.completed, result.error
    assert retriever.queries[0]["match"] == {"lang": "en", "year": 2024}  # one placeholder keeps the number
    assert result.result.trace[1].output == "pond deep water\n\npond water"


async def test_history_inputs_placeholders_and_use_history() -> None:
    history = InMemoryHistory(
        contexts=[{"order": {"id": "old"}}, {"order": {"id": "ord-7"}}],
        chat=[UserMessage(content="earlier question"), AssistantMessage(content="earlier answer")],
    )
    node = {
        "name": "ask",
        "type": "llm",
        "prompt": "Last order {{ history.order.id }}. {{ templates.tone }}",
        "inputs": {
            "previous": {"type": "history", "value": "order.id"},
            "tone": {"type": "literal", "value": "formal"},
        },
        "output": "output",
        "history_limit": 1,
    }
    llm = ScriptedLLM([{"agent_response": "x"}])
    engine = WorkflowEngine.from_dict(
        doc(chain(node), templates=[{"name": "tone", "value": "Be brief."}]), llm=llm, history=history
    )
    result = await engine.run({"user_message": "now"})
    assert result.completed, result.error
    messages = llm.requests[0].messages
    assert messages[0].content == "Last order ord-7. Be brief.\nINPUT DATA:\nprevious:ord-7\ntone:formal"
    assert [m.content for m in messages[1:]] == ["earlier answer", "now"]  # history_limit: 1


async def test_a_history_input_without_a_history_fails_naming_node_and_input() -> None:
    node = {"name": "ask", "type": "llm", "prompt": "p", "output": "output"}
    node["inputs"] = {"previous": {"type": "history", "value": "order.id"}}
    result = await WorkflowEngine.from_dict(doc(chain(node)), llm=ScriptedLLM([])).run({"user_message": "x"})
    assert result.failed_node == "ask"
    assert "field 'inputs.previous' reads history.order.id, but the engine has no history" in str(result.error)


async def test_use_history_false_sends_no_history() -> None:
    history = InMemoryHistory(chat=[UserMessage(content="old")])
    node = {"name": "ask", "type": "llm", "prompt": "p", "output": "output", "use_history": False}
    llm = ScriptedLLM([{"agent_response": "x"}])
    await WorkflowEngine.from_dict(doc(chain(node)), llm=llm, history=history).run({"user_message": "new"})
    assert [m.content for m in llm.requests[0].messages] == ["p", "new"]


async def test_per_node_model_and_llm_kwargs() -> None:
    fast, careful = ScriptedLLM([{"intent": "x"}]), ScriptedLLM([{"agent_response": "y"}])
    first = {"name": "one", "type": "llm", "prompt": "p", "output": "c", "llm_model": "openai/fast"}
    second = {"name": "two", "type": "llm", "prompt": "p", "output": "output"}
    second["llm_kwargs"] = {"temperature": 0.0, "max_output_tokens": 50}
    document = doc(
        chain(first, second),
        types={"c": {"properties": {"intent": {}}}},
        llm_model="openai/careful",
        llm_kwargs={"temperature": 0.7},
    )
    engine = WorkflowEngine.from_dict(document, llms={"openai/fast": fast, "openai/careful": careful})
    result = await engine.run({"user_message": "m"})
    assert result.completed, result.error
    assert len(fast.requests) == len(careful.requests) == 1
    settings = careful.requests[0].settings
    assert settings is not None
    assert (settings.temperature, settings.max_tokens) == (0.0, 50)


async def test_parallel_branches_join_and_both_outputs_are_read() -> None:
    def llm_node(name: str, output: str) -> dict[str, Any]:
        return {"name": name, "type": "llm", "prompt": name, "output": output, "next": "join"}

    nodes = [
        {"name": "s", "type": "start", "next": "fan"},
        {"name": "fan", "type": "parallel", "branches": ["left", "right"], "next": "join"},
        llm_node("left", "l"),
        llm_node("right", "r"),
        {"name": "join", "type": "llm", "prompt": "{{ context.l.v }}+{{ context.r.v }}", "output": "output"},
        {"name": "e", "type": "end", "output": "output"},
    ]
    nodes[4]["next"] = "e"
    types = {"l": {"properties": {"v": {}}}, "r": {"properties": {"v": {}}}}

    def reply(request: Any) -> dict[str, Any]:
        prompt = request.messages[0].content
        return {"v": prompt} if prompt in ("left", "right") else {"agent_response": prompt}

    result = await WorkflowEngine.from_dict(doc(nodes, types=types), llm=ScriptedLLM(reply)).run({"user_message": "m"})
    assert result.completed, result.error
    assert result.output_data == {"agent_response": "left+right"}
    assert sorted(result.visited[1:3]) == ["left", "right"]
    assert result.visited[3:] == ["fan", "join", "e"]


async def test_switch_booleans_and_a_missing_case() -> None:
    switch = {"name": "sw", "type": "switch", "expr": "input.user_message == 'yes'", "cases": {"true": "e"}}
    nodes = [{"name": "s", "type": "start", "next": "sw"}, switch, {"name": "e", "type": "end", "output": "input"}]
    engine = WorkflowEngine.from_dict(doc(nodes))
    assert (await engine.run({"user_message": "yes"})).completed
    failed = await engine.run({"user_message": "no"})
    assert failed.failed_node == "sw"
    assert "field 'expr' is 'false', which matches no case ('true') and there is no default" in str(failed.error)


async def test_an_end_returning_an_unwritten_variable_fails_clearly() -> None:
    nodes = [{"name": "s", "type": "start", "next": "e"}, {"name": "e", "type": "end", "output": "output"}]
    result = await WorkflowEngine.from_dict(doc(nodes)).run({"user_message": "m"})
    assert result.failed_node == "e"
    assert "returns the context variable 'output', which no node has written" in str(result.error)


async def test_a_loop_is_stopped_by_our_visit_limit() -> None:
    counter = {
        "name": "count",
        "type": "function",
        "tool": "python://measure_pond",
        "output": "reading",
        "next": "again",
    }
    counter["inputs"] = {"name": {"type": "literal", "value": "mill"}, "unit": {"type": "literal", "value": "cm"}}
    nodes = [
        {"name": "s", "type": "start", "next": "count"},
        counter,
        {"name": "again", "type": "if", "condition": "reading.depth_cm > 0", "then": "count", "else": "e"},
        {"name": "e", "type": "end", "output": "reading"},
    ]
    document = doc(nodes, types={"reading": {"properties": {"depth_cm": {"type": "integer"}, "unit": {}}}})
    document["python_functions"] = [{"name": "measure_pond", "path": "pond_tools.measure_pond"}]
    engine = WorkflowEngine.from_dict(document, base_dir=DATA, max_visits=7)
    result = await engine.run({"user_message": "m"})
    assert isinstance(result.result.error, VisitLimitError)
    assert len(result.visited) == 7  # every allowed visit ran; the eighth was refused


async def test_the_event_stream_reports_kaval_nodes() -> None:
    engine = WorkflowEngine.from_yaml_path(DATA / "ponds.yaml")
    events = [event async for event in engine.stream({"pond": "duck"})]
    started = [e.node for e in events if isinstance(e, NodeStarted)]
    finished = [e.trace.node for e in events if isinstance(e, NodeFinished)]
    assert started == finished == ["begin", "measure", "deep_enough", "finish_shallow"]
    assert isinstance(events[-1], RunFinished)
    assert events[-1].result.completed


async def test_a_tool_error_names_the_node_and_the_tool() -> None:
    engine = WorkflowEngine.from_yaml_path(DATA / "ponds.yaml")
    result = await engine.run({"pond": "lake"})
    assert result.failed_node == "measure"
    assert "python://measure_pond" in str(result.error)


async def test_timeout_seconds_bounds_an_llm_node() -> None:
    import anyio

    from kavalai.workflow import NodeTimeoutError

    async def slow(request: Any) -> dict[str, Any]:
        await anyio.sleep(30)
        return {"agent_response": "late"}

    node = {"name": "ask", "type": "llm", "prompt": "p", "output": "output", "llm_kwargs": {"timeout_seconds": 0.05}}
    result = await WorkflowEngine.from_dict(doc(chain(node)), llm=ScriptedLLM(slow)).run({"user_message": "m"})
    assert isinstance(result.result.error, NodeTimeoutError)
    assert result.failed_node == "ask"
