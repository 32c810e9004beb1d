"""The agent loop against a real kernel, driven by ScriptedLLM."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.agent.conftest import ToolBox

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.agent.errors import MaxStepsExceededError
from kavalai.llm import AssistantMessage, SystemMessage, ToolCall, ToolResultMessage, UserMessage
from kavalai.llm.errors import LLMConfigurationError
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call


class CountingKernel(FunctionKernel):
    """A real kernel that counts how often the agent asks for the tool list."""

    def __init__(self) -> None:
        super().__init__()
        self.description_calls = 0

    async def describe_tools(self, allowed_tools: Any = None) -> list[dict[str, Any]]:
        self.description_calls += 1
        return await super().describe_tools(allowed_tools)


async def test_one_tool_call_then_answer(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 2, "b": "40"}, id="c1"), "2 + 40 = 42"])
    result = await Agent(llm, kernel=kernel, instructions="Use tools.").run("What is 2 + 40?")

    assert result.output == "2 + 40 = 42"
    assert result.steps == 2
    [record] = result.tool_calls
    assert (record.uri, record.arguments, record.status, record.result) == (
        "python://math.add",
        {"a": 2, "b": "40"},
        "ok",
        {"result": 42},
    )
    assert record.duration >= 0
    assert record.step == 1
    assert record.call_id == "c1"
    second = llm.requests[1].messages
    assert second[0] == SystemMessage(content="Use tools.")
    assert second[-1] == ToolResultMessage(tool_call_id="c1", name="python://math.add", content='{"result":42}')
    assert [type(m) for m in result.new_messages] == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    assert result.usage.requests == 2
    assert result.usage.total_tokens > 0


async def test_tool_list_fetched_once_per_run(toolbox: ToolBox) -> None:
    kernel = CountingKernel()
    toolbox.register(kernel)
    calls = [tool_call("python://math.add", {"a": 1, "b": 1}) for _ in range(3)]
    llm = ScriptedLLM([*calls, "done"])
    await Agent(llm, kernel=kernel).run("go")
    assert kernel.description_calls == 1
    assert len(llm.requests) == 4
    assert all(request.tool_names == llm.requests[0].tool_names for request in llm.requests)
    assert "python://weather.forecast" in llm.requests[0].tool_names


async def test_calls_of_one_step_run_concurrently(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    step = [tool_call("python://meet.left"), tool_call("python://meet.right")]
    llm = ScriptedLLM([step, "they met"])
    result = await Agent(llm, kernel=kernel).run("meet")
    assert [r.result for r in result.tool_calls] == [{"result": "left met right"}, {"result": "right met left"}]
    assert all(record.ok for record in result.tool_calls)
    # Results go back in the order the model asked for them.
    names = [m.name for m in llm.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert names == ["python://meet.left", "python://meet.right"]


def recovering_script(request: ScriptedRequest) -> Any:
    """Call add with a bad argument; once the error comes back, fix it; then answer with the result."""
    last = request.last_message
    if isinstance(last, UserMessage):
        return tool_call("python://math.add", {"a": 1, "b": "two"})
    assert isinstance(last, ToolResultMessage)
    if last.is_error:
        return tool_call("python://math.add", {"a": 1, "b": 2})
    return f"The sum is {json.loads(last.content)['result']}"


async def test_input_error_goes_back_and_model_recovers(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM(recovering_script)
    result = await Agent(llm, kernel=kernel).run("add 1 and two")
    assert result.output == "The sum is 3"
    failed, fixed = result.tool_calls
    assert (failed.status, failed.error_type) == ("error", "ToolInputError")
    assert failed.error is not None
    assert "b: Input should be a valid integer" in failed.error
    assert "Fix the arguments" in failed.error
    assert fixed.ok
    assert fixed.result == {"result": 3}
    error_message = llm.requests[1].last_message
    assert isinstance(error_message, ToolResultMessage)
    assert error_message.is_error


async def test_execution_error_and_timeout_are_tool_results(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    step = [tool_call("python://fail.explode", {"reason": "disk full"}), tool_call("python://fail.stall")]
    llm = ScriptedLLM([step, "both failed"])
    result = await Agent(llm, kernel=kernel).run("try")
    assert result.output == "both failed"
    explode, stall = result.tool_calls
    assert explode.error_type == "ToolExecutionError"
    assert explode.error is not None
    assert explode.error == (
        "Tool python://fail.explode failed: RuntimeError: boom: disk full. "
        "Check the arguments, or try another approach."
    )
    assert stall.error_type == "ToolTimeoutError"
    assert stall.error is not None
    assert "timed out" in stall.error
    results = [m for m in llm.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [m.is_error for m in results] == [True, True]


async def test_long_error_messages_are_bounded(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM([tool_call("python://fail.verbose"), "it failed"])
    result = await Agent(llm, kernel=kernel).run("try")
    error = llm.requests[1].last_message
    assert isinstance(error, ToolResultMessage)
    assert error.content.startswith("Tool python://fail.verbose failed: RuntimeError: xxx")
    assert len(error.content) < 2100
    assert error.content.endswith("... Check the arguments, or try another approach.")
    assert result.tool_calls[0].error == error.content


async def test_allowed_tools_enforced(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM([tool_call("python://fs.delete", {"path": "/etc/passwd"}), "I could not delete it"])
    agent = Agent(llm, kernel=kernel, allowed_tools=["python://math.*", "python://weather.forecast"])
    result = await agent.run("delete /etc/passwd")
    assert llm.requests[0].tool_names == ["python://math.add", "python://weather.forecast"]
    assert toolbox.deleted == []
    [record] = result.tool_calls
    assert (record.status, record.error_type) == ("denied", "ToolAccessDeniedError")
    assert record.error is not None
    assert "not available" in record.error
    assert result.output == "I could not delete it"


async def test_unknown_tool_and_bad_arguments_json(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    bad_json = ToolCall(name="python://math.add", arguments_error="invalid JSON: Expecting value at position 0")
    llm = ScriptedLLM([[tool_call("python_math_ad", {}), bad_json], "ok"])
    result = await Agent(llm, kernel=kernel).run("go")
    unknown, broken = result.tool_calls
    assert unknown.status == "denied"
    assert unknown.error == (
        "Tool 'python_math_ad' is not available to you. Did you mean python://math.add? "
        "Call only the tools you were given."
    )
    assert broken.status == "error"
    assert "not a JSON object" in (broken.error or "")


async def test_max_steps_raises_with_partial_result(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM(lambda request: tool_call("python://math.add", {"a": 1, "b": 1}))
    with pytest.raises(MaxStepsExceededError, match="max_steps=3") as caught:
        await Agent(llm, kernel=kernel, max_steps=3).run("loop forever")
    partial = caught.value.result
    assert partial is not None
    assert partial.output is None
    assert partial.steps == 3
    assert len(llm.requests) == 3
    # The calls of the last reply are not run (the model would never see their results), but they are answered,
    # so the messages are a valid history for another run.
    assert len(partial.tool_calls) == 2
    last_reply, not_run = partial.new_messages[-2:]
    assert isinstance(last_reply, AssistantMessage)
    assert isinstance(not_run, ToolResultMessage)
    assert not_run.tool_call_id == last_reply.tool_calls[0].id
    assert not_run.is_error
    assert "step limit" in not_run.content


async def test_history_passed_through(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM(["Hello Ada.", "Your name is Ada."])
    agent = Agent(llm, kernel=kernel, instructions="Be brief.")
    first = await agent.run("My name is Ada.")
    second = await agent.run("What is my name?", history=first.all_messages())

    sent = llm.requests[1].messages
    assert sent == [
        SystemMessage(content="Be brief."),
        UserMessage(content="My name is Ada."),
        AssistantMessage(content="Hello Ada."),
        UserMessage(content="What is my name?"),
    ]
    assert second.new_messages == [
        UserMessage(content="What is my name?"),
        AssistantMessage(content="Your name is Ada."),
    ]
    assert second.all_messages() == [*sent[1:], AssistantMessage(content="Your name is Ada.")]


async def test_history_as_stored_json(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM(["Hello Ada.", "You asked me to add 1 and 2: 3."])
    first = await Agent(llm, kernel=kernel).run("My name is Ada.")
    stored = json.loads(json.dumps([message.model_dump(mode="json") for message in first.all_messages()]))
    second = await Agent(llm, kernel=kernel).run("What did I say?", stored)
    assert llm.requests[1].messages[:2] == first.all_messages()
    assert second.history == first.all_messages()


async def test_agent_without_kernel_offers_no_tools() -> None:
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), "no tools here"])
    result = await Agent(llm).run("add")
    assert llm.requests[0].tools == []
    assert result.tool_calls[0].status == "denied"


def test_agent_rejects_bad_configuration() -> None:
    llm = ScriptedLLM([])
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        Agent(llm, max_steps=0)
    with pytest.raises(TypeError, match="not a single string"):
        Agent(llm, allowed_tools="python://*")
    with pytest.raises(TypeError, match="output_type must be a Pydantic model class, got <class 'int'>"):
        Agent(llm, output_type=int)  # type: ignore[type-var]


class ClosingLLM(ScriptedLLM):
    """A scripted model that remembers being closed."""

    closed: bool = False

    async def aclose(self) -> None:
        self.closed = True


async def test_agent_closes_only_the_client_it_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built = ClosingLLM(["hi"])
    monkeypatch.setattr("kavalai.agent._agent._make_client", lambda model_id: built)
    async with Agent("openai/gpt-4.1-mini") as agent:
        assert (await agent.run("hello")).output == "hi"
    assert built.closed

    passed_in = ClosingLLM(["hi"])
    async with Agent(passed_in) as agent:
        await agent.run("hello")
    assert not passed_in.closed


async def test_model_id_without_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigurationError, match="set the OPENAI_API_KEY environment variable"):
        Agent("openai/gpt-4.1-mini")


async def test_a_tool_result_json_cannot_describe_reaches_the_model_as_text(kernel: FunctionKernel) -> None:
    class Opaque:
        def __str__(self) -> str:
            return "<opaque 42>"

    @pythontool
    def opaque() -> Opaque:
        return Opaque()

    kernel.register_python_tool("opaque", opaque)
    llm = ScriptedLLM([tool_call("python://opaque"), "done"])
    result = await Agent(llm, kernel=kernel).run("go")
    assert result.tool_calls[0].status == "ok"
    assert result.tool_calls[0].result == {"result": "<opaque 42>"}
