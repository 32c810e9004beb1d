"""Kaval.AI 1.0's ``WorkflowBuilder``: every public method, from ``kavalai.workflow`` (called Kaval.AI's way) and
from ``kavalai.workflow.builder``, building a Kaval.AI document our engine runs."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

from kavalai import RestServer
from kavalai.testing import ScriptedLLM
from kavalai.workflow import Workflow, WorkflowBuilder, WorkflowEngine
from kavalai.workflow.builder import WorkflowBuilder as KavalBuilder
from kavalai.workflow.errors import WorkflowDefinitionError
from kavalai.workflow.models import (
    AgentNode,
    ArgumentInfo,
    FunctionNode,
    IfNode,
    LLMNode,
    ParallelNode,
    RagQueryNode,
    SwitchNode,
    WorkflowGraph,
)


def _typed(builder: Any) -> Any:
    return builder.data_type("input", {"user_message": str}).data_type("output", {"agent_response": str})


def test_called_kaval_ais_way_our_builder_speaks_kaval_ais_vocabulary() -> None:
    kaval = WorkflowBuilder("a", llm_model="openai/x")  # type: ignore[call-arg]
    assert isinstance(kaval, WorkflowBuilder)
    assert kaval.vocabulary == "kaval"
    assert isinstance(KavalBuilder("k"), WorkflowBuilder)
    assert KavalBuilder("k").vocabulary == "kaval"
    chained = WorkflowBuilder("b").data_type("input", {"user_message": str})
    assert isinstance(chained, WorkflowBuilder)
    assert chained.vocabulary == "kaval"
    ours = WorkflowBuilder("c").start(next="done").end("done", outputs={"x": "1"})
    assert isinstance(ours.build(), Workflow)
    with pytest.raises(WorkflowDefinitionError, match="already speaks kavalai's vocabulary"):
        ours.data_type("input", {"x": str})
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        WorkflowBuilder("d").nonsense  # type: ignore[attr-defined]  # noqa: B018


def test_a_minimal_graph_with_a_context_shorthand_input() -> None:
    graph = (
        WorkflowBuilder("demo", description="d", llm_model="openai/x")  # type: ignore[call-arg]
        .data_type("input", {"user_message": str})
        .data_type("output", {"agent_response": str})
        .start("reply")
        .llm("reply", prompt="hi", inputs={"input": "input"}, output="output", next="end")
        .end()
        .build()
    )
    assert isinstance(graph, WorkflowGraph)
    assert (graph.name, graph.description, graph.llm_model, graph.start) == ("demo", "d", "openai/x", "start")
    assert graph.node_map["start"].next == "reply"  # type: ignore[union-attr]
    reply = graph.node_map["reply"]
    assert isinstance(reply, LLMNode)
    assert reply.inputs["input"] == ArgumentInfo(type="context", value="input")


def test_every_node_kind_and_its_fields() -> None:
    info = ArgumentInfo(type="literal", value="x")
    graph = (
        _typed(KavalBuilder("everything"))
        .data_type("flag", {"go": bool})
        .start("decide")
        .if_("decide", condition="True", then="sw", else_="act")
        .switch("sw", expr="input.user_message", cases={"x": "act"}, default="fan")
        .agent("act", prompt="do", output="output", next="call", max_steps=2, allowed_tools=["python://noop"])
        .function(
            "call",
            tool="python://noop",
            output="output",
            next="end",
            inputs={"a": info, "b": {"type": "literal", "value": 5}},
        )
        .parallel("fan", branches=["left"], next="end")
        .rag_query(
            "left", query="{{ context.input.user_message }}", output="docs", next="end", top_k=3, store="content"
        )
        .end()
        .build()
    )
    nodes = graph.node_map
    assert isinstance(nodes["decide"], IfNode)
    assert nodes["decide"].else_ == "act"
    assert isinstance(nodes["sw"], SwitchNode)
    assert nodes["sw"].cases == {"x": "act"}
    assert isinstance(nodes["act"], AgentNode)
    assert nodes["act"].max_steps == 2
    assert isinstance(nodes["call"], FunctionNode)
    assert nodes["call"].inputs == {"a": info, "b": ArgumentInfo(type="literal", value=5)}
    assert isinstance(nodes["fan"], ParallelNode)
    assert nodes["fan"].branches == ["left"]
    assert isinstance(nodes["left"], RagQueryNode)
    assert (nodes["left"].top_k, nodes["left"].store) == (3, "content")


def test_streaming_flags_are_kept_and_default_to_off() -> None:
    graph = (
        _typed(KavalBuilder("streams"))
        .start("reply")
        .llm("reply", prompt="hi", output="output", next="act", stream_output=True, stream_delta=True)
        .agent("act", prompt="do", output="output", next="quiet", stream_instructions=True, stream_partials=True)
        .llm("quiet", prompt="hi", output="output", next="end")
        .end()
        .build()
    )
    reply, act, quiet = (graph.node_map[name] for name in ("reply", "act", "quiet"))
    assert isinstance(reply, LLMNode)
    assert reply.stream_output
    assert reply.stream_delta
    assert isinstance(act, AgentNode)
    assert act.stream_instructions
    assert act.stream_partials
    assert isinstance(quiet, LLMNode)
    assert not (quiet.stream_output)
    assert not (quiet.stream_delta)


def test_data_types_by_fields_schema_and_ref_and_bad_field_types() -> None:
    graph = (
        KavalBuilder("dt")
        .data_type("input", {"user_message": str, "count": int, "score": "number"})
        .data_type("feed", schema={"type": "object", "properties": {"url": {"type": "string"}}})
        .data_type("output", ref="feed")
        .start("end")
        .end()
        .build()
    )
    assert graph.data_types["input"]["properties"] == {
        "user_message": {"type": "string"},
        "count": {"type": "integer"},
        "score": {"type": "number"},
    }
    assert graph.data_types["feed"]["properties"]["url"]["type"] == "string"
    assert graph.data_types["output"] == {"$ref": "feed"}
    with pytest.raises(TypeError, match="Unsupported field type"):
        KavalBuilder("bad").data_type("input", {"blob": bytes})
    with pytest.raises(TypeError, match="Unsupported input spec for 'a'"):
        KavalBuilder("bad").llm("n", prompt="p", output="output", next="end", inputs={"a": 123})  # type: ignore[dict-item]


def test_resources_names_and_templates() -> None:
    graph = (
        _typed(KavalBuilder("res"))
        .start("reply", name="begin")
        .llm("reply", prompt="{{ templates.greeting }}", output="output", next="finish")
        .end(name="finish", output="output")
        .python_function("noop", "kavalai.utils.to_plain")
        .rest_server({"name": "api", "url": "http://127.0.0.1:9"})
        .rest_server(RestServer(name="api2", url="http://127.0.0.1:9"))
        .mcp_server({"name": "m", "command": "echo"})
        .template("greeting", "Hello")
        .build()
    )
    assert (graph.start, "finish" in graph.node_map) == ("begin", True)
    assert graph.python_functions[0].name == "noop"
    assert [server["name"] for server in graph.rest_servers] == ["api", "api2"]
    assert graph.mcp_servers[0]["name"] == "m"
    assert graph.templates[0].name == "greeting"


def test_an_invalid_graph_is_refused_by_build_and_build_engine() -> None:
    builder = _typed(KavalBuilder("broken")).start("ghost").end()
    with pytest.raises(ValidationError, match="ghost"):
        builder.build()
    with pytest.raises(ValueError, match="^validation failed: .*ghost"):
        builder.build_engine()
    with pytest.raises(TypeError, match="agent_service=.... is Kaval.AI 1.0's"):
        _typed(KavalBuilder("ok")).start("end").end().build_engine(agent_service=object())


class Email(BaseModel):
    sender: str
    content: str


class Reply(BaseModel):
    agent_response: str
    mood: Literal["glad", "sad"] = "glad"


async def test_build_engine_runs_with_data_models_used_as_they_are_and_a_client_factory() -> None:
    engine = (
        KavalBuilder("triage", llm_model="openai/fake")
        .data_model("input", Email)
        .data_model("output", Reply)
        .start("reply")
        .llm("reply", prompt="p", inputs={"email": "input"}, output="output", next="end")
        .end()
        .build_engine(client_factory=lambda *a, **k: ScriptedLLM([{"agent_response": "ok"}]), max_node_visits=5)
    )
    assert isinstance(engine, WorkflowEngine)
    assert engine.max_visits == 5
    assert engine.workflow.name == "triage"
    assert engine.workflow.input_type.annotation is Email
    state = await engine.run({"sender": "a@b.c", "content": "hi"})
    assert isinstance(state.output, Reply)
    assert state.output_data == {"agent_response": "ok", "mood": "glad"}
    refused = await engine.run({"sender": "a@b.c"})  # 'content' missing: the Email model refuses it
    assert not refused.ok
    assert "content" in str(refused.error)
    graph = KavalBuilder("g").data_model("input", Email).data_type("output", {"x": str}).start("end").end().build()
    assert set(graph.data_types["input"]["properties"]) == {"sender", "content"}


async def test_the_built_workflow_runs_the_same_as_its_yaml() -> None:
    engine = (
        WorkflowBuilder("greeter", llm_model="openai/fake")  # type: ignore[call-arg]
        .data_type("input", {"user_message": str})
        .data_type("output", {"agent_response": str})
        .start("reply")
        .llm("reply", prompt="Greet.", inputs={"input": "input"}, output="output", next="end")
        .end()
        .build_engine(llm=ScriptedLLM([{"agent_response": "Hello!"}]))
    )
    state = await engine.run({"user_message": "hi"})
    assert state.completed
    assert state.visited == ["start", "reply", "end"]
    assert state.output_data == {"agent_response": "Hello!"}
