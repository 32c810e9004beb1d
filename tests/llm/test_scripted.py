"""ScriptedLLM: replies, recorded requests, exceptions, functions, streaming."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kavalai.llm import (
    AssistantMessage,
    LLMClient,
    ResponseDone,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    parse_messages,
)
from kavalai.llm.errors import LLMProviderError, LLMResponseError, StructuredOutputError
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call


class Point(BaseModel):
    """A point."""

    x: int
    y: int


def test_is_an_llm_client() -> None:
    assert isinstance(ScriptedLLM([]), LLMClient)


async def test_replies_in_order_and_records_requests() -> None:
    llm = ScriptedLLM(["hi", tool_call("python://a", {"x": 1}, id="c")])
    tools = [ToolSpec(name="python://a")]
    first = await llm.complete([UserMessage(content="hello")], tools=tools)
    second = await llm.complete([UserMessage(content="again")])
    assert first.text == "hi"
    assert first.stop_reason == "stop"
    assert second.tool_calls[0].id == "c"
    assert second.stop_reason == "tool_calls"
    assert llm.requests[0].tool_names == ["python://a"]
    assert llm.requests[1].last_message == UserMessage(content="again")
    assert llm.remaining == 0
    with pytest.raises(LLMResponseError, match="no reply left: the script had 2 replies"):
        await llm.complete([UserMessage(content="third")])


async def test_raises_scripted_exceptions() -> None:
    error = LLMProviderError("overloaded", status_code=529)
    llm = ScriptedLLM([error])
    with pytest.raises(LLMProviderError, match="overloaded"):
        await llm.complete([UserMessage(content="x")])


async def test_structured_output_parsed_or_rejected() -> None:
    llm = ScriptedLLM([Point(x=1, y=2), {"x": 1}])
    response = await llm.complete([UserMessage(content="p")], response_model=Point)
    assert response.parsed == Point(x=1, y=2)
    with pytest.raises(StructuredOutputError, match="y: Field required") as caught:
        await llm.complete([UserMessage(content="p")], response_model=Point)
    assert caught.value.errors[0]["loc"] == ("y",)


async def test_async_script_function_sees_the_request() -> None:
    async def reply(request: ScriptedRequest) -> str:
        return f"you said {request.last_message.content}"

    llm = ScriptedLLM(reply)
    response = await llm.complete([UserMessage(content="ping")])
    assert response.text == "you said ping"
    assert llm.remaining is None


async def test_stream_yields_words_then_the_response() -> None:
    llm = ScriptedLLM(["a quick  reply"])
    events = [event async for event in llm.stream([UserMessage(content="x")])]
    texts = [event.text for event in events if isinstance(event, TextDelta)]
    assert texts == ["a ", "quick  ", "reply"]
    assert isinstance(events[-1], ResponseDone)
    assert events[-1].response.text == "a quick  reply"


async def test_rejects_a_sequence_that_is_not_tool_calls() -> None:
    llm = ScriptedLLM([[1, 2]])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must hold ToolCalls"):
        await llm.complete([UserMessage(content="x")])


def test_parse_messages_round_trips_a_conversation() -> None:
    conversation = [
        UserMessage(content="add"),
        AssistantMessage(tool_calls=(ToolCall(id="c", name="python://a", arguments={"x": 1}),)),
        ToolResultMessage(tool_call_id="c", name="python://a", content="{}"),
    ]
    dumped = [message.model_dump(mode="json") for message in conversation]
    assert parse_messages(dumped) == conversation


def test_a_single_reply_instead_of_a_script_is_refused() -> None:
    with pytest.raises(TypeError, match=r"not one reply \(str\); write ScriptedLLM\(\['hello'\]\)"):
        ScriptedLLM("hello")


async def test_a_script_function_may_take_the_messages() -> None:
    llm = ScriptedLLM(lambda messages: f"{len(messages)} messages, the last: {messages[-1].content}")
    response = await llm.complete([UserMessage(content="one"), UserMessage(content="two")])
    assert response.text == "2 messages, the last: two"
    assert [message.content for message in llm.requests[0]] == ["one", "two"]
    assert llm.requests[0][:1] == [UserMessage(content="one")]
