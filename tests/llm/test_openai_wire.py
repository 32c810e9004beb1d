"""The OpenAI client against a fake Chat Completions API on 127.0.0.1: what the SDK sends, what we parse."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from enum import StrEnum

import pytest
from pydantic import BaseModel
from tests.servers.llm_common import FakeProvider, SSEvent
from tests.servers.llm_openai import chunk, completion, fake_openai, stream_events, tool_call
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent, AgentEvent, ModelTextDelta
from kavalai.agent.errors import MaxStepsExceededError
from kavalai.llm import AssistantMessage, ModelSettings, ResponseDone, TextDelta, ToolSpec, UserMessage
from kavalai.llm.errors import LLMConnectionError, LLMProviderError, LLMResponseError
from kavalai.llm.openai import OpenAIClient

KEY = "sk-wire-test-key-0123456789"


class City(BaseModel):
    """Structured output."""

    name: str
    population: int


@pytest.fixture
def fake() -> Iterator[tuple[FakeProvider, str]]:
    provider = fake_openai()
    with serve(provider.app(), lifespan="off") as url:
        yield provider, f"{url}/v1"


@pytest.fixture
async def client(fake: tuple[FakeProvider, str]) -> AsyncIterator[OpenAIClient]:
    llm = OpenAIClient("gpt-fake", api_key=KEY, base_url=fake[1], max_retries=0, timeout=10)
    yield llm
    await llm.aclose()


@pytest.fixture
def tools_kernel(kernel: FunctionKernel) -> FunctionKernel:
    @pythontool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @pythontool
    def greet(name: str, punctuation: str = "!") -> str:
        """Greet someone."""
        return f"Hello {name}{punctuation}"

    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("text.greet", greet)
    return kernel


async def test_agent_round_trip_over_the_wire(
    fake: tuple[FakeProvider, str], client: OpenAIClient, tools_kernel: FunctionKernel
) -> None:
    provider, _ = fake
    provider.reply_json(
        completion(
            tool_calls=[
                tool_call("call_1", "python_math_add", {"a": 2, "b": 3}),
                tool_call("call_2", "python_text_greet", {"name": "Ada"}),
            ]
        )
    )
    provider.reply_json(completion("2 + 3 = 5. Hello Ada!"))
    result = await Agent(client, kernel=tools_kernel, instructions="Be exact.").run("Add 2 and 3, greet Ada.")

    assert result.output == "2 + 3 = 5. Hello Ada!"
    assert [(r.uri, r.result) for r in result.tool_calls] == [
        ("python://math.add", {"result": 5}),
        ("python://text.greet", {"result": "Hello Ada!"}),
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (22, 14, 2)

    first, second = provider.requests
    assert first.headers["authorization"] == f"Bearer {KEY}"
    tools = {tool["function"]["name"]: tool["function"] for tool in first.body["tools"]}
    assert set(tools) == {"python_math_add", "python_text_greet"}
    add = tools["python_math_add"]
    assert add["strict"] is True
    assert add["parameters"]["additionalProperties"] is False
    assert add["parameters"]["required"] == ["a", "b"]
    assert add["description"] == "Add two integers."
    greet = tools["python_text_greet"]
    assert "strict" not in greet  # an optional argument: strict mode would change the schema
    assert greet["parameters"]["required"] == ["name"]
    assert first.body["messages"] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Add 2 and 3, greet Ada."},
    ]

    assistant, *tool_messages = second.body["messages"][2:]
    assert assistant["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "python_math_add", "arguments": '{"a":2,"b":3}'},
    }
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "call_1", "content": '{"result":5}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"result":"Hello Ada!"}'},
    ]


async def test_streamed_text_and_tool_call_fragments(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    provider.reply_stream(
        stream_events(
            [
                chunk({"role": "assistant", "content": "Let me "}),
                chunk({"content": "check."}),
                chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                        "function": {"name": "python_math_add", "arguments": '{"a": '}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": '4, "b": 5}'}}]}),
                chunk({}, finish_reason="tool_calls"),
                chunk(None, usage=(30, 9)),
            ]
        )
    )  # fmt: skip
    tools = [ToolSpec(name="python://math.add", input_schema={"type": "object", "properties": {}})]
    events = [event async for event in client.stream([UserMessage(content="add")], tools=tools)]

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "check."]
    done = events[-1]
    assert isinstance(done, ResponseDone)
    response = done.response
    assert response.text == "Let me check."
    [call] = response.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_9", "python://math.add", {"a": 4, "b": 5})
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)
    assert response.stop_reason == "tool_calls"
    body = provider.bodies[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_streaming_agent_reports_deltas(
    fake: tuple[FakeProvider, str], client: OpenAIClient, tools_kernel: FunctionKernel
) -> None:
    provider, _ = fake
    provider.reply_stream(stream_events([chunk({"content": "Four"}), chunk({"content": "."}, finish_reason="stop")]))
    deltas: list[str] = []

    def observe(event: AgentEvent) -> None:
        if isinstance(event, ModelTextDelta):
            deltas.append(event.text)

    result = await Agent(client, kernel=tools_kernel, stream=True, on_event=observe).run("2 + 2?")
    assert deltas == ["Four", "."]
    assert result.output == "Four."


async def test_structured_output_and_settings(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    provider.reply_json(completion(json.dumps({"name": "Oslo", "population": 709000})))
    response = await client.complete(
        [UserMessage(content="Oslo?")], response_model=City, settings=ModelSettings(temperature=0, max_tokens=50)
    )
    assert response.parsed == City(name="Oslo", population=709000)
    body = provider.bodies[0]
    spec = body["response_format"]
    assert spec["type"] == "json_schema"
    assert spec["json_schema"]["name"] == "City"
    assert spec["json_schema"]["strict"] is True
    assert spec["json_schema"]["schema"]["additionalProperties"] is False
    assert (body["temperature"], body["max_completion_tokens"]) == (0, 50)


async def test_malformed_tool_arguments_are_flagged(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    provider.reply_json(completion(tool_calls=[tool_call("call_1", "python_math_add", '{"a": 1,')]))
    tools = [ToolSpec(name="python://math.add")]
    response = await client.complete([UserMessage(content="add")], tools=tools)
    [call] = response.tool_calls
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert "invalid JSON" in call.arguments_error


async def test_error_status_is_translated_without_the_key(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    provider.reply_json({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}, status=401)
    with pytest.raises(LLMProviderError, match="answered 401") as caught:
        await client.complete([UserMessage(content="hi")])
    assert caught.value.status_code == 401
    assert str(caught.value) == (
        "openai/gpt-fake answered 401: Incorrect API key provided: *** (auth). "
        "Check the API key (api_key= or OPENAI_API_KEY)."
    )
    assert KEY not in caught.value.body
    assert isinstance(caught.value.__cause__, Exception)


async def test_not_found_names_the_model_and_url(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, base_url = fake
    provider.reply_json({"detail": "Not Found"}, status=404)
    with pytest.raises(LLMProviderError) as caught:
        await client.complete([UserMessage(content="hi")])
    assert str(caught.value).startswith('openai/gpt-fake answered 404: {"detail": "Not Found"}. ')
    assert f"Check the model name 'gpt-fake' and the base URL {base_url}" in str(caught.value)


async def test_unreachable_server_is_a_connection_error() -> None:
    # A port that was free a moment ago: bind, read it, close.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAIClient("gpt-fake", api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=5)
    try:
        with pytest.raises(LLMConnectionError, match="The connection to openai/gpt-fake"):
            await llm.complete([UserMessage(content="hi")])
    finally:
        await llm.aclose()


async def test_streamed_parallel_calls_interleaved(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    fragments = [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "python_math_add", "arguments": ""}},
        {
            "index": 1,
            "id": "call_b",
            "type": "function",
            "function": {"name": "python_text_greet", "arguments": '{"na'},
        },
        {"index": 0, "function": {"arguments": '{"a": 1, '}},
        # Some compatible servers repeat the name in every fragment; it must not be doubled.
        {"index": 1, "function": {"name": "python_text_greet", "arguments": 'me": "Ada"}'}},
        {"index": 0, "function": {"arguments": '"b": 2}'}},
    ]
    provider.reply_stream(
        stream_events(
            [
                *(chunk({"tool_calls": [fragment]}) for fragment in fragments),
                chunk({}, finish_reason="tool_calls"),
                chunk(None, usage=(5, 6)),
            ]
        )
    )
    tools = [ToolSpec(name="python://math.add"), ToolSpec(name="python://text.greet")]
    events = [event async for event in client.stream([UserMessage(content="go")], tools=tools)]
    assert not any(isinstance(event, TextDelta) for event in events)
    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert [(c.id, c.name, c.arguments) for c in done.response.tool_calls] == [
        ("call_a", "python://math.add", {"a": 1, "b": 2}),
        ("call_b", "python://text.greet", {"name": "Ada"}),
    ]
    assert done.response.text == ""


async def test_refusal_is_the_reply_text(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    body = completion(None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    provider.reply_json(body)
    response = await client.complete([UserMessage(content="?")])
    assert response.text == "I can't help with that."


async def test_dropped_or_garbled_streams_are_llm_errors(fake: tuple[FakeProvider, str], client: OpenAIClient) -> None:
    provider, _ = fake
    provider.reply_stream(stream_events([chunk({"content": "Hel"})])[:1], cut=True)
    provider.reply_stream([SSEvent("{not json")])
    provider.reply_raw(b"<html>bad gateway</html>", content_type="text/html")

    async def consume() -> list[object]:
        return [event async for event in client.stream([UserMessage(content="hi")])]

    with pytest.raises(LLMConnectionError, match="The connection to openai/gpt-fake at http://127.0.0.1"):
        await consume()
    with pytest.raises(LLMResponseError, match=r"sent a reply that cannot be read \(JSONDecodeError"):
        await consume()
    with pytest.raises(LLMResponseError, match="sent a reply that cannot be read"):
        await client.complete([UserMessage(content="hi")])


async def test_history_after_max_steps_is_valid_on_the_wire(
    fake: tuple[FakeProvider, str], client: OpenAIClient, tools_kernel: FunctionKernel
) -> None:
    provider, _ = fake
    provider.reply_json(completion(tool_calls=[tool_call("call_1", "python_math_add", {"a": 1, "b": 1})]))
    provider.reply_json(completion("Two."))
    agent = Agent(client, kernel=tools_kernel, max_steps=1)
    with pytest.raises(MaxStepsExceededError) as caught:
        await agent.run("1 + 1?")
    partial = caught.value.result
    assert partial is not None
    result = await agent.run("Just answer.", history=partial.all_messages())
    assert result.output == "Two."
    # Every tool call the API saw is answered by a tool message (else it rejects the request).
    messages = provider.bodies[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2]["tool_call_id"] == "call_1"
    assert "Not run" in messages[2]["content"]


class Unit(StrEnum):
    """A temperature unit."""

    C = "celsius"
    F = "fahrenheit"


class Place(BaseModel):
    """A nested model, sent as a $ref."""

    city: str
    unit: Unit


async def test_nested_models_enums_and_refs_in_strict_mode(
    fake: tuple[FakeProvider, str], client: OpenAIClient, kernel: FunctionKernel
) -> None:
    @pythontool
    def forecast(place: Place, days: list[int]) -> str:
        """Forecast for a place."""
        return f"{place.city}: sunny"

    kernel.register_python_tool("weather.forecast", forecast)
    provider, _ = fake
    arguments = {"place": {"city": "Oslo", "unit": "celsius"}, "days": [1]}
    provider.reply_json(completion(tool_calls=[tool_call("c1", "python_weather_forecast", arguments)]))
    provider.reply_json(completion("Sunny."))
    result = await Agent(client, kernel=kernel).run("Weather in Oslo?")
    assert result.tool_calls[0].result == {"result": "Oslo: sunny"}

    [tool] = provider.bodies[0]["tools"]
    function = tool["function"]
    assert function["strict"] is True
    parameters = function["parameters"]
    assert parameters["properties"]["place"] == {"$ref": "#/$defs/Place"}
    place = parameters["$defs"]["Place"]
    assert (place["additionalProperties"], place["required"]) == (False, ["city", "unit"])
    assert parameters["$defs"]["Unit"]["enum"] == ["celsius", "fahrenheit"]
    assert parameters["properties"]["days"] == {"items": {"type": "integer"}, "title": "Days", "type": "array"}


async def test_an_empty_reply_in_the_history_is_sent_as_empty_text(
    fake: tuple[FakeProvider, str], client: OpenAIClient
) -> None:
    provider, _ = fake
    provider.reply_json(completion("ok"))
    history = [UserMessage(content="hi"), AssistantMessage(), UserMessage(content="hello?")]
    await client.complete(history)
    assert provider.bodies[0]["messages"][1] == {"role": "assistant", "content": ""}
