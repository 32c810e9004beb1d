"""Kaval.AI 1.0 workflow code on our engine: ``state.output_data`` read as an attribute, ``client_factory=`` on
every entry point, and "validation failed" messages that name the document without quoting it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kavalai.testing import ScriptedLLM
from kavalai.workflow import OutputData, WorkflowDefinitionError, WorkflowEngine

DOCUMENT = """name: Greeter
llm_model: openai/fake-model
data_types:
  input: {type: object, properties: {user_message: {type: string}}}
  output: {type: object, properties: {agent_response: {type: string}}}
nodes:
  - {name: begin, type: start, next: reply}
  - {name: reply, type: llm, prompt: Greet the user., output: output, next: finish}
  - {name: finish, type: end, output: output}
"""


class ClosingLLM(ScriptedLLM):
    """A scripted client that records being closed."""

    closed = False

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()


class Factory:
    """A client_factory recording its calls; each client it makes answers once and records its closing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []
        self.made: list[ClosingLLM] = []

    def __call__(self, model: str, parameters: Any, stats: Any) -> ClosingLLM:
        self.calls.append((model, parameters, stats))
        client = ClosingLLM([{"agent_response": f"hello #{len(self.made) + 1}"}])
        self.made.append(client)
        return client


async def test_output_data_is_an_attribute_equal_to_the_dict_and_still_callable() -> None:
    engine = WorkflowEngine.from_yaml(DOCUMENT, llm=ScriptedLLM([{"agent_response": "hi"}]))
    state = await engine.run({"user_message": "hello"})
    assert state.output_data == {"agent_response": "hi"}
    assert isinstance(state.output_data, dict)
    assert isinstance(state.output_data, OutputData)
    assert state.output_data() == {"agent_response": "hi"}  # the method form of earlier releases
    assert type(state.output_json()) is dict
    assert state.to_dict()["output"] == {"agent_response": "hi"}
    failed = await engine.run({"user_message": "again"})  # the script is spent: the model call fails
    assert not failed.ok
    assert failed.output_data is None


async def test_client_factory_is_asked_once_per_run_and_model_and_its_clients_are_closed(tmp_path: Path) -> None:
    factory = Factory()
    path = tmp_path / "greeter.yaml"
    path.write_text(DOCUMENT, encoding="utf-8")
    engines = [
        WorkflowEngine.from_yaml(DOCUMENT, client_factory=factory),
        WorkflowEngine.from_yaml_path(path, client_factory=factory),
        WorkflowEngine.from_dict(yaml.safe_load(DOCUMENT), client_factory=factory),
    ]
    for engine in engines:
        async with engine:
            first = await engine.run({"user_message": "a"})
            second = await engine.run({"user_message": "b"})
        assert first.ok, first.error
        assert second.ok, second.error
        assert second.output_data["agent_response"] != first.output_data["agent_response"]  # a new client a run
    assert [call[0] for call in factory.calls] == ["openai/fake-model"] * 6
    assert all(call[1:] == (None, None) for call in factory.calls)
    assert all(client.closed for client in factory.made)


async def test_client_factory_on_the_constructor_serves_our_model_nodes() -> None:
    from kavalai.workflow import WorkflowBuilder

    workflow = (
        (WorkflowBuilder("ours").start(next="ask").llm("ask", prompt="Say hi", model="openai/fake", next="done"))
        .end("done", outputs={"text": "ask"})
        .build()
    )
    factory = Factory()
    engine = WorkflowEngine(workflow, client_factory=factory)
    result = await engine.run({})
    assert result.ok, result.error
    assert factory.calls[0][0] == "openai/fake"


async def test_a_failing_factory_fails_the_node_naming_it() -> None:
    def broken(model: str, parameters: Any, stats: Any) -> ScriptedLLM:
        raise RuntimeError("no such provider")

    engine = WorkflowEngine.from_yaml(DOCUMENT, client_factory=broken)
    result = await engine.run({"user_message": "x"})
    assert result.failed_node == "reply"
    assert "client_factory failed for 'openai/fake-model': no such provider" in str(result.error)


BROKEN = DOCUMENT.replace("next: finish}", "next: ghost}") + "# " + "a very long comment line " * 40 + "\n"


def test_an_invalid_text_says_validation_failed_and_names_its_first_line_only() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"^validation failed: ") as info:
        WorkflowEngine.from_yaml(BROKEN)
    message = str(info.value)
    assert message.startswith("validation failed: Kaval.AI workflow '<yaml text: name: Greeter>': ")
    assert "unknown node 'ghost'" in message
    assert "data_types" not in message
    assert "a very long comment" not in message
    long_first_line = "name: " + "x" * 200 + "\n" + BROKEN.split("\n", 1)[1]
    with pytest.raises(WorkflowDefinitionError) as info:
        WorkflowEngine.from_yaml(long_first_line)
    assert "x" * 60 not in str(info.value)
    assert "...>'" in str(info.value)


def test_an_invalid_file_or_dict_says_validation_failed_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    with pytest.raises(WorkflowDefinitionError, match=r"^validation failed: Kaval.AI workflow '.*broken\.yaml': "):
        WorkflowEngine.from_yaml_path(path)
    with pytest.raises(WorkflowDefinitionError, match=r"^validation failed: Kaval.AI workflow '<dict>': "):
        WorkflowEngine.from_dict(yaml.safe_load(BROKEN))
    schema_error = yaml.safe_load(DOCUMENT)
    schema_error["nodes"][1]["promt"] = "misspelt"
    with pytest.raises(WorkflowDefinitionError, match=r"^validation failed: .*promt") as info:
        WorkflowEngine.from_dict(schema_error)
    assert info.value.field is not None
    assert "promt" in info.value.field
