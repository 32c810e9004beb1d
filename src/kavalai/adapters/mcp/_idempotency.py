"""The idempotency key of a ``tools/call``, in the request's ``_meta``.

A durable run (``kavalai.durable``) gives each tool call a key that is the same in every attempt of its step, in
``call.metadata["idempotency_key"]``; a middleware of your own may set one too. The MCP adapter sends it as
``_meta["io.kavalai/idempotency-key"]`` (MCP reserves unprefixed ``_meta`` keys; this one is kavalai's), so a
server can tell a repeat from a new request.
"""

from __future__ import annotations

from typing import Any, Final

from kavalai.kernel import current_call

__all__ = ["IDEMPOTENCY_META_KEY", "call_meta"]

IDEMPOTENCY_META_KEY: Final = "io.kavalai/idempotency-key"


def call_meta() -> dict[str, Any] | None:
    """The ``_meta`` of the tool call running now: its idempotency key, or ``None`` when it has none."""
    call = current_call()
    key = call.metadata.get("idempotency_key") if call is not None else None
    return {IDEMPOTENCY_META_KEY: key} if isinstance(key, str) else None
