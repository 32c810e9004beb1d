"""Kaval.AI 1.0.7's ``test_testing.py`` on our test double: a scripted client that is the engine's
``client_factory``, a workflow run end to end on it (streamed and not), a reply that does not fit failing the run,
and an agent answering from the script."""

from __future__ import annotations

from pydantic import BaseModel

from kavalai import Agent, FunctionKernel
from kavalai.testing import ScriptedLLM
from kavalai.workflow import NodeFinished, RunFinished, WorkflowEngine

REPLY = {"answer": "The pond is 4 m deep.", "confidence": 0.9}

DOCUMENT = """name: Pond questions
llm_model: fake/tiny
data_types:
  input: {type: object, properties: {question: {type: string}}}
  output: {type: object, properties: {answer: {type: string}, confidence: {type: number}}}
nodes:
  - {name: begin, type: start, next: answer}
  - name: answer
    type: llm
    prompt: "Answer the question: {{ context.input.question }}"
    output: output
    next: finish
  - {name: finish, type: end, output: output}
"""


async def test_the_scripted_client_is_the_engines_client_factory() -> None:
    script = ScriptedLLM([REPLY, REPLY])
    assert script("fake/tiny", None, None) is script
    engine = WorkflowEngine.from_yaml(DOCUMENT, client_factory=script)
    events = [event async for event in engine.stream({"question": "How deep is the pond?"})]
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.result.output_data == REPLY
    assert [event.trace.node for event in events if isinstance(event, NodeFinished)] == ["begin", "answer", "finish"]
    state = await engine.run({"question": "How deep is the pond?"})
    assert state.output_data == REPLY
    assert state.visited == ["begin", "answer", "finish"]
    assert script.remaining == 0
    assert "How deep is the pond?" in script.requests[0].messages[0].content  # type: ignore[union-attr]


async def test_a_reply_that_does_not_fit_fails_the_run() -> None:
    engine = WorkflowEngine.from_yaml(DOCUMENT, client_factory=ScriptedLLM([{"answer": "no confidence"}]))
    state = await engine.run({"question": "pond?"})
    assert not state.ok
    assert state.failed_node == "answer"
    assert "confidence" in str(state.error)


class Answer(BaseModel):
    answer: str
    confidence: float


async def test_an_agent_answers_from_the_script(kernel: FunctionKernel) -> None:
    agent = Agent(ScriptedLLM([{"answer": "agent", "confidence": 0.5}]), kernel=kernel, output_type=Answer)
    result = await agent.run("q")
    assert result.output == Answer(answer="agent", confidence=0.5)
