"""Anthropic Messages through the ``anthropic`` SDK.

The SDK is imported when a client is built (``pip install 'kavalai[anthropic]'``). Tool results of one step go
back in one user message of ``tool_result`` blocks, as the API requires; consecutive messages of one role are
merged. Structured output uses ``output_config.format`` when the schema fits the API's strict subset, and a JSON
instruction in the system prompt otherwise.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from kavalai.llm._provider import decode_arguments, import_sdk, name_map, safe_excerpt
from kavalai.llm.base import ModelSettings, parse_structured, structured_output_instruction
from kavalai.llm.errors import LLMConfigurationError, LLMConnectionError, LLMError, LLMProviderError
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
)
from kavalai.llm.names import ToolNameMap
from kavalai.llm.schemas import anthropic_input_schema, openai_strict_schema

__all__ = ["AnthropicClient"]

_DEFAULT_MAX_TOKENS: Final = 4096


class AnthropicClient:
    """An :class:`~kavalai.llm.LLMClient` for the Anthropic Messages API.

    Args:
        model: the model name, e.g. ``"claude-sonnet-4-5"``.
        api_key: the key; by default ``ANTHROPIC_API_KEY``. Never shown in reprs or messages.
        base_url: the API's base URL.
        timeout: seconds per request.
        max_retries: the SDK's retries of connection errors, 429 and 5xx.
        max_tokens: the reply limit when the call's settings give none (the API requires one).
        http_client: an ``httpx2.AsyncClient`` for the SDK to use.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
        http_client: Any = None,
    ) -> None:
        self._sdk = import_sdk("anthropic", "anthropic", provider="anthropic", model=model)
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise LLMConfigurationError(
                f"No API key for anthropic/{model}: set ANTHROPIC_API_KEY, or pass api_key=.",
                provider="anthropic",
                model=model,
            )
        self._model = model
        self.max_tokens = max_tokens
        self._client: Any = self._sdk.AsyncAnthropic(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries, http_client=http_client
        )

    @property
    def provider(self) -> str:
        """Always ``"anthropic"``."""
        return "anthropic"

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
        """Send one Messages request; see :meth:`kavalai.llm.LLMClient.complete`."""
        names = name_map(messages, tools)
        body = self._body(messages, tools, response_model, settings, names)
        try:
            message = await self._client.messages.create(**body)
        except self._sdk.AnthropicError as exc:
            raise self._translate(exc) from exc
        return parse_structured(_parse(message, names), response_model, provider="anthropic", model=self._model)

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
        acc = _StreamAccumulator(names)
        try:
            events = await self._client.messages.create(**body, stream=True)
            async with events:
                async for event in events:
                    text = acc.add(event)
                    if text:
                        yield TextDelta(text=text)
        except self._sdk.AnthropicError as exc:
            raise self._translate(exc) from exc
        yield ResponseDone(
            response=parse_structured(acc.finish(), response_model, provider="anthropic", model=self._model)
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
        max_tokens = settings.max_tokens if settings is not None and settings.max_tokens else self.max_tokens
        body: dict[str, Any] = {"model": self._model, "max_tokens": max_tokens, "messages": _messages(messages, names)}
        system = [message.content for message in messages if isinstance(message, SystemMessage)]
        if response_model is not None:
            schema = openai_strict_schema(response_model.model_json_schema())
            if schema is not None:
                body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
            else:
                system.append(structured_output_instruction(response_model))
        if system:
            body["system"] = "\n\n".join(system)
        if tools:
            body["tools"] = [
                {
                    "name": names.to_provider(tool.name),
                    "description": tool.description,
                    "input_schema": anthropic_input_schema(tool.input_schema),
                }
                for tool in tools
            ]
        if settings is not None and settings.temperature is not None:
            body["temperature"] = settings.temperature
        return body

    def _translate(self, exc: Exception) -> LLMError:
        where = f"anthropic/{self._model}"
        if isinstance(exc, self._sdk.APIStatusError):
            body = safe_excerpt(exc.body if exc.body is not None else exc.message)
            return LLMProviderError(
                f"{where} answered {exc.status_code}: {safe_excerpt(exc.message)}",
                provider="anthropic",
                model=self._model,
                status_code=exc.status_code,
                body=body,
            )
        if isinstance(exc, self._sdk.APITimeoutError):
            return LLMConnectionError(f"{where} did not answer in time.", provider="anthropic", model=self._model)
        if isinstance(exc, self._sdk.APIConnectionError):
            return LLMConnectionError(
                f"Cannot reach {where} at {self.base_url}: {safe_excerpt(str(exc))}",
                provider="anthropic",
                model=self._model,
            )
        return LLMError(f"{where} failed: {safe_excerpt(str(exc))}", provider="anthropic", model=self._model)

    def __repr__(self) -> str:
        return f"<AnthropicClient anthropic/{self._model} at {self.base_url}>"


def _messages(messages: Sequence[Message], names: ToolNameMap) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, blocks = _blocks(message, names)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def _blocks(message: Message, names: ToolNameMap) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, ToolResultMessage):
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
            "is_error": message.is_error,
        }
        return "user", [block]
    if isinstance(message, AssistantMessage):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
        blocks += [
            {"type": "tool_use", "id": call.id, "name": names.to_provider(call.name), "input": call.arguments}
            for call in message.tool_calls
        ]
        return "assistant", blocks
    return "user", [{"type": "text", "text": message.content}]


def _parse(message: Any, names: ToolNameMap) -> LLMResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {}
            calls.append(ToolCall(id=block.id, name=names.to_uri(block.name), arguments=arguments))
    usage = Usage(input_tokens=message.usage.input_tokens, output_tokens=message.usage.output_tokens, requests=1)
    return LLMResponse(
        message=AssistantMessage(content="".join(texts) or None, tool_calls=tuple(calls)),
        usage=usage,
        model=message.model,
        stop_reason=message.stop_reason,
    )


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


@dataclass
class _StreamAccumulator:
    names: ToolNameMap
    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    stop_reason: str | None = None

    def add(self, event: Any) -> str:
        """Fold one server-sent event in; return its text."""
        kind = event.type
        if kind == "message_start":
            self.model = event.message.model
            self.input_tokens = event.message.usage.input_tokens or 0
            self.output_tokens = event.message.usage.output_tokens or 0
        elif kind == "content_block_start":
            block = event.content_block
            self.blocks[event.index] = _Block(block.type, getattr(block, "id", ""), getattr(block, "name", ""))
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.output_tokens = event.usage.output_tokens or self.output_tokens
        return ""

    def _delta(self, index: int, delta: Any) -> str:
        block = self.blocks.setdefault(index, _Block("text"))
        if delta.type == "text_delta":
            block.parts.append(delta.text)
            return str(delta.text)
        if delta.type == "input_json_delta":
            block.parts.append(delta.partial_json)
        return ""

    def finish(self) -> LLMResponse:
        """The complete response once the stream has ended."""
        texts: list[str] = []
        calls: list[ToolCall] = []
        for _, block in sorted(self.blocks.items()):
            if block.type == "text":
                texts.append("".join(block.parts))
            elif block.type == "tool_use":
                arguments, error = decode_arguments("".join(block.parts))
                calls.append(
                    ToolCall(
                        id=block.id, name=self.names.to_uri(block.name), arguments=arguments, arguments_error=error
                    )
                )
        usage = Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens, requests=1)
        return LLMResponse(
            message=AssistantMessage(content="".join(texts) or None, tool_calls=tuple(calls)),
            usage=usage,
            model=self.model,
            stop_reason=self.stop_reason,
        )
