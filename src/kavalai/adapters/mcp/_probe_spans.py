"""The span of the SDK's own ``server/discover`` probe, judged by its answer.

With ``protocol="auto"`` the SDK's client first sends ``server/discover``; a server written before the 2026-07-28
revision answers "method not found" and the handshake (``initialize``) follows. The SDK records that first answer
as an ERROR on its ``MCP send server/discover`` CLIENT span, so every connect to an older server showed an error in
the trace although nothing failed. The probe is sent on the session's write stream inside that span, so
:class:`ProbeSpans` notes the span there (told by the session's streams, :mod:`._session_streams`), and when the
answer read back is "method not found" marks it OK (final in OpenTelemetry: the SDK's later ERROR is ignored) with
``kavalai.mcp.probe`` saying why. The span itself, the ``initialize`` span after it and every other answer are left
as the SDK records them.
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types
from opentelemetry import trace
from opentelemetry.trace import Span

from kavalai.tracing import settle_ok

__all__ = ["PROBE", "ProbeSpans"]

PROBE: Final = "server/discover"
_OLDER: Final = "method not found: a server of the handshake era; initialize follows"


class ProbeSpans:
    """The SDK's spans of the ``server/discover`` requests in flight on one session, by request id (told of each
    message by the session's streams, :class:`~kavalai.adapters.mcp._session_streams.SessionStreams`)."""

    def __init__(self) -> None:
        #: The spans of the probes whose answers are awaited, by request id (empty: no message read needs a look).
        self.waiting: dict[Any, Span] = {}

    def sent(self, request: mcp_types.JSONRPCRequest) -> None:
        """A probe is being sent, inside the SDK's span for it: keep the span."""
        span = trace.get_current_span()
        if span.is_recording():
            self.waiting[request.id] = span

    def received(self, item: Any) -> None:
        """A message was read: the answer to a probe settles its span."""
        if not self.waiting:  # the common case: no probe in flight
            return
        message = getattr(item, "message", None)
        if not isinstance(message, mcp_types.JSONRPCError | mcp_types.JSONRPCResponse):
            return
        span = self.waiting.pop(message.id, None)
        older = isinstance(message, mcp_types.JSONRPCError) and message.error.code == mcp_types.METHOD_NOT_FOUND
        if span is not None and older:
            settle_ok(span, {"kavalai.mcp.probe": _OLDER})
