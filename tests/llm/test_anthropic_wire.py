"""The Anthropic client against a fake Messages API on 127.0.0.1: what the SDK sends, what we parse."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field
from tests.servers.llm_anthropic import fake_anthropic, message, stream_events, text_block, tool_use_block
from tests.servers.llm_common import FakeProvider, SSEvent
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.llm import (
    AssistantMessage,
    ResponseDone,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from kavalai.llm.anthropic import AnthropicClient
from kavalai.llm.errors import LLMConfigurationError, LLMConnectionError, LLMProviderError, LLMResponseError
from kavalai.llm.names import ToolNameMap

KEY = "ak-wire-test-key-0123456789"


class City(BaseModel):
    """Structured output."""

    name: str
    population: int


class Note(BaseModel):
    """Structured output with an optional field (fine for Anthropic's output_config)."""

    text: str
    tag: str | None = None


class Counted(BaseModel):
    """Structured output with a numeric bound, which Anthropic's output_config does not enforce."""

    name: str
    population: int = Field(ge=0)


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
    fake.reply_json(message(text_block('{"text": "hi"}')))
    fake.reply_json(message(text_block('{"name": "Oslo", "population": 709000}')))
    note = await client.complete([UserMessage(content="note")], response_model=Note)
    city = await client.complete([UserMessage(content="Oslo?")], response_model=Counted)
    assert note.parsed == Note(text="hi")
    assert city.parsed == Counted(name="Oslo", population=709000)
    native, instructed = fake.bodies
    # Optional fields are fine for output_config; they stay optional (the default is not sent).
    assert native["output_config"]["format"]["type"] == "json_schema"
    schema = native["output_config"]["format"]["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["text"]
    assert "default" not in schema["properties"]["tag"]
    # A numeric bound cannot be enforced by the API: the schema goes into the system prompt instead.
    assert "output_config" not in instructed
    assert "reply with only a JSON object" in instructed["system"]
    assert '"minimum":0' in instructed["system"]


async def test_usage_counts_cached_input_tokens(fake: FakeProvider, client: AnthropicClient) -> None:
    body = message(text_block("hi"), usage=(10, 4))
    body["usage"].update(cache_creation_input_tokens=100, cache_read_input_tokens=1000)
    fake.reply_json(body)
    response = await client.complete([UserMessage(content="hi")])
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.requests) == (1110, 4, 1)


async def test_overloaded_is_translated_without_the_key(fake: FakeProvider, client: AnthropicClient) -> None:
    fake.reply_json({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529)
    with pytest.raises(LLMProviderError, match="answered 529") as caught:
        await client.complete([UserMessage(content="hi")])
    assert caught.value.status_code == 529
    assert "overloaded_error" in caught.value.body
    assert KEY not in str(caught.value)


async def test_error_event_mid_stream(fake: FakeProvider, client: AnthropicClient) -> None:
    start, *_ = stream_events([(text_block(""), ["never"])])
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.reply_stream([start, SSEvent(overloaded, "error")])
    with pytest.raises(
        LLMProviderError, match=r"anthropic/claude-fake reported an error: Overloaded \(overloaded_error\)"
    ):
        [event async for event in client.stream([UserMessage(content="hi")])]


async def test_dropped_stream_is_a_connection_error(fake: FakeProvider, client: AnthropicClient) -> None:
    events = stream_events([(text_block(""), ["Hel", "lo"])])
    fake.reply_stream(events[:4], cut=True)  # message_start, ping, block start, one delta, then the drop
    received: list[object] = []

    async def consume() -> None:
        async for event in client.stream([UserMessage(content="hi")]):
            received.append(event)

    with pytest.raises(
        LLMConnectionError, match="The connection to anthropic/claude-fake at http://127.0.0.1"
    ) as caught:
        await consume()
    assert received == [TextDelta(text="Hel")]
    assert caught.value.__cause__ is not None  # the HTTP library's error, chained


async def test_unreadable_replies_are_response_errors(fake: FakeProvider, client: AnthropicClient) -> None:
    fake.reply_raw(b"<html>bad gateway</html>", content_type="text/html")
    fake.reply_stream([SSEvent("{not json", "message_start")])
    fake.reply_stream([SSEvent({"type": "message_stop"}, "message_stop")])
    with pytest.raises(LLMResponseError, match="without content blocks"):
        await client.complete([UserMessage(content="hi")])
    with pytest.raises(LLMResponseError, match=r"sent a reply that cannot be read \(JSONDecodeError"):
        [event async for event in client.stream([UserMessage(content="hi")])]
    with pytest.raises(LLMResponseError, match="ended the stream without a message"):
        [event async for event in client.stream([UserMessage(content="hi")])]


async def test_any_shape_of_key_is_masked(fake: FakeProvider) -> None:
    secret = "plain-token-without-prefix-42"
    fake.reply_json(
        {"type": "error", "error": {"type": "authentication_error", "message": f"bad key {secret}"}}, status=401
    )
    llm = AnthropicClient("claude-fake", api_key=secret, base_url=fake.base_url, max_retries=0)  # type: ignore[attr-defined]
    async with llm:
        with pytest.raises(LLMProviderError, match=r"answered 401: bad key \*\*\* \(authentication_error\)") as caught:
            await llm.complete([UserMessage(content="hi")])
    assert secret not in caught.value.body
    assert secret not in repr(llm)


async def test_colliding_names_round_trip_through_the_agent(
    fake: FakeProvider, client: AnthropicClient, kernel: FunctionKernel
) -> None:
    @pythontool
    def first() -> str:
        """The first."""
        return "first"

    @pythontool
    def second() -> str:
        """The second."""
        return "second"

    kernel.register_python_tool("a.b_c", first)
    kernel.register_python_tool("a_b.c", second)  # both read as python_a_b_c
    names = ToolNameMap(["python://a.b_c", "python://a_b.c"])
    second_name = names.to_provider("python://a_b.c")
    fake.reply_json(message(tool_use_block("toolu_1", second_name, {})))
    fake.reply_json(message(text_block("It said second.")))
    result = await Agent(client, kernel=kernel).run("Call the second one.")

    [record] = result.tool_calls
    assert (record.uri, record.result) == ("python://a_b.c", {"result": "second"})
    offered = sorted(tool["name"] for tool in fake.bodies[0]["tools"])
    assert offered == sorted([names.to_provider("python://a.b_c"), second_name])
    assert all(name.startswith("python_a_b_c_") and len(name) == len("python_a_b_c_") + 8 for name in offered)
    # The history sent back uses the same provider name for the call.
    assistant = fake.bodies[1]["messages"][1]
    assert assistant["content"][0]["name"] == second_name


class _FutureParameterClient(AnthropicClient):
    """Sends a parameter the installed SDK does not know, as a newer kavalai would on an old SDK."""

    async def _send(self, body: dict[str, Any]) -> Any:
        return await self._client.messages.create(**body, parameter_from_the_future=True)


async def test_an_sdk_too_old_for_the_request_is_a_configuration_error(fake: FakeProvider) -> None:
    llm = _FutureParameterClient("claude-fake", api_key=KEY, base_url=fake.base_url, max_retries=0)  # type: ignore[attr-defined]
    async with llm:
        with pytest.raises(LLMConfigurationError, match=r"'anthropic' package is too old .* pip install -U") as caught:
            await llm.complete([UserMessage(content="hi")])
    assert isinstance(caught.value.__cause__, TypeError)
    assert fake.requests == []  # nothing was sent


async def test_native_tool_search_defers_tools_and_sends_its_blocks_back(
    fake: FakeProvider, client: AnthropicClient, tools_kernel: FunctionKernel
) -> None:
    @pythontool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    tools_kernel.register_python_tool("math.multiply", multiply)
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25"}
    found = {
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "python_math_multiply"}],
        },
    }
    fake.reply_json(
        message(
            {**search, "input": {"query": "multiply"}},
            found,
            tool_use_block("toolu_1", "python_math_multiply", {"a": 6, "b": 7}),
        )
    )
    fake.reply_json(message(text_block("42.")))
    agent = Agent(client, kernel=tools_kernel, tool_search="native", core_tools=["python://math.add"])
    result = await agent.run("What is six times seven?")

    assert result.output == "42."
    [record] = result.tool_calls
    assert (record.uri, record.result) == ("python://math.multiply", {"result": 42})
    first, second = fake.bodies
    tools = {tool["name"]: tool for tool in first["tools"]}
    assert first["tools"][0] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert tools["python_math_multiply"]["defer_loading"] is True
    assert "defer_loading" not in tools["python_math_add"]  # a core tool is shown up front
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert [block["type"] for block in assistant["content"]] == [
        "server_tool_use",
        "tool_search_tool_result",
        "tool_use",
    ]
    assert assistant["content"][1]["content"]["tool_references"] == [
        {"type": "tool_reference", "tool_name": "python_math_multiply"}
    ]
    assert second["messages"][2]["content"][0]["type"] == "tool_result"


async def test_native_tool_search_falls_back_to_ours_when_streaming(
    fake: FakeProvider, client: AnthropicClient, tools_kernel: FunctionKernel
) -> None:
    fake.reply_stream(stream_events([(text_block(""), ["Nothing to do."])]))
    await Agent(client, kernel=tools_kernel, tool_search="native", stream=True).run("Hello.")
    [body] = fake.bodies
    assert [tool["name"] for tool in body["tools"]] == ["search_tools"]  # kavalai's search instead


async def test_another_providers_kept_content_is_not_sent(fake: FakeProvider, client: AnthropicClient) -> None:
    # A conversation begun on OpenAI's Responses API goes on with Claude: its items are OpenAI's, not blocks.
    fake.reply_json(message(text_block("Done.")))
    openai_items = ({"type": "reasoning", "id": "rs_1", "summary": []},)
    history = [
        UserMessage(content="Add."),
        AssistantMessage(
            tool_calls=(ToolCall(id="c1", name="python://math.add", arguments={"a": 1}),),
            provider_content=openai_items,
            provider_format="openai-responses",
        ),
        ToolResultMessage(tool_call_id="c1", name="python://math.add", content="2"),
    ]
    await client.complete(history, tools=[ToolSpec(name="python://math.add")])
    assistant = fake.bodies[0]["messages"][1]
    assert assistant["content"] == [{"type": "tool_use", "id": "c1", "name": "python_math_add", "input": {"a": 1}}]
