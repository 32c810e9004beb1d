"""Structured output: an output_type instance, one repair round, then a clear failure."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from tests.agent.conftest import Forecast, ToolBox

from kavalai import FunctionKernel
from kavalai.agent import Agent, AgentEvent, ModelResponded
from kavalai.llm import AssistantMessage, UserMessage
from kavalai.llm.errors import StructuredOutputError
from kavalai.testing import ScriptedLLM, tool_call


class Answer(BaseModel):
    """The agent's final answer."""

    city: str
    warm: bool


async def test_structured_output_after_a_tool_call(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM([tool_call("python://weather.forecast", {"city": "Oslo"}), Answer(city="Oslo", warm=True)])
    agent = Agent(llm, kernel=kernel, output_type=Answer)
    result = await agent.run("Is it warm in Oslo?")
    assert result.output == Answer(city="Oslo", warm=True)
    assert all(request.response_model is Answer for request in llm.requests)
    assert result.tool_calls[0].result == Forecast(city="Oslo", celsius=21, sky="clear").model_dump()


async def test_invalid_output_is_sent_back_once_for_repair(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM(['{"city": "Oslo"}', {"city": "Oslo", "warm": False}])
    events: list[AgentEvent] = []
    result = await Agent(llm, kernel=kernel, output_type=Answer, on_event=events.append).run("Is it warm in Oslo?")
    assert result.output == Answer(city="Oslo", warm=False)
    repair = llm.requests[1].messages
    assert repair[-2] == AssistantMessage(content='{"city": "Oslo"}')
    assert isinstance(repair[-1], UserMessage)
    assert "does not fit Answer: warm: Field required" in repair[-1].content
    assert result.steps == 2
    assert result.usage.requests == 2
    # Observers see the rejected reply too.
    replies = [event.response.text for event in events if isinstance(event, ModelResponded)]
    assert replies == ['{"city": "Oslo"}', '{"city": "Oslo", "warm": false}']


async def test_output_failing_twice_raises(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM(["It is warm.", "Still prose."])
    with pytest.raises(StructuredOutputError, match="does not fit Answer") as caught:
        await Agent(llm, kernel=kernel, output_type=Answer).run("Is it warm in Oslo?")
    assert caught.value.response is not None
    assert caught.value.response.text == "Still prose."
    assert len(llm.requests) == 2


async def test_fenced_json_is_accepted(kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(['```json\n{"city": "Rome", "warm": true}\n```'])
    result = await Agent(llm, kernel=kernel, output_type=Answer).run("Rome?")
    assert result.output.warm is True


async def test_no_repair_round_when_no_step_is_left(kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(["prose", {"city": "Oslo", "warm": True}])
    with pytest.raises(StructuredOutputError, match="does not fit Answer"):
        await Agent(llm, kernel=kernel, output_type=Answer, max_steps=1).run("Oslo?")
    assert len(llm.requests) == 1
