"""Chat Completions through the ``openai`` SDK: OpenAI itself and compatible servers (Ollama, vLLM, LM Studio).

The SDK is imported when a client is built (``pip install 'kavalai[openai]'``). Its responses are read
duck-typed, so the module does not depend on the SDK's type names; its exceptions are translated here.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kavalai.llm._provider import decode_arguments, import_sdk, name_map, safe_excerpt
from kavalai.llm.base import ModelSettings, parse_structured
from kavalai.llm.errors import (
    LLMConfigurationError,
    LLMConnectionError,
    LLMError,
    LLMProviderError,
    LLMResponseError,
)
from kavalai.llm.messages import (
    AssistantMessage,
    LLMResponse,
    Message,
    ResponseDone,
    StreamEvent,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from kavalai.llm.names import ToolNameMap
from kavalai.llm.schemas import object_schema, openai_strict_schema, schema_name

__all__ = ["OpenAIClient"]


class OpenAIClient:
    """An :class:`~kavalai.llm.LLMClient` for the Chat Completions API.

    Args:
        model: the model name, e.g. ``"gpt-4.1-mini"`` (or the local server's model name).
        api_key: the key; by default ``OPENAI_API_KEY``. Never shown in reprs or messages.
        base_url: the API's base URL, for compatible servers (``"http://localhost:11434/v1"``).
        provider: the name used in messages and errors (``"openai"``, ``"ollama"``, ...).
        timeout: seconds per request.
        max_retries: the SDK's retries of connection errors, 429 and 5xx.
        http_client: an ``httpx2.AsyncClient`` for the SDK to use.
        strict_tools: send tools in strict mode where their schema allows it.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        provider: str = "openai",
        timeout: float = 120.0,
        max_retries: int = 2,
        http_client: Any = None,
        strict_tools: bool = True,
    ) -> None:
        self._sdk = import_sdk("openai", "openai", provider=provider, model=model)
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise LLMConfigurationError(
                f"No API key for {provider}/{model}: set OPENAI_API_KEY, or pass api_key=.",
                provider=provider,
                model=model,
            )
        self._model = model
        self._provider = provider
        self.strict_tools = strict_tools
        self._client: Any = self._sdk.AsyncOpenAI(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries, http_client=http_client
        )

    @property
    def provider(self) -> str:
        """The provider name given at construction."""
        return self._provider

    @property
    def model(self) -> str:
        """The model name sent in every request."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API's base URL."""
        return str(self._client.base_url)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Send one Chat Completions request; see :meth:`kavalai.llm.LLMClient.complete`."""
        names = name_map(messages, tools)
        body = self._body(messages, tools, response_model, settings, names)
        try:
            completion = await self._client.chat.completions.create(**body)
        except self._sdk.OpenAIError as exc:
            raise self._translate(exc) from exc
        return parse_structured(
            self._parse(completion, names), response_model, provider=self._provider, model=self._model
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one request; see :meth:`kavalai.llm.LLMClient.stream`."""
        names = name_map(messages, tools)
        body = self._body(messages, tools, response_model, settings, names)
        body.update(stream=True, stream_options={"include_usage": True})
        acc = _StreamAccumulator(names)
        try:
            chunks = await self._client.chat.completions.create(**body)
            async with chunks:
                async for chunk in chunks:
                    text = acc.add(chunk)
                    if text:
                        yield TextDelta(text=text)
        except self._sdk.OpenAIError as exc:
            raise self._translate(exc) from exc
        response = acc.finish(self._provider, self._model)
        yield ResponseDone(
            response=parse_structured(response, response_model, provider=self._provider, model=self._model)
        )

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_model: type[BaseModel] | None,
        settings: ModelSettings | None,
        names: ToolNameMap,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "messages": [_message(m, names) for m in messages]}
        if tools:
            body["tools"] = [self._tool(tool, names) for tool in tools]
        if response_model is not None:
            body["response_format"] = _response_format(response_model)
        if settings is not None and settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings is not None and settings.max_tokens is not None:
            # OpenAI itself replaced max_tokens; compatible servers still read the old name.
            key = "max_completion_tokens" if self._provider == "openai" else "max_tokens"
            body[key] = settings.max_tokens
        return body

    def _tool(self, tool: ToolSpec, names: ToolNameMap) -> dict[str, Any]:
        function: dict[str, Any] = {"name": names.to_provider(tool.name), "description": tool.description}
        strict = openai_strict_schema(tool.input_schema) if self.strict_tools else None
        if strict is not None:
            function.update(parameters=strict, strict=True)
        else:
            function["parameters"] = object_schema(tool.input_schema)
        return {"type": "function", "function": function}

    def _parse(self, completion: Any, names: ToolNameMap) -> LLMResponse:
        if not completion.choices:
            raise LLMResponseError(
                f"{self._provider} returned no choices for {self._model}.", provider=self._provider, model=self._model
            )
        choice = completion.choices[0]
        calls = [
            _tool_call(call.id, call.function.name, call.function.arguments, names)
            for call in choice.message.tool_calls or ()
            if getattr(call, "function", None) is not None
        ]
        return LLMResponse(
            message=AssistantMessage(content=choice.message.content, tool_calls=tuple(calls)),
            usage=_usage(completion.usage),
            model=completion.model,
            stop_reason=choice.finish_reason,
        )

    def _translate(self, exc: Exception) -> LLMError:
        where = f"{self._provider}/{self._model}"
        if isinstance(exc, self._sdk.APIStatusError):
            body = safe_excerpt(exc.body if exc.body is not None else exc.message)
            return LLMProviderError(
                f"{where} answered {exc.status_code}: {safe_excerpt(exc.message)}",
                provider=self._provider,
                model=self._model,
                status_code=exc.status_code,
                body=body,
            )
        if isinstance(exc, self._sdk.APITimeoutError):
            return LLMConnectionError(f"{where} did not answer in time.", provider=self._provider, model=self._model)
        if isinstance(exc, self._sdk.APIConnectionError):
            return LLMConnectionError(
                f"Cannot reach {where} at {self.base_url}: {safe_excerpt(str(exc))}",
                provider=self._provider,
                model=self._model,
            )
        return LLMError(f"{where} failed: {safe_excerpt(str(exc))}", provider=self._provider, model=self._model)

    def __repr__(self) -> str:
        return f"<OpenAIClient {self._provider}/{self._model} at {self.base_url}>"


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamAccumulator:
    names: ToolNameMap
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    stop_reason: str | None = None

    def add(self, chunk: Any) -> str:
        """Fold one chunk in; return its text."""
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        self.stop_reason = choice.finish_reason or self.stop_reason
        delta = choice.delta
        for call in delta.tool_calls or ():
            pending = self.calls.setdefault(call.index, _PendingCall())
            pending.id = call.id or pending.id
            if call.function is not None:
                pending.name += call.function.name or ""
                pending.arguments.append(call.function.arguments or "")
        text: str = delta.content or ""
        if text:
            self.text.append(text)
        return text

    def finish(self, provider: str, model: str) -> LLMResponse:
        """The complete response once the stream has ended."""
        if self.stop_reason is None and not self.text and not self.calls:
            raise LLMResponseError(
                f"{provider}/{model} ended the stream without a reply.", provider=provider, model=model
            )
        calls = [
            _tool_call(pending.id, pending.name, "".join(pending.arguments), self.names)
            for _, pending in sorted(self.calls.items())
        ]
        message = AssistantMessage(content="".join(self.text) or None, tool_calls=tuple(calls))
        return LLMResponse(message=message, usage=self.usage, model=self.model, stop_reason=self.stop_reason)


def _message(message: Message, names: ToolNameMap) -> dict[str, Any]:
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": message.content}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": names.to_provider(call.name), "arguments": _dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return wire


def _response_format(response_model: type[BaseModel]) -> dict[str, Any]:
    schema = response_model.model_json_schema()
    strict = openai_strict_schema(schema)
    spec: dict[str, Any] = {
        "name": schema_name(response_model),
        "schema": strict or schema,
        "strict": strict is not None,
    }
    return {"type": "json_schema", "json_schema": spec}


def _tool_call(call_id: str | None, name: str, raw_arguments: str | None, names: ToolNameMap) -> ToolCall:
    arguments, error = decode_arguments(raw_arguments)
    uri = names.to_uri(name)
    if call_id:
        return ToolCall(id=call_id, name=uri, arguments=arguments, arguments_error=error)
    return ToolCall(name=uri, arguments=arguments, arguments_error=error)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(requests=1)
    return Usage(input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0, requests=1)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
