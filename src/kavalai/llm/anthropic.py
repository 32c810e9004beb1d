"""Anthropic Messages through the ``anthropic`` SDK.

The SDK is imported when a client is built (``pip install 'kavalai[anthropic]'``). Tool results of one step go
back in one user message of ``tool_result`` blocks, as the API requires; consecutive messages of one role are
merged. Structured output uses ``output_config.format`` when the schema fits what the API enforces, and a JSON
instruction in the system prompt otherwise. Its exceptions are translated in
:class:`~kavalai.llm._provider.SDKClient`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from kavalai.llm._provider import SDKClient, tool_call
from kavalai.llm.base import ModelSettings, structured_output_instruction
from kavalai.llm.errors import LLMResponseError
from kavalai.llm.messages import (
    AssistantMessage,
    LLMResponse,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
)
from kavalai.llm.names import ToolNameMap
from kavalai.llm.schemas import anthropic_input_schema, anthropic_output_schema

__all__ = ["AnthropicClient"]

_DEFAULT_MAX_TOKENS: Final = 4096


class AnthropicClient(SDKClient):
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

    _sdk_module = "anthropic"
    _sdk_client = "AsyncAnthropic"
    _sdk_base_error = "AnthropicError"
    _key_env = "ANTHROPIC_API_KEY"
    #: Claude searches ``deferred`` tools itself (the API's BM25 tool search), loading what it finds.
    native_tool_search = True

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
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            provider="anthropic",
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
        self.max_tokens = max_tokens

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
            schema = anthropic_output_schema(response_model.model_json_schema())
            if schema is not None:
                body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
            else:
                system.append(structured_output_instruction(response_model))
        if system:
            body["system"] = "\n\n".join(system)
        if tools:
            body["tools"] = [_tool(tool, names) for tool in tools]
            if any(tool.deferred for tool in tools):  # Claude finds the deferred ones with its own search
                body["tools"].insert(0, dict(_TOOL_SEARCH))
        if settings is not None and settings.temperature is not None:
            body["temperature"] = settings.temperature
        return body

    async def _send(self, body: dict[str, Any]) -> Any:
        return await self._client.messages.create(**body)

    async def _open_stream(self, body: dict[str, Any]) -> Any:
        return await self._client.messages.create(**body, stream=True)

    def _accumulator(self, names: ToolNameMap) -> _StreamAccumulator:
        return _StreamAccumulator(names, self._model)

    def _parse(self, reply: Any, names: ToolNameMap) -> LLMResponse:
        if not isinstance(getattr(reply, "content", None), list):
            raise LLMResponseError(
                f"anthropic/{self._model} sent a message without content blocks.",
                provider="anthropic",
                model=self._model,
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        kept: tuple[dict[str, Any], ...] = ()
        for block in reply.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                arguments = block.input if isinstance(block.input, dict) else str(block.input)
                calls.append(tool_call(block.id, block.name, arguments, names))
            elif block.type in _SERVER_BLOCKS:
                # Its own tool search ran: the next request must carry these blocks back, in their place.
                kept = tuple(b.model_dump(mode="json", exclude_none=True) for b in reply.content)
        message = AssistantMessage(
            content="".join(texts) or None,
            tool_calls=tuple(calls),
            provider_content=kept,
            provider_format=_FORMAT if kept else None,
        )
        return LLMResponse(
            message=message,
            usage=_usage(reply.usage, reply.usage.output_tokens),
            model=reply.model,
            stop_reason=reply.stop_reason,
        )


#: The API's own tool search (BM25 over the deferred tools' names, descriptions and arguments).
_TOOL_SEARCH: Final = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
#: The ``provider_format`` of the blocks this client keeps.
_FORMAT: Final = "anthropic"
#: Blocks of a reply that only the API reads back: its tool search's call and result.
_SERVER_BLOCKS: Final = frozenset({"server_tool_use", "tool_search_tool_result"})


def _tool(tool: ToolSpec, names: ToolNameMap) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "name": names.to_provider(tool.name),
        "description": tool.description,
        "input_schema": anthropic_input_schema(tool.input_schema),
    }
    if tool.deferred:
        wire["defer_loading"] = True
    return wire


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
        if message.provider_content and message.provider_format in (None, _FORMAT):
            return "assistant", [dict(block) for block in message.provider_content]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
        blocks += [
            {"type": "tool_use", "id": call.id, "name": names.to_provider(call.name), "input": call.arguments}
            for call in message.tool_calls
        ]
        return "assistant", blocks
    return "user", [{"type": "text", "text": message.content}]


def _usage(usage: Any, output_tokens: int | None) -> Usage:
    """Anthropic counts cached prompt tokens apart from ``input_tokens``; they are input all the same."""
    cached = (getattr(usage, "cache_creation_input_tokens", None) or 0) + (
        getattr(usage, "cache_read_input_tokens", None) or 0
    )
    return Usage(input_tokens=(usage.input_tokens or 0) + cached, output_tokens=output_tokens or 0, requests=1)


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


@dataclass
class _StreamAccumulator:
    """Folds Messages stream events: ``message_start``, content block starts and deltas, ``message_delta``."""

    names: ToolNameMap
    model: str
    blocks: dict[int, _Block] = field(default_factory=dict)
    start_usage: Any = None
    output_tokens: int = 0
    reply_model: str | None = None
    stop_reason: str | None = None

    def add(self, event: Any) -> str:
        """Fold one server-sent event in; return its text."""
        kind = event.type
        if kind == "message_start":
            self.reply_model = event.message.model
            self.start_usage = event.message.usage
            self.output_tokens = event.message.usage.output_tokens or 0
        elif kind == "content_block_start":
            block = event.content_block
            self.blocks[event.index] = _Block(block.type, getattr(block, "id", ""), getattr(block, "name", ""))
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.output_tokens = event.usage.output_tokens or self.output_tokens  # cumulative
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
        if self.start_usage is None:
            raise LLMResponseError(
                f"anthropic/{self.model} ended the stream without a message.", provider="anthropic", model=self.model
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        for _, block in sorted(self.blocks.items()):
            if block.type == "text":
                texts.append("".join(block.parts))
            elif block.type == "tool_use":
                calls.append(tool_call(block.id, block.name, "".join(block.parts), self.names))
        return LLMResponse(
            message=AssistantMessage(content="".join(texts) or None, tool_calls=tuple(calls)),
            usage=_usage(self.start_usage, self.output_tokens),
            model=self.reply_model,
            stop_reason=self.stop_reason,
        )
