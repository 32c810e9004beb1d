"""A fake OpenAI Responses API on 127.0.0.1: builders for responses, their output items and streamed events.

The shapes follow the ``openai`` SDK's types (``Response``, ``ResponseFunctionToolCall``,
``ResponseToolSearchCall``, ``ResponseToolSearchOutputItem``, ``ResponseStreamEvent``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.servers.llm_common import FakeProvider, SSEvent

__all__ = [
    "fake_responses",
    "function_call",
    "message",
    "reasoning",
    "response",
    "stream_events",
    "tool_search_call",
    "tool_search_output",
]


def fake_responses() -> FakeProvider:
    """A fake serving ``POST /v1/responses`` (use base URL ``<server>/v1``)."""
    return FakeProvider("/v1/responses")


def message(text: str, *, item_id: str = "msg_1") -> dict[str, Any]:
    """An assistant ``message`` output item with one ``output_text`` part."""
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [part]}


def function_call(
    call_id: str, name: str, arguments: dict[str, Any] | str, *, namespace: str | None = None
) -> dict[str, Any]:
    """A ``function_call`` output item (arguments as a JSON string)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": raw}
    if namespace is not None:
        item["namespace"] = namespace
    return {**item, "status": "completed"}


def reasoning(item_id: str = "rs_1", *, encrypted: str | None = None) -> dict[str, Any]:
    """A ``reasoning`` output item, with its encrypted content when the request asked for it."""
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def tool_search_call(query: str, *, item_id: str = "ts_1") -> dict[str, Any]:
    """The hosted tool search's call, as the server ran it."""
    return {
        "type": "tool_search_call",
        "id": item_id,
        "arguments": {"query": query},
        "execution": "server",
        "status": "completed",
    }


def tool_search_output(*tools: dict[str, Any], item_id: str = "tso_1") -> dict[str, Any]:
    """What the hosted tool search loaded: function tools or namespaces, as definitions."""
    return {
        "type": "tool_search_output",
        "id": item_id,
        "execution": "server",
        "status": "completed",
        "tools": list(tools),
    }


def response(
    *output: dict[str, Any],
    model: str = "gpt-fake",
    usage: tuple[int, int] = (11, 7),
    status: str = "completed",
    incomplete_reason: str | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ``response`` object."""
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1700000000,
        "model": model,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "total_tokens": sum(usage),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def stream_events(
    deltas: list[str], final: dict[str, Any] | None, *, final_type: str = "response.completed"
) -> list[SSEvent]:
    """A streamed response: ``response.created``, text deltas, then ``final`` (omitted when ``None``)."""
    created = {**(final or response()), "status": "in_progress", "output": []}
    events = [{"type": "response.created", "response": created}]
    events += [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
            "logprobs": [],
        }
        for delta in deltas
    ]
    if final is not None:
        events.append({"type": final_type, "response": final})
    return [SSEvent({**event, "sequence_number": n}, event=event["type"]) for n, event in enumerate(events)]
