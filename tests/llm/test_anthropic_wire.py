"""The Anthropic client against a fake Messages API on 127.0.0.1: what the SDK sends, what we parse."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import BaseModel
from tests.servers.llm_anthropic import fake_anthropic, message, stream_events, text_block, tool_use_block
from tests.servers.llm_common import FakeProvider
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.llm import ResponseDone, TextDelta, ToolSpec, UserMessage
from kavalai.llm.anthropic import AnthropicClient
from kavalai.llm.errors import LLMProviderError

KEY = "ak-wire-test-key-0123456789"


class City(BaseModel):
    """Structured output."""

    name: str
    population: int


class Note(BaseModel):
    """Structured output with an optional field (not strict-compatible)."""

    text: str
    tag: str | None = None


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    provider = fake_anthropic()
    with serve(provider.app(), lifespan="off") as url:
        provider.base_url = url  # type: ignore[attr-defined]
        yield provider


@pytest.fixture
async def client(fake: FakeProvider) -> AsyncIterator[AnthropicClient]:
    llm = AnthropicClient("claude-fake", api_key=KEY, base_url=fake.base_url, max_retries=0, timeout=10)  # type: ignore[attr-defined]
    yield llm
    await llm.aclose()


@pytest.fixture
def tools_kernel(kernel: FunctionKernel) -> FunctionKernel:
    @pythontool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    kernel.register_python_tool("math.add", add)
    return kernel


async def test_agent_round_trip_over_the_wire(
    fake: FakeProvider, client: AnthropicClient, tools_kernel: FunctionKernel
) -> None:
    fake.reply_json(
        message(
            text_block("Adding."),
            tool_use_block("toolu_1", "python_math_add", {"a": 2, "b": 3}),
            tool_use_block("toolu_2", "python_math_add", {"a": "x", "b": 3}),
        )
    )
    fake.reply_json(message(text_block("The sum is 5.")))
    result = await Agent(client, kernel=tools_kernel, instructions="Be exact.").run("Add 2 and 3.")

    assert result.output == "The sum is 5."
    ok, failed = result.tool_calls
    assert ok.result == {"result": 5}
    assert failed.error_type == "ToolInputError"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (26, 10)

    first, second = fake.requests
    assert first.headers["authorization"] == f"Bearer {KEY}"  # how anthropic 2.x sends an API key
    assert "anthropic-version" in first.headers
    assert first.body["system"] == "Be exact."
    assert first.body["max_tokens"] == 4096
    assert first.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Add 2 and 3."}]}]
    [tool] = first.body["tools"]
    assert tool["name"] == "python_math_add"
    assert tool["description"] == "Add two integers."
    assert tool["input_schema"]["type"] == "object"
    assert tool["input_schema"]["required"] == ["a", "b"]

    assistant, results = second.body["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "toolu_1", "name": "python_math_add", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "toolu_2", "name": "python_math_add", "input": {"a": "x", "b": 3}},
        ],
    }
    # Both results of the step go back in one user message.
    assert results["role"] == "user"
    first_result, second_result = results["content"]
    assert first_result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": '{"result":5}',
        "is_error": False,
    }
    assert second_result["tool_use_id"] == "toolu_2"
    assert second_result["is_error"] is True
    assert "a: Input should be a valid integer" in second_result["content"]


async def test_streamed_text_and_tool_input(fake: FakeProvider, client: AnthropicClient) -> None:
    fake.reply_stream(
        stream_events(
            [
                (text_block(""), ["Let me ", "add."]),
                (tool_use_block("toolu_7", "python_math_add", {}), ['{"a": 4', ', "b": 5}']),
            ],
            usage=(40, 12),
            stop_reason="tool_use",
        )
    )
    tools = [ToolSpec(name="python://math.add")]
    events = [event async for event in client.stream([UserMessage(content="add")], tools=tools)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "add."]
    done = events[-1]
    assert isinstance(done, ResponseDone)
    response = done.response
    assert response.text == "Let me add."
    [call] = response.tool_calls
    assert (call.id, call.name, call.arguments) == ("toolu_7", "python://math.add", {"a": 4, "b": 5})
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 12)
    assert response.stop_reason == "tool_use"
    assert fake.bodies[0]["stream"] is True


async def test_structured_output_native_and_by_instruction(fake: FakeProvider, client: AnthropicClient) -> None:
    fake.reply_json(message(text_block('{"name": "Oslo", "population": 709000}')))
    fake.reply_json(message(text_block('{"text": "hi"}')))
    city = await client.complete([UserMessage(content="Oslo?")], response_model=City)
    note = await client.complete([UserMessage(content="note")], response_model=Note)
    assert city.parsed == City(name="Oslo", population=709000)
    assert note.parsed == Note(text="hi")
    native, instructed = fake.bodies
    schema = native["output_config"]["format"]["schema"]
    assert native["output_config"]["format"]["type"] == "json_schema"
    assert schema["additionalProperties"] is False
    assert "output_config" not in instructed
    assert "reply with only a JSON object" in instructed["system"]


async def test_overloaded_is_translated_without_the_key(fake: FakeProvider, client: AnthropicClient) -> None:
    fake.reply_json({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529)
    with pytest.raises(LLMProviderError, match="answered 529") as caught:
        await client.complete([UserMessage(content="hi")])
    assert caught.value.status_code == 529
    assert "overloaded_error" in caught.value.body
    assert KEY not in str(caught.value)
