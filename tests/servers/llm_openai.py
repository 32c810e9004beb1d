"""A fake OpenAI Chat Completions API on 127.0.0.1: builders for completions and streamed chunks."""

from __future__ import annotations

import json
from typing import Any

from tests.servers.llm_common import FakeProvider, SSEvent

__all__ = ["chunk", "completion", "fake_openai", "stream_events", "tool_call"]


def fake_openai() -> FakeProvider:
    """A fake serving ``POST /v1/chat/completions`` (use base URL ``<server>/v1``)."""
    return FakeProvider("/v1/chat/completions")


def tool_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """A tool call as Chat Completions sends it (arguments as a JSON string)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    model: str = "gpt-fake",
    usage: tuple[int, int] = (11, 7),
) -> dict[str, Any]:
    """A ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def chunk(
    delta: dict[str, Any] | None, *, finish_reason: str | None = None, usage: tuple[int, int] | None = None
) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``delta=None`` gives the final usage-only chunk."""
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-fake",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


def stream_events(chunks: list[dict[str, Any]]) -> list[SSEvent]:
    """The chunks as server-sent events, ending with ``data: [DONE]``."""
    return [*(SSEvent(c) for c in chunks), SSEvent("[DONE]")]
