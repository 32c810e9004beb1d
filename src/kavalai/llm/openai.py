"""Chat Completions through the ``openai`` SDK: OpenAI itself and compatible servers (Ollama, vLLM, LM Studio).

The SDK is imported when a client is built (``pip install 'kavalai[openai]'``). Its responses are read
duck-typed, so the module does not depend on the SDK's type names; its exceptions are translated in
:class:`~kavalai.llm._provider.SDKClient`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kavalai.llm._provider import SDKClient, tool_call
from kavalai.llm.base import ModelSettings
from kavalai.llm.errors import LLMResponseError
from kavalai.llm.messages import (
    AssistantMessage,
    LLMResponse,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from kavalai.llm.names import ToolNameMap
from kavalai.llm.schemas import object_schema, openai_strict_schema, schema_name

__all__ = ["OpenAIClient"]


class OpenAIClient(SDKClient):
    """An :class:`~kavalai.llm.LLMClient` for the Chat Completions API.

    Args:
        model: the model name, e.g. ``"gpt-4.1-mini"`` (or the local server's model name).
        api_key: the key; by default ``OPENAI_API_KEY``. Never shown in reprs or messages.
        base_url: the API's base URL, for compatible servers (``"http://localhost:11434/v1"``).
        provider: the name used in messages and errors (``"openai"``, ``"ollama"``, ...). With ``"openai"``
            the reply limit is sent as ``max_completion_tokens``, otherwise as ``max_tokens``.
        timeout: seconds per request.
        max_retries: the SDK's retries of connection errors, 429 and 5xx.
        http_client: an ``httpx2.AsyncClient`` for the SDK to use.
        strict_tools: send tools in strict mode where their schema allows it.
    """

    _sdk_module = "openai"
    _sdk_client = "AsyncOpenAI"
    _sdk_base_error = "OpenAIError"
    _key_env = "OPENAI_API_KEY"

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
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            provider=provider,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
        self.strict_tools = strict_tools

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

    async def _send(self, body: dict[str, Any]) -> Any:
        return await self._client.chat.completions.create(**body)

    async def _open_stream(self, body: dict[str, Any]) -> Any:
        return await self._client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True})

    def _accumulator(self, names: ToolNameMap) -> _StreamAccumulator:
        return _StreamAccumulator(names, self._provider, self._model)

    def _tool(self, tool: ToolSpec, names: ToolNameMap) -> dict[str, Any]:
        function: dict[str, Any] = {"name": names.to_provider(tool.name), "description": tool.description}
        strict = openai_strict_schema(tool.input_schema) if self.strict_tools else None
        if strict is not None:
            function.update(parameters=strict, strict=True)
        else:
            function["parameters"] = object_schema(tool.input_schema)
        return {"type": "function", "function": function}

    def _parse(self, reply: Any, names: ToolNameMap) -> LLMResponse:
        if not reply.choices:
            raise LLMResponseError(
                f"{self._provider}/{self._model} returned no choices.", provider=self._provider, model=self._model
            )
        choice = reply.choices[0]
        message = choice.message
        calls = [
            tool_call(call.id, call.function.name, call.function.arguments, names)
            for call in message.tool_calls or ()
            if getattr(call, "function", None) is not None
        ]
        return LLMResponse(
            # A refusal (structured outputs) is the reply's text: the agent shows it, or asks for a repair.
            message=AssistantMessage(
                content=message.content or getattr(message, "refusal", None), tool_calls=tuple(calls)
            ),
            usage=_usage(reply.usage),
            model=reply.model,
            stop_reason=choice.finish_reason,
        )


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamAccumulator:
    """Folds ``chat.completion.chunk``s: text deltas, tool-call fragments keyed by ``index``, the usage chunk."""

    names: ToolNameMap
    provider: str
    model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=lambda: Usage(requests=1))
    reply_model: str | None = None
    stop_reason: str | None = None

    def add(self, event: Any) -> str:
        """Fold one chunk in; return its text."""
        self.reply_model = event.model or self.reply_model
        if event.usage is not None:
            self.usage = _usage(event.usage)
        if not event.choices:
            return ""
        choice = event.choices[0]
        self.stop_reason = choice.finish_reason or self.stop_reason
        delta = choice.delta
        for call in delta.tool_calls or ():
            pending = self.calls.setdefault(call.index, _PendingCall())
            pending.id = call.id or pending.id
            if call.function is not None:
                # The name arrives in the first fragment; some compatible servers repeat it in every fragment.
                name = call.function.name or ""
                if name != pending.name:
                    pending.name += name
                pending.arguments.append(call.function.arguments or "")
        text: str = delta.content or getattr(delta, "refusal", None) or ""
        if text:
            self.text.append(text)
        return text

    def finish(self) -> LLMResponse:
        """The complete response once the stream has ended."""
        if self.stop_reason is None and not self.text and not self.calls:
            raise LLMResponseError(
                f"{self.provider}/{self.model} ended the stream without a reply.",
                provider=self.provider,
                model=self.model,
            )
        calls = [
            tool_call(pending.id, pending.name, "".join(pending.arguments), self.names)
            for _, pending in sorted(self.calls.items())
        ]
        message = AssistantMessage(content="".join(self.text) or None, tool_calls=tuple(calls))
        return LLMResponse(message=message, usage=self.usage, model=self.reply_model, stop_reason=self.stop_reason)


def _message(message: Message, names: ToolNameMap) -> dict[str, Any]:
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": message.content}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    # The API refuses an assistant message with neither content nor tool calls (an empty reply in the history).
    content = message.content if message.content is not None or message.tool_calls else ""
    wire: dict[str, Any] = {"role": "assistant", "content": content}
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


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(requests=1)
    return Usage(input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0, requests=1)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
