"""What a ``tools/call`` tells the server about the call in its ``_meta``: its idempotency key and its deadline.

A durable run (``kavalai.durable``) gives each tool call a key that is the same in every attempt of its step, in
``call.metadata["idempotency_key"]``; a middleware of your own may set one too. The MCP adapter sends it as
``_meta["io.kavalai/idempotency-key"]`` (MCP reserves unprefixed ``_meta`` keys; this one is kavalai's), so a
server can tell a repeat from a new request.

A call with a deadline (its own timeout, or the remaining time of the agent run, code-mode snippet, workflow run or
call around it) sends the milliseconds it has left as ``_meta["io.kavalai/deadline"]`` (an integer, at least 0), so
a server can stop work nobody will wait for. ``kavalai serve`` honours it: the calls it makes for that request get
no more time than that, so a chain of gateways keeps one budget end to end.

Within :func:`calls_logging_at`, a call of a 2026-07-28 server asks for log messages from a level on, in
``_meta["io.modelcontextprotocol/logLevel"]``: ``kavalai serve`` passes on its host's level for the request so.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from kavalai.kernel import ToolCall, current_call, limit_seconds

__all__ = [
    "DEADLINE_META_KEY",
    "IDEMPOTENCY_META_KEY",
    "call_meta",
    "calls_log_level",
    "calls_logging_at",
    "deadline_from_meta",
    "meta_of",
]

IDEMPOTENCY_META_KEY: Final = "io.kavalai/idempotency-key"
DEADLINE_META_KEY: Final = "io.kavalai/deadline"


def call_meta() -> dict[str, Any] | None:
    """The ``_meta`` of the tool call running now: its idempotency key and remaining milliseconds, or ``None``."""
    return meta_of(current_call())


def meta_of(call: ToolCall | None) -> dict[str, Any] | None:
    """:func:`call_meta` of ``call`` (the caller has it already), or ``None`` for none."""
    if call is None:
        return None
    meta: dict[str, Any] = {}
    key = call.metadata.get("idempotency_key")
    if isinstance(key, str):
        meta[IDEMPOTENCY_META_KEY] = key
    left = call.remaining()
    if left is not None:
        meta[DEADLINE_META_KEY] = math.floor(left * 1000)
    return meta or None


def deadline_from_meta(meta: Any) -> float | None:
    """The seconds a client gave a request in ``_meta["io.kavalai/deadline"]``, or ``None`` when it gave none or
    something that is not a number (ignored with one log line rather than failing the request); under the one rule
    of :func:`kavalai.kernel.limit_seconds`: clamped to a year, a negative number is 0 (already passed)."""
    if not isinstance(meta, dict):
        return None
    return limit_seconds(meta.get(DEADLINE_META_KEY), what=f"_meta {DEADLINE_META_KEY}", wire=True, unit=0.001)


_calls_level: ContextVar[str | None] = ContextVar("kavalai_mcp_calls_log_level", default=None)


@contextmanager
def calls_logging_at(level: str | None) -> Iterator[None]:
    """Within the block, a tool call of a 2026-07-28 server asks for log messages from ``level`` on (or from the level
    set with ``set_log_level`` when that is more verbose): how a gateway passes on its host's per-request level.
    ``None``: as outside the block (an unknown level is ignored where the call is made)."""
    token = _calls_level.set(level)
    try:
        yield
    finally:
        _calls_level.reset(token)


def calls_log_level() -> str | None:
    """The level of the innermost :func:`calls_logging_at` block around this context, or ``None``."""
    return _calls_level.get()
