"""OpenAI's Responses API through the ``openai`` SDK, with its hosted tool search.

The Responses API is OpenAI's newer interface: a conversation is a list of *items* (messages, ``function_call``,
``function_call_output``, reasoning, tool searches) rather than chat messages. It is the one OpenAI API with a
hosted tool search: tools sent with ``defer_loading`` stay out of the model's context until its ``tool_search``
loads them. Items the API returns that only it reads back (reasoning, a tool search and what it loaded, calls of
namespaced tools) are kept on the assistant message as ``provider_content`` and sent back in their place, as the
API asks when a conversation is not stored on its side.

The SDK is imported when a client is built (``pip install 'kavalai[openai]'``); responses are read duck-typed,
and exceptions are translated in :class:`~kavalai.llm._provider.SDKClient`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from kavalai.llm._provider import SDKClient, tool_call
from kavalai.llm.base import ModelSettings
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
    UserMessage,
)
from kavalai.llm.names import MAX_NAME_LENGTH, ToolNameMap, provider_name
from kavalai.llm.schemas import object_schema, openai_strict_schema, schema_name

__all__ = ["OpenAIResponsesClient"]

#: The ``provider_format`` of the items this client keeps.
_FORMAT: Final = "openai-responses"
#: The API's hosted tool search: the model searches the deferred tools and loads what it finds.
_TOOL_SEARCH: Final = {"type": "tool_search"}
#: Output items a plain conversation carries; any other item is sent back as the API returned it.
_PLAIN_ITEMS: Final = frozenset({"message", "function_call"})
#: OpenAI advises namespaces of fewer than ten functions; a namespace's description lists at most this many names.
_NAMES_IN_DESCRIPTION: Final = 12
_FINAL_EVENTS: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
_TEXT_EVENTS: Final = frozenset({"response.output_text.delta", "response.refusal.delta"})


class OpenAIResponsesClient(SDKClient):
    """An :class:`~kavalai.llm.LLMClient` for OpenAI's Responses API (``make_client(..., api="responses")``).

    With an agent's ``tool_search="native"``, the tools outside its ``core_tools`` are sent with
    ``defer_loading`` next to the API's ``tool_search`` tool (gpt-5.4 and later models), grouped in one
    namespace per tool server (``mcp://github.*`` -> namespace ``mcp_github``) as OpenAI recommends, so the model
    sees a namespace's name and description until it loads the tools it needs.

    Args:
        model: the model name, e.g. ``"gpt-5.4"``.
        api_key: the key; by default ``OPENAI_API_KEY``. Never shown in reprs or messages.
        base_url: the API's base URL.
        provider: the name used in messages and errors.
        timeout: seconds per request.
        max_retries: the SDK's retries of connection errors, 429 and 5xx.
        http_client: an ``httpx2.AsyncClient`` for the SDK to use.
        strict_tools: send tools in strict mode where their schema allows it (otherwise ``strict: false``:
            the API would try strict mode on its own).
        store: whether OpenAI keeps the responses (``None``: the API's default). With ``False`` the reasoning
            items come back encrypted, so they can be sent back without being stored.
        namespaces: group deferred tools in one namespace per server; ``False`` defers each function alone.
    """

    _sdk_module = "openai"
    _sdk_client = "AsyncOpenAI"
    _sdk_base_error = "OpenAIError"
    _key_env = "OPENAI_API_KEY"
    #: The model searches ``deferred`` tools itself (the API's hosted ``tool_search``).
    native_tool_search = True
    #: A streamed reply ends with the whole response, its tool search's items included.
    native_tool_search_streams = True

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
        store: bool | None = None,
        namespaces: bool = True,
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
        self.store = store
        self.namespaces = namespaces

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_model: type[BaseModel] | None,
        settings: ModelSettings | None,
        names: ToolNameMap,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "input": [i for m in messages for i in _items(m, names)]}
        if tools:
            body["tools"] = self._tools(tools, names)
        if response_model is not None:
            body["text"] = {"format": _text_format(response_model)}
        if settings is not None and settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings is not None and settings.max_tokens is not None:
            body["max_output_tokens"] = settings.max_tokens
        if self.store is not None:
            body["store"] = self.store
            if not self.store:
                body["include"] = ["reasoning.encrypted_content"]
        return body

    async def _send(self, body: dict[str, Any]) -> Any:
        return await self._client.responses.create(**body)

    async def _open_stream(self, body: dict[str, Any]) -> Any:
        return await self._client.responses.create(**body, stream=True)

    def _accumulator(self, names: ToolNameMap) -> _StreamAccumulator:
        return _StreamAccumulator(lambda reply: self._parse(reply, names), self._provider, self._model)

    def _tools(self, tools: Sequence[ToolSpec], names: ToolNameMap) -> list[dict[str, Any]]:
        """The tools in their order; deferred ones grouped by server, each group where its first tool was."""
        wire: list[dict[str, Any]] = []
        groups: dict[str, list[dict[str, Any]]] = {}
        taken = {names.to_provider(tool.name) for tool in tools}
        for tool in tools:
            function = self._function(tool, names)
            group = _namespace(tool.name, taken) if tool.deferred and self.namespaces else None
            if group is None:
                wire.append(function)
                continue
            if group not in groups:
                groups[group] = []
                wire.append({"type": "namespace", "name": group, "tools": groups[group]})
            groups[group].append(function)
        for item in wire:
            if item["type"] == "namespace":
                item["description"] = _namespace_description(item["name"], item["tools"])
        if any(tool.deferred for tool in tools):
            wire.insert(0, dict(_TOOL_SEARCH))
        return [_single_out(item) for item in wire]

    def _function(self, tool: ToolSpec, names: ToolNameMap) -> dict[str, Any]:
        wire: dict[str, Any] = {"type": "function", "name": names.to_provider(tool.name)}
        wire["description"] = tool.description
        strict = openai_strict_schema(tool.input_schema) if self.strict_tools else None
        wire["parameters"] = strict if strict is not None else object_schema(tool.input_schema)
        wire["strict"] = strict is not None
        if tool.deferred:
            wire["defer_loading"] = True
        return wire

    def _parse(self, reply: Any, names: ToolNameMap) -> LLMResponse:
        where = f"{self._provider}/{self._model}"
        output = getattr(reply, "output", None)
        if getattr(reply, "status", None) == "failed":
            error = getattr(reply, "error", None)
            what = f"{error.code}: {error.message}" if error is not None else "no reason given"
            raise LLMResponseError(
                f"{where} failed to reply ({self._excerpt(what)}).", provider=self._provider, model=self._model
            )
        if not isinstance(output, list):
            raise LLMResponseError(
                f"{where} sent a reply that cannot be read (no output items: {self._excerpt(str(reply))}).",
                provider=self._provider,
                model=self._model,
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        kept = False
        for item in output:
            kind = getattr(item, "type", None)
            if kind == "message":
                texts.extend(_message_text(item))
            elif kind == "function_call":
                calls.append(tool_call(item.call_id, item.name, item.arguments, names))
            kept = kept or kind not in _PLAIN_ITEMS or bool(getattr(item, "namespace", None))
        # Reasoning, a tool search, a namespaced call: the next request must carry the items back, in their place.
        provider_content = tuple(_dump(item) for item in output) if kept else ()
        message = AssistantMessage(
            content="".join(texts) or None,
            tool_calls=tuple(calls),
            provider_content=provider_content,
            provider_format=_FORMAT if provider_content else None,
        )
        return LLMResponse(
            message=message, usage=_usage(reply.usage), model=reply.model, stop_reason=_stop_reason(reply, calls)
        )


@dataclass
class _StreamAccumulator:
    """Passes text deltas on; the stream's last event (``response.completed``) carries the whole response."""

    parse: Callable[[Any], LLMResponse]
    provider: str
    model: str
    final: Any = None
    error: str | None = None

    def add(self, event: Any) -> str:
        """Fold one server-sent event in; return its text."""
        kind = getattr(event, "type", None)
        if kind in _TEXT_EVENTS:
            return str(event.delta or "")
        if kind in _FINAL_EVENTS:
            self.final = event.response
        elif kind == "error":
            self.error = f"{getattr(event, 'code', None) or 'error'}: {getattr(event, 'message', None)}"
        return ""

    def finish(self) -> LLMResponse:
        """The complete response once the stream has ended."""
        if self.final is None:
            why = f" ({self.error})" if self.error else ""
            raise LLMResponseError(
                f"{self.provider}/{self.model} ended the stream without a response{why}.",
                provider=self.provider,
                model=self.model,
            )
        return self.parse(self.final)


def _items(message: Message, names: ToolNameMap) -> list[dict[str, Any]]:
    if isinstance(message, SystemMessage | UserMessage):
        return [{"role": message.role, "content": message.content}]
    if isinstance(message, ToolResultMessage):
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content}]
    if message.provider_content and message.provider_format == _FORMAT:
        return [dict(item) for item in message.provider_content]
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        # An empty reply in the history is still a turn of the conversation: sent as empty text.
        items.append({"role": "assistant", "content": message.content or ""})
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": names.to_provider(call.name),
            "arguments": json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":")),
        }
        for call in message.tool_calls
    )
    return items


def _namespace(uri: str, taken: set[str]) -> str | None:
    """The namespace of a deferred tool: its scheme and server (``mcp://github.create_issue`` -> ``mcp_github``)."""
    scheme, sep, path = uri.partition("://")
    server, dot, _ = path.partition(".")
    if not sep or not dot or not server:
        return None
    name = provider_name(f"{scheme}://{server}")[:MAX_NAME_LENGTH]
    # A namespace must not carry the name of a function sent alongside it.
    return name if name not in taken else f"{name[: MAX_NAME_LENGTH - 3]}_ns"


def _namespace_description(name: str, functions: list[dict[str, Any]]) -> str:
    shown = [f["name"] for f in functions[:_NAMES_IN_DESCRIPTION]]
    more = len(functions) - len(shown)
    tail = f" and {more} more" if more > 0 else ""
    return f"{len(functions)} tools of {name}: {', '.join(shown)}{tail}."


def _single_out(item: dict[str, Any]) -> dict[str, Any]:
    """A namespace of one function is sent as that deferred function: a namespace would only add tokens."""
    if item["type"] == "namespace" and len(item["tools"]) == 1:
        return dict(item["tools"][0])
    return item


def _message_text(item: Any) -> list[str]:
    texts: list[str] = []
    for part in getattr(item, "content", None) or ():
        kind = getattr(part, "type", None)
        if kind == "output_text":
            texts.append(part.text)
        elif kind == "refusal":  # structured outputs: the refusal is the reply's text
            texts.append(part.refusal)
    return texts


def _dump(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(mode="json", exclude_none=True, by_alias=True)
    return dumped


def _stop_reason(reply: Any, calls: list[ToolCall]) -> str:
    if getattr(reply, "status", None) == "incomplete":
        details = getattr(reply, "incomplete_details", None)
        reason = getattr(details, "reason", None)
        return "max_tokens" if reason == "max_output_tokens" else str(reason or "incomplete")
    return "tool_calls" if calls else "stop"


def _text_format(response_model: type[BaseModel]) -> dict[str, Any]:
    schema = response_model.model_json_schema()
    strict = openai_strict_schema(schema)
    return {
        "type": "json_schema",
        "name": schema_name(response_model),
        "schema": strict or schema,
        "strict": strict is not None,
    }


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(requests=1)
    return Usage(input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0, requests=1)
