"""A fake Anthropic Messages API on 127.0.0.1: builders for messages and their streamed events."""

from __future__ import annotations

from typing import Any

from tests.servers.llm_common import FakeProvider, SSEvent

__all__ = ["fake_anthropic", "message", "stream_events", "text_block", "tool_use_block"]


def fake_anthropic() -> FakeProvider:
    """A fake serving ``POST /v1/messages`` (use the server's root as base URL)."""
    return FakeProvider("/v1/messages")


def text_block(text: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": text}


def tool_use_block(block_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool_use content block."""
    return {"type": "tool_use", "id": block_id, "name": name, "input": arguments}


def message(
    *blocks: dict[str, Any],
    model: str = "claude-fake",
    usage: tuple[int, int] = (13, 5),
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """A ``message`` body."""
    has_tools = any(block["type"] == "tool_use" for block in blocks)
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(blocks),
        "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def stream_events(
    blocks: list[tuple[dict[str, Any], list[str]]], *, usage: tuple[int, int] = (13, 5), stop_reason: str = "end_turn"
) -> list[SSEvent]:
    """A streamed message: each block is (its start, its delta pieces: text, or partial JSON for tool_use)."""
    start = message(usage=(usage[0], 1), stop_reason=stop_reason)
    start["content"], start["stop_reason"] = [], None
    events = [
        SSEvent({"type": "message_start", "message": start}, "message_start"),
        SSEvent({"type": "ping"}, "ping"),  # the API sends these anywhere in a stream
    ]
    for index, (block, pieces) in enumerate(blocks):
        events.append(
            SSEvent({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")
        )
        for piece in pieces:
            if block["type"] == "text":
                delta = {"type": "text_delta", "text": piece}
            else:
                delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(
                SSEvent({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
            )
        events.append(SSEvent({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events.append(
        SSEvent(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        )
    )
    events.append(SSEvent({"type": "message_stop"}, "message_stop"))
    return events
