"""The Responses API client against a fake OpenAI Responses API on 127.0.0.1: what the SDK sends, what we parse."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from tests.servers.llm_common import FakeProvider, SSEvent
from tests.servers.llm_openai_responses import (
    fake_responses,
    function_call,
    message,
    reasoning,
    response,
    stream_events,
    tool_search_call,
    tool_search_output,
)
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent, AgentEvent, ModelTextDelta
from kavalai.llm import (
    AssistantMessage,
    ModelSettings,
    OpenAIResponsesClient,
    ResponseDone,
    TextDelta,
    ToolCall,
    ToolSpec,
    UserMessage,
    make_client,
)
from kavalai.llm.errors import LLMConfigurationError, LLMConnectionError, LLMProviderError, LLMResponseError

KEY = "sk-wire-test-key-0123456789"


class City(BaseModel):
    """Structured output."""

    name: str
    population: int


@pytest.fixture
def fake() -> Iterator[tuple[FakeProvider, str]]:
    provider = fake_responses()
    with serve(provider.app(), lifespan="off") as url:
        yield provider, f"{url}/v1"


@pytest.fixture
async def client(fake: tuple[FakeProvider, str]) -> AsyncIterator[OpenAIResponsesClient]:
    llm = OpenAIResponsesClient("gpt-fake", api_key=KEY, base_url=fake[1], max_retries=0, timeout=10)
    yield llm
    await llm.aclose()


@pytest.fixture
def tools_kernel(kernel: FunctionKernel) -> FunctionKernel:
    @pythontool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @pythontool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    @pythontool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    @pythontool
    def greet(name: str, punctuation: str = "!") -> str:
        """Greet someone."""
        return f"Hello {name}{punctuation}"

    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("math.multiply", multiply)
    kernel.register_python_tool("math.divide", divide)
    kernel.register_python_tool("text.greet", greet)
    return kernel


async def test_agent_round_trip_over_the_wire(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient, tools_kernel: FunctionKernel
) -> None:
    provider, _ = fake
    provider.reply_json(
        response(
            function_call("call_1", "python_math_add", {"a": 2, "b": 3}),
            function_call("call_2", "python_text_greet", {"name": "Ada"}),
        )
    )
    provider.reply_json(response(message("2 + 3 = 5. Hello Ada!")))
    agent = Agent(client, kernel=tools_kernel, instructions="Be exact.", tool_search=False)
    result = await agent.run("Add 2 and 3, greet Ada.")

    assert result.output == "2 + 3 = 5. Hello Ada!"
    assert [(r.uri, r.result) for r in result.tool_calls] == [
        ("python://math.add", {"result": 5}),
        ("python://text.greet", {"result": "Hello Ada!"}),
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (22, 14, 2)

    first, second = provider.requests
    assert first.path == "/v1/responses"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    tools = {tool["name"]: tool for tool in first.body["tools"]}
    assert set(tools) == {"python_math_add", "python_math_multiply", "python_math_divide", "python_text_greet"}
    add = tools["python_math_add"]
    assert (add["type"], add["strict"], add["description"]) == ("function", True, "Add two integers.")
    assert add["parameters"]["additionalProperties"] is False
    # An optional argument: strict mode would change the schema, and the API would try it unless told not to.
    assert tools["python_text_greet"]["strict"] is False
    assert tools["python_text_greet"]["parameters"]["required"] == ["name"]
    assert not any("defer_loading" in tool for tool in first.body["tools"])
    assert first.body["input"] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Add 2 and 3, greet Ada."},
    ]
    assert "store" not in first.body

    # A plain reply goes back as plain items: the conversation stays portable to other clients.
    assert second.body["input"][2:] == [
        {"type": "function_call", "call_id": "call_1", "name": "python_math_add", "arguments": '{"a":2,"b":3}'},
        {"type": "function_call", "call_id": "call_2", "name": "python_text_greet", "arguments": '{"name":"Ada"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"result":5}'},
        {"type": "function_call_output", "call_id": "call_2", "output": '{"result":"Hello Ada!"}'},
    ]


async def test_native_tool_search_defers_tools_in_namespaces_and_sends_its_items_back(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient, tools_kernel: FunctionKernel
) -> None:
    provider, _ = fake
    loaded = {
        "type": "namespace",
        "name": "python_math",
        "description": "math",
        "tools": [{"type": "function", "name": "python_math_multiply", "defer_loading": True, "parameters": {}}],
    }
    provider.reply_json(
        response(
            tool_search_call("multiply two numbers"),
            tool_search_output(loaded),
            function_call("call_1", "python_math_multiply", {"a": 6, "b": 7}, namespace="python_math"),
        )
    )
    provider.reply_json(response(message("42.")))
    agent = Agent(client, kernel=tools_kernel, tool_search="native", core_tools=["python://math.add"])
    result = await agent.run("What is six times seven?")

    assert result.output == "42."
    [record] = result.tool_calls
    assert (record.uri, record.result) == ("python://math.multiply", {"result": 42})
    first, second = provider.bodies
    tools = first["tools"]
    assert tools[0] == {"type": "tool_search"}
    by_name = {tool["name"]: tool for tool in tools[1:]}
    assert "defer_loading" not in by_name["python_math_add"]  # a core tool is shown up front
    namespace = by_name["python_math"]
    assert namespace["type"] == "namespace"
    assert "defer_loading" not in namespace  # deferral belongs to the functions inside
    assert [(f["name"], f["defer_loading"]) for f in namespace["tools"]] == [
        ("python_math_divide", True),
        ("python_math_multiply", True),
    ]
    assert namespace["description"] == "2 tools of python_math: python_math_divide, python_math_multiply."
    # A server with one deferred tool: the function alone, deferred (a namespace would only add tokens).
    greet = by_name["python_text_greet"]
    assert (greet["type"], greet["defer_loading"]) == ("function", True)

    # The search's items and the namespaced call go back as the API returned them, then the call's output.
    sent_back = second["input"][1:]
    assert [item["type"] for item in sent_back] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
        "function_call_output",
    ]
    assert sent_back[1]["tools"][0]["tools"][0]["name"] == "python_math_multiply"
    assert sent_back[2]["namespace"] == "python_math"
    assert sent_back[3] == {"type": "function_call_output", "call_id": "call_1", "output": '{"result":42}'}
    assert second["tools"] == first["tools"]  # the tool list, and the prompt cache, stay the same


async def test_native_tool_search_works_while_streaming(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient, tools_kernel: FunctionKernel
) -> None:
    provider, _ = fake
    final = response(
        tool_search_call("greet"),
        tool_search_output({"type": "function", "name": "python_text_greet", "defer_loading": True}),
        function_call("call_1", "python_text_greet", {"name": "Ada"}),
    )
    provider.reply_stream(stream_events([], final))
    provider.reply_stream(stream_events(["Hello ", "Ada!"], response(message("Hello Ada!"))))
    deltas: list[str] = []

    def observe(event: AgentEvent) -> None:
        if isinstance(event, ModelTextDelta):
            deltas.append(event.text)

    agent = Agent(client, kernel=tools_kernel, tool_search="native", stream=True, on_event=observe)
    result = await agent.run("Greet Ada.")

    assert result.output == "Hello Ada!"
    assert deltas == ["Hello ", "Ada!"]
    assert [(r.uri, r.result) for r in result.tool_calls] == [("python://text.greet", {"result": "Hello Ada!"})]
    first, second = provider.bodies
    assert first["stream"] is True
    assert first["tools"][0] == {"type": "tool_search"}
    assert [item["type"] for item in second["input"][1:]] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
        "function_call_output",
    ]


async def test_namespaces_can_be_turned_off(fake: tuple[FakeProvider, str], tools_kernel: FunctionKernel) -> None:
    provider, base_url = fake
    provider.reply_json(response(message("Nothing to do.")))
    async with OpenAIResponsesClient("gpt-fake", api_key=KEY, base_url=base_url, namespaces=False) as llm:
        await Agent(llm, kernel=tools_kernel, tool_search="native").run("Hello.")
    [body] = provider.bodies
    assert body["tools"][0] == {"type": "tool_search"}
    assert [(t["type"], t["defer_loading"]) for t in body["tools"][1:]] == [("function", True)] * 4


async def test_reasoning_items_go_back_encrypted_when_nothing_is_stored(
    fake: tuple[FakeProvider, str], tools_kernel: FunctionKernel
) -> None:
    provider, base_url = fake
    provider.reply_json(
        response(reasoning(encrypted="opaque-blob"), function_call("call_1", "python_math_add", {"a": 1, "b": 2}))
    )
    provider.reply_json(response(reasoning("rs_2", encrypted="more"), message("3")))
    async with OpenAIResponsesClient("gpt-fake", api_key=KEY, base_url=base_url, store=False) as llm:
        result = await Agent(llm, kernel=tools_kernel, tool_search=False).run("1 + 2?")
    assert result.output == "3"
    first, second = provider.bodies
    assert (first["store"], first["include"]) == (False, ["reasoning.encrypted_content"])
    assert second["input"][1] == {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque-blob"}
    assert second["input"][2]["type"] == "function_call"
    # The final answer's message is kept with its reasoning too, for a conversation that goes on.
    kept = result.all_messages()[-1]
    assert isinstance(kept, AssistantMessage)
    assert [item["type"] for item in kept.provider_content] == ["reasoning", "message"]
    assert kept.content == "3"


async def test_structured_output_and_settings(fake: tuple[FakeProvider, str], client: OpenAIResponsesClient) -> None:
    provider, _ = fake
    provider.reply_json(response(message(json.dumps({"name": "Oslo", "population": 709000}))))
    reply = await client.complete(
        [UserMessage(content="Oslo?")], response_model=City, settings=ModelSettings(temperature=0, max_tokens=50)
    )
    assert reply.parsed == City(name="Oslo", population=709000)
    assert reply.stop_reason == "stop"
    body = provider.bodies[0]
    spec = body["text"]["format"]
    assert (spec["type"], spec["name"], spec["strict"]) == ("json_schema", "City", True)
    assert spec["schema"]["additionalProperties"] is False
    assert (body["temperature"], body["max_output_tokens"]) == (0, 50)


async def test_a_refusal_is_the_reply_text(fake: tuple[FakeProvider, str], client: OpenAIResponsesClient) -> None:
    provider, _ = fake
    refused = message("")
    refused["content"] = [{"type": "refusal", "refusal": "I can't help with that."}]
    provider.reply_json(response(refused))
    reply = await client.complete([UserMessage(content="?")])
    assert reply.text == "I can't help with that."


async def test_an_incomplete_reply_says_why(fake: tuple[FakeProvider, str], client: OpenAIResponsesClient) -> None:
    provider, _ = fake
    provider.reply_json(response(message("The answer is"), status="incomplete", incomplete_reason="max_output_tokens"))
    provider.reply_json(response(message("Hm"), status="incomplete", incomplete_reason="content_filter"))
    cut = await client.complete([UserMessage(content="?")])
    assert (cut.text, cut.stop_reason) == ("The answer is", "max_tokens")
    filtered = await client.complete([UserMessage(content="?")])
    assert filtered.stop_reason == "content_filter"


async def test_streamed_text_and_a_tool_call(fake: tuple[FakeProvider, str], client: OpenAIResponsesClient) -> None:
    provider, _ = fake
    final = response(
        message("Let me check."), function_call("call_9", "python_math_add", {"a": 4, "b": 5}), usage=(30, 9)
    )
    provider.reply_stream(stream_events(["Let me ", "check."], final))
    tools = [ToolSpec(name="python://math.add")]
    events = [event async for event in client.stream([UserMessage(content="add")], tools=tools)]

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "check."]
    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.text == "Let me check."
    [call] = done.response.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_9", "python://math.add", {"a": 4, "b": 5})
    assert (done.response.usage.input_tokens, done.response.usage.output_tokens) == (30, 9)
    assert done.response.stop_reason == "tool_calls"
    assert done.response.message.provider_content == ()  # nothing only the API reads


async def test_failed_dropped_or_garbled_streams_are_llm_errors(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient
) -> None:
    provider, _ = fake
    failed = response(status="failed", error={"code": "server_error", "message": "The model crashed."})
    provider.reply_stream(stream_events(["Hel"], failed, final_type="response.failed"))
    error_event = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "sequence_number": 1}
    provider.reply_stream([*stream_events(["Hel"], None), SSEvent(error_event, event="error")])
    provider.reply_stream(stream_events(["Hel"], None), cut=True)
    provider.reply_stream([SSEvent("{not json")])

    async def consume() -> list[object]:
        return [event async for event in client.stream([UserMessage(content="hi")])]

    with pytest.raises(LLMResponseError, match=r"failed to reply \(server_error: The model crashed.\)"):
        await consume()
    with pytest.raises(LLMResponseError, match=r"ended the stream without a response \(rate_limit_exceeded: Slow"):
        await consume()
    with pytest.raises(LLMConnectionError, match="The connection to openai/gpt-fake at http://127.0.0.1"):
        await consume()
    with pytest.raises(LLMResponseError, match=r"sent a reply that cannot be read \(JSONDecodeError"):
        await consume()


async def test_a_failed_or_shapeless_response_is_an_llm_error(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient
) -> None:
    provider, _ = fake
    provider.reply_json(response(status="failed", error={"code": "server_error", "message": f"boom {KEY}"}))
    provider.reply_json({"id": "resp_x", "object": "response", "model": "gpt-fake", "status": "completed"})
    provider.reply_raw(b"<html>bad gateway</html>", content_type="text/html")
    with pytest.raises(LLMResponseError, match="failed to reply") as caught:
        await client.complete([UserMessage(content="hi")])
    assert KEY not in str(caught.value)
    with pytest.raises(LLMResponseError, match=r"sent a reply that cannot be read \(no output items"):
        await client.complete([UserMessage(content="hi")])
    with pytest.raises(LLMResponseError, match="sent a reply that cannot be read"):
        await client.complete([UserMessage(content="hi")])


async def test_error_status_is_translated_without_the_key(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient
) -> None:
    provider, _ = fake
    provider.reply_json({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}, status=401)
    with pytest.raises(LLMProviderError, match="answered 401") as caught:
        await client.complete([UserMessage(content="hi")])
    assert caught.value.status_code == 401
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.body


async def test_malformed_arguments_are_flagged(fake: tuple[FakeProvider, str], client: OpenAIResponsesClient) -> None:
    provider, _ = fake
    provider.reply_json(response(function_call("call_1", "python_math_add", '{"a": 1,')))
    reply = await client.complete([UserMessage(content="add")], tools=[ToolSpec(name="python://math.add")])
    [call] = reply.tool_calls
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert "invalid JSON" in call.arguments_error


async def test_history_of_plain_messages_on_the_wire(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient
) -> None:
    provider, _ = fake
    provider.reply_json(response(message("ok")))
    history: list[Any] = [
        UserMessage(content="hi"),
        AssistantMessage(content=None),  # an empty reply kept in a stored conversation
        AssistantMessage(content="Adding.", tool_calls=(ToolCall(id="c1", name="python://math.add", arguments={}),)),
    ]
    await client.complete(history, tools=[ToolSpec(name="python://math.add")])
    assert provider.bodies[0]["input"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "Adding."},
        {"type": "function_call", "call_id": "c1", "name": "python_math_add", "arguments": "{}"},
    ]


def test_make_client_builds_the_responses_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    llm = make_client("openai/gpt-5.4", api="responses", timeout=5)
    assert isinstance(llm, OpenAIResponsesClient)
    assert (llm.provider, llm.model) == ("openai", "gpt-5.4")
    local = make_client("vllm/qwen3", api="responses")
    assert isinstance(local, OpenAIResponsesClient)
    assert local.base_url.startswith("http://localhost:8000/v1")
    assert type(make_client("openai/gpt-4.1-mini", api="chat")).__name__ == "OpenAIClient"
    with pytest.raises(LLMConfigurationError, match=r"api='responses' is not an API of 'anthropic'"):
        make_client("anthropic/claude-sonnet-4-5", api_key=KEY, api="responses")
    with pytest.raises(LLMConfigurationError, match=r"api='completions' is not an API of 'openai'"):
        make_client("openai/gpt-5.4", api="completions")  # type: ignore[arg-type]


async def test_another_providers_kept_content_is_not_sent(
    fake: tuple[FakeProvider, str], client: OpenAIResponsesClient
) -> None:
    # A conversation begun with Claude's tool search goes on with OpenAI: Anthropic's blocks are not items.
    provider, _ = fake
    provider.reply_json(response(message("ok")))
    blocks = ({"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {}},)
    call = ToolCall(id="c1", name="python://math.add", arguments={"a": 1})
    for kept_format in ("anthropic", None):  # None: stored before the field existed, by Anthropic's client
        history = [
            UserMessage(content="Add."),
            AssistantMessage(tool_calls=(call,), provider_content=blocks, provider_format=kept_format),
        ]
        await client.complete(history, tools=[ToolSpec(name="python://math.add")])
        provider.reply_json(response(message("ok")))
    for body in provider.bodies:
        assert body["input"][1] == {
            "type": "function_call",
            "call_id": "c1",
            "name": "python_math_add",
            "arguments": '{"a":1}',
        }
