"""``agent`` and ``llm`` nodes, driven by ScriptedLLM (the only fake: everything else is real)."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call
from kavalai.workflow import (
    NodeError,
    NodeTimeoutError,
    RunStatus,
    WorkflowBuilder,
    WorkflowDefinitionError,
    WorkflowEngine,
)


class Question(BaseModel):
    a: int
    b: int
    who: str = "Ada"


class Answer(BaseModel):
    total: int
    note: str


def _agent_workflow(**agent: object) -> WorkflowBuilder:
    options: dict[str, object] = {
        "prompt": "Hello {{ who }}: what is {{ a }} + {{ b }}? (asked by {{ input.who }})",
        "inputs": {"a": "input.a", "b": "input.b", "who": "input.who"},
        "instructions": "Use tools. The user is {{ who }}.",
        "allowed_tools": ["python://t.add"],
        "max_steps": 3,
        "output": Answer,
        "next": "end",
        **agent,
    }
    return (
        WorkflowBuilder("ask", input=Question, output=Answer)
        .start(next="solve")
        .agent("solve", **options)  # type: ignore[arg-type]
        .end("end", outputs={"total": "solve.total", "note": "solve.note"})
    )


async def test_agent_node_calls_tools_and_returns_a_typed_output(tools_kernel: FunctionKernel) -> None:
    llm = ScriptedLLM([tool_call("python://t.add", {"a": 2, "b": 3}), {"total": 5, "note": "added"}])
    engine = WorkflowEngine(_agent_workflow().build(), tools_kernel, llm=llm)
    result = await engine.run({"a": 2, "b": 3})
    assert result.ok, result.error
    assert result.output == Answer(total=5, note="added")
    first = llm.requests[0]
    assert first.tool_names == ["python://t.add"]  # allowed_tools reached the agent
    assert first.response_model is Answer
    assert first.messages[0].content == "Use tools. The user is Ada."
    assert first.messages[-1].content == "Hello Ada: what is 2 + 3? (asked by Ada)"
    solve = result.trace[1]
    assert solve.inputs == {"prompt": "Hello Ada: what is 2 + 3? (asked by Ada)", "a": 2, "b": 3, "who": "Ada"}
    assert [(c.tool, c.arguments, c.output, c.error) for c in solve.tool_calls] == [
        ("python://t.add", {"a": 2, "b": 3}, {"result": 5}, None)
    ]
    assert solve.output == {"total": 5, "note": "added"}


async def test_agent_tool_errors_are_traced(tools_kernel: FunctionKernel) -> None:
    llm = ScriptedLLM([tool_call("python://t.add", {"a": "x"}), {"total": 0, "note": "gave up"}])
    result = await WorkflowEngine(_agent_workflow().build(), tools_kernel, llm=llm).run({"a": 1, "b": 1})
    assert result.ok
    (call,) = result.trace[1].tool_calls
    assert call.output is None
    assert call.error is not None
    assert "python://t.add" in call.error


async def test_agent_max_steps_fails_the_node_and_keeps_its_tool_calls(tools_kernel: FunctionKernel) -> None:
    llm = ScriptedLLM([tool_call("python://t.add", {"a": 1, "b": 1})] * 3)
    result = await WorkflowEngine(_agent_workflow(max_steps=2).build(), tools_kernel, llm=llm).run({"a": 1, "b": 1})
    assert isinstance(result.error, NodeError)
    assert (result.error.node, result.error.field) == ("solve", "max_steps")
    assert "max_steps=2" in str(result.error)
    assert len(result.trace[-1].tool_calls) == 1


async def test_agent_answer_that_does_not_fit_fails_the_node(tools_kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(['{"total": "many"}', '{"total": "still many"}'])
    result = await WorkflowEngine(_agent_workflow().build(), tools_kernel, llm=llm).run({"a": 1, "b": 1})
    assert result.status is RunStatus.FAILED
    assert result.failed_node == "solve"
    assert str(result.error).startswith("Node 'solve'")
    assert "does not fit Answer: total: Input should be a valid integer" in str(result.error)
    assert type(result.error.__cause__).__name__ == "StructuredOutputError"


async def test_text_agent_and_template_errors(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output=str)
        .start(next="talk")
        .agent("talk", prompt="Say hi to {{ name }}", inputs={"name": "input.name"}, next="end")
        .end("end", outputs=None)
        .build()
    )
    engine = WorkflowEngine(workflow, tools_kernel, llm=ScriptedLLM(["hi Bo"]))
    assert (await engine.run({"name": "Bo"})).output == "hi Bo"
    missing = await engine.run({"name": "Bo", "other": 1})
    assert missing.ok is False  # the script is used up: a real failure of the model call
    with pytest.raises(WorkflowDefinitionError) as caught:  # a variable that is not an input: caught at build
        WorkflowBuilder("t", input="object", output=str).start(next="talk").agent(
            "talk", prompt="Say hi to {{ nobody }}", inputs={"name": "input.name"}, next="end"
        ).end("end", outputs=None).build()
    assert (caught.value.node, caught.value.field) == ("talk", "prompt")
    assert "the template reads 'nobody', which is not one of the node's inputs (input, name)" in str(caught.value)
    workflow_bad = (
        WorkflowBuilder("t", input="object", output=str)
        .start(next="talk")
        .agent("talk", prompt="Say hi to {{ input.nobody }}", next="end")
        .end("end", outputs=None)
        .build()
    )
    result = await WorkflowEngine(workflow_bad, tools_kernel, llm=ScriptedLLM(["x"])).run({})
    assert isinstance(result.error, NodeError)
    assert (result.error.node, result.error.field) == ("talk", "prompt")
    assert "has no attribute 'nobody'" in str(result.error)


async def test_templates_are_sandboxed(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output=str)
        .start(next="talk")
        .llm("talk", prompt="{{ input.__class__.__mro__ }}", next="end")
        .end("end", outputs=None)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel, llm=ScriptedLLM(["x"])).run({})
    assert result.failed_node == "talk"
    assert "access to attribute '__class__' of 'dict' object is unsafe" in str(result.error)


async def test_llm_node_structured_and_text_outputs(tools_kernel: FunctionKernel) -> None:
    class Mood(BaseModel):
        mood: str
        score: int

    workflow = (
        WorkflowBuilder("t", input="object", output="object")
        .start(next="judge")
        .llm(
            "judge",
            prompt="Rate: {{ text }}",
            system="You rate {{ input.kind }}.",
            inputs={"text": "input.text"},
            output=Mood,
            next="say",
        )
        .llm("say", prompt="Say {{ m }}", inputs={"m": "judge.mood"}, model="writer", next="end")
        .end("end", outputs={"mood": "judge.mood", "score": "judge.score", "said": "say"})
        .build()
    )
    judge = ScriptedLLM([{"mood": "happy", "score": "9"}])
    writer = ScriptedLLM(["I am happy"])
    engine = WorkflowEngine(workflow, tools_kernel, llm=judge, llms={"writer": writer})
    result = await engine.run({"text": "great", "kind": "reviews"})
    assert result.ok, result.error
    assert result.output == {"mood": "happy", "score": 9, "said": "I am happy"}
    assert [m.content for m in judge.requests[0].messages] == ["You rate reviews.", "Rate: great"]
    assert judge.requests[0].tools == []
    assert judge.requests[0].response_model is Mood
    assert writer.requests[0].messages[-1].content == "Say happy"


async def test_model_node_without_any_model_fails_clearly(tools_kernel: FunctionKernel) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output=str)
        .start(next="say")
        .llm("say", prompt="hi", next="end")
        .end("end", outputs=None)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert isinstance(result.error, NodeError)
    assert (result.error.node, result.error.field) == ("say", "model")
    assert "Node 'say' needs a model" in str(result.error)


async def test_model_node_timeout(tools_kernel: FunctionKernel) -> None:
    async def never(request: ScriptedRequest) -> str:
        await anyio.Event().wait()
        return "unreachable"  # pragma: no cover

    workflow = (
        WorkflowBuilder("t", input="object", output=str)
        .start(next="say")
        .llm("say", prompt="hi", timeout=0.05, next="end")
        .end("end", outputs=None)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel, llm=ScriptedLLM(never)).run({})
    assert isinstance(result.error, NodeTimeoutError)
    assert str(result.error) == "Node 'say' did not finish within its timeout of 0.05 s."


@pytest.mark.parametrize("model", ["nonexistent-provider/some-model"])
async def test_unknown_model_id_fails_the_node(tools_kernel: FunctionKernel, model: str) -> None:
    workflow = (
        WorkflowBuilder("t", input="object", output=str)
        .start(next="say")
        .llm("say", prompt="hi", model=model, next="end")
        .end("end", outputs=None)
        .build()
    )
    result = await WorkflowEngine(workflow, tools_kernel).run({})
    assert result.failed_node == "say"
    assert "nonexistent-provider" in str(result.error)
