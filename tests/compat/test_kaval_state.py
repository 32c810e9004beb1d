"""A workflow built or loaded the Kaval.AI 1.0 way answers Kaval.AI's questions about its run: ``status ==
"completed"`` (or ``"failed"``), ``trace`` as the names of the nodes run, ``error`` as text, ``output_data``; a
workflow of ours keeps ``RunResult``'s own API. Running unchanged means answering the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kavalai.testing import ScriptedLLM
from kavalai.workflow import RunResult, RunStatus, WorkflowBuilder, WorkflowEngine
from kavalai.workflow.kaval import WorkflowState

DOCUMENT = """name: Greeter
llm_model: openai/fake-model
data_types:
  input: {type: object, properties: {user_message: {type: string}}}
  output: {type: object, properties: {agent_response: {type: string}}}
nodes:
  - {name: s, type: start, next: call}
  - {name: call, type: llm, prompt: Greet the user., output: output, next: e}
  - {name: e, type: end, output: output}
"""


def _built() -> WorkflowEngine:
    return (
        WorkflowBuilder("Greeter", llm_model="openai/fake-model")  # type: ignore[call-arg]
        .data_type("input", {"user_message": str})
        .data_type("output", {"agent_response": str})
        .start("call", name="s")
        .llm("call", prompt="Greet the user.", output="output", next="e")
        .end(name="e")
        .build_engine(llm=ScriptedLLM([{"agent_response": "Hello!"}]))
    )


async def test_a_kaval_loaded_run_answers_in_kaval_ais_terms() -> None:
    engine = WorkflowEngine.from_yaml(DOCUMENT, llm=ScriptedLLM([{"agent_response": "Hello!"}]))
    state = await engine.run({"user_message": "hi"})
    assert isinstance(state, WorkflowState)
    assert state.status == "completed"
    assert state.trace == ["s", "call", "e"]
    assert state.output_data == {"agent_response": "Hello!"}
    assert state.error is None
    assert state.workflow_name == "Greeter"
    assert state.current_node == "e"
    assert json.loads(state.to_json())["trace"] == ["s", "call", "e"]
    # ours stays reachable: the RunResult itself, and its attributes that Kaval.AI's state does not redefine
    assert state.result.status is RunStatus.SUCCEEDED
    assert state.ok
    assert state.visited == ["s", "call", "e"]


async def test_a_kaval_built_run_answers_the_same() -> None:
    state = await _built().run({"user_message": "hi"})
    assert state.status == "completed"
    assert state.trace == ["s", "call", "e"]
    assert state.output_data == {"agent_response": "Hello!"}


async def test_a_failed_kaval_run_is_failed_with_its_error_as_text() -> None:
    engine = WorkflowEngine.from_yaml(DOCUMENT, llm=ScriptedLLM([{"nonsense": 1}] * 3))
    state = await engine.run({"user_message": "hi"})
    assert state.status == "failed"
    assert isinstance(state.error, str)
    assert state.error
    assert state.current_node == "call"
    assert state.output_data is None


LOADERS: dict[str, Callable[[Path, ScriptedLLM], WorkflowEngine]] = {
    "text": lambda folder, llm: WorkflowEngine.from_yaml(DOCUMENT, llm=llm),
    "file": lambda folder, llm: WorkflowEngine.from_yaml(_written(folder), llm=llm),
    "path": lambda folder, llm: WorkflowEngine.from_yaml_path(_written(folder), llm=llm),
    "dict": lambda folder, llm: WorkflowEngine.from_dict(yaml.safe_load(DOCUMENT), llm=llm),
}


def _written(folder: Path) -> Path:
    path = folder / "greeter.yaml"
    path.write_text(DOCUMENT, encoding="utf-8")
    return path


@pytest.mark.parametrize("way", sorted(LOADERS))
async def test_every_way_of_loading_a_kaval_document_answers_in_kaval_ais_terms(tmp_path: Path, way: str) -> None:
    engine = LOADERS[way](tmp_path, ScriptedLLM([{"agent_response": "Hello!"}]))
    state = await engine.run({"user_message": "hi"})
    assert isinstance(state, WorkflowState), way
    assert (state.status, state.trace, state.output_data) == (
        "completed",
        ["s", "call", "e"],
        {"agent_response": "Hello!"},
    )


async def test_our_workflows_keep_run_results() -> None:
    engine = WorkflowBuilder("ours").start(next="e").end("e", outputs={"x": "1"}).build()
    result = await WorkflowEngine(engine).run({})
    assert isinstance(result, RunResult)
    assert result.status is RunStatus.SUCCEEDED
    assert [visit.node for visit in result.trace] == ["start", "e"]
