"""The span of the SDK's own ``server/discover`` probe, judged by its answer.

With ``protocol="auto"`` the SDK's client first sends ``server/discover``; a server written before the 2026-07-28
revision answers "method not found" and the handshake (``initialize``) follows. The SDK records that first answer
as an ERROR on its ``MCP send server/discover`` CLIENT span, so every connect to an older server showed an error in
the trace although nothing failed. The probe is sent on the session's write stream inside that span, so
:class:`ProbeSpans` notes the span there, and when the answer read back is "method not found" marks it OK (final
in OpenTelemetry: the SDK's later ERROR is ignored) with ``kavalai.mcp.probe`` saying why. The span itself, the
``initialize`` span after it and every other answer are left as the SDK records them.
"""

from __future__ import annotations

from typing import Any, Final, cast

import anyio
import mcp_types
from mcp.shared.message import SessionMessage
from opentelemetry import trace
from opentelemetry.trace import Span

from kavalai.adapters.mcp._tasks import LegacyTaskReads, carry_task
from kavalai.tracing import settle_ok

__all__ = ["ProbeReads", "ProbeSpans", "ProbeWrites"]

_PROBE: Final = "server/discover"
_OLDER: Final = "method not found: a server of the handshake era; initialize follows"


class ProbeSpans:
    """The SDK's spans of the ``server/discover`` requests in flight on one session, by request id."""

    def __init__(self) -> None:
        self._spans: dict[Any, Span] = {}

    def sent(self, item: SessionMessage) -> None:
        """A message is being sent, inside the SDK's span for it: keep the span of a probe."""
        message = item.message
        kind = type(message)  # by exact class first: isinstance() of a pydantic model class is an ABC check
        if kind is not mcp_types.JSONRPCRequest and (
            kind is mcp_types.JSONRPCNotification or not isinstance(message, mcp_types.JSONRPCRequest)
        ):
            return
        request = cast("mcp_types.JSONRPCRequest", message)
        if request.method == _PROBE:
            span = trace.get_current_span()
            if span.is_recording():
                self._spans[request.id] = span

    def received(self, item: Any) -> None:
        """A message was read: the answer to a probe settles its span."""
        if not self._spans:  # the common case: no probe in flight
            return
        message = getattr(item, "message", None)
        if not isinstance(message, mcp_types.JSONRPCError | mcp_types.JSONRPCResponse):
            return
        span = self._spans.pop(message.id, None)
        older = isinstance(message, mcp_types.JSONRPCError) and message.error.code == mcp_types.METHOD_NOT_FOUND
        if span is not None and older:
            settle_ok(span, {"kavalai.mcp.probe": _OLDER})


class ProbeReads(LegacyTaskReads):
    """The session's read stream (a created task carried as :class:`LegacyTaskReads` does), telling
    :class:`ProbeSpans` of each message."""

    def __init__(self, inner: Any, spans: ProbeSpans) -> None:
        super().__init__(inner)
        self._probes = spans

    async def receive(self) -> Any:
        """The next message, after its probe span (if it answers one) is settled."""
        item = carry_task(await self._inner.receive())  # LegacyTaskReads.receive, without its frame
        self._probes.received(item)
        return item

    async def __anext__(self) -> Any:
        """The next message as :meth:`receive` gives it (the session reads with ``async for``), in one frame."""
        try:
            item = carry_task(await self._inner.receive())
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        self._probes.received(item)
        return item


class ProbeWrites:
    """The session's write stream, telling :class:`ProbeSpans` of each message as it is sent."""

    def __init__(self, inner: Any, spans: ProbeSpans) -> None:
        self._inner = inner
        self._probes = spans

    async def send(self, item: SessionMessage, /) -> None:
        """Send ``item`` (inside the SDK's span for it)."""
        self._probes.sent(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> ProbeWrites:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
