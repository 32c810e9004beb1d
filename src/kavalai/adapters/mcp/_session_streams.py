"""The session's streams: the one layer between the SDK's client session and our transport's two streams.

Every message a session sends or reads on a connection crosses :class:`SessionStreams`, once, in one frame. What it
does there (each used to be a stream wrapper of its own, one frame each way):

- reading: the end of the transport's stream is reported (``on_end``), so the supervisor learns at once that the
  connection is gone, even with no call in flight; a 2025-11-25 ``CreateTaskResult`` is carried to the session as a
  ``CallToolResult`` (:func:`~kavalai.adapters.mcp._tasks.carry_task`); the answer to a ``server/discover`` probe
  settles its span (:class:`~kavalai.adapters.mcp._probe_spans.ProbeSpans`); the sender's context of an HTTP
  transport's message is passed on (``last_context``, as the SDK's dispatcher reads it);
- writing: a ``server/discover`` probe's span is noted; the ``initialize`` request offers a pinned handshake-era
  version (:func:`~kavalai.adapters.mcp._era.pinned_initialize`); a ``tools/call`` a gateway makes for a host tells
  a 2026-07-28 server that host's capabilities, and so does its ``prompts/get``, ``resources/read`` and
  ``completion/complete`` (:func:`~kavalai.adapters.mcp._asked.moved_into_place`);
- closing: the session's exit closes neither stream. The transport closes both when it shuts down itself; until
  then a message that comes late (the answer to a call that timed out, say) waits and is dropped with the
  transport, instead of hitting a closed stream, which the SDK's HTTP transports log as an error with a traceback
  ("Error parsing SSE message").

The bounds stay where they are enforced: the size of a message in the transport (stdio's reader, the HTTP limits),
secrets in the secret gate, a call's deadline and progress in the connection's ``tools/call``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Protocol, Self

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from kavalai.adapters.mcp._asked import moved_into_place
from kavalai.adapters.mcp._era import pinned_initialize
from kavalai.adapters.mcp._probe_spans import PROBE, ProbeSpans
from kavalai.adapters.mcp._tasks import carry_task

__all__ = ["SessionStreams"]

_REQUEST: Final = mcp_types.JSONRPCRequest
_RESPONSE: Final = mcp_types.JSONRPCResponse
_INITIALIZE: Final = "initialize"
_CALL: Final = "tools/call"
#: The requests a gateway forwards for a host besides ``tools/call``: each tells a 2026-07-28 server its host's
#: capabilities (:func:`~kavalai.adapters.mcp._asked.moved_into_place`).
_FORWARDED: Final = frozenset({"prompts/get", "resources/read", "completion/complete"})
_ENDED: Final = (anyio.EndOfStream, anyio.ClosedResourceError)


class _Receiver(Protocol):
    async def receive(self) -> Any: ...


class _Sender(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class SessionStreams:
    """The stream a session reads and the one it writes (both this object), over the transport's own; the SDK's
    client takes them as :attr:`transport`.

    Args:
        reads: the transport's stream of messages read from the server.
        writes: the transport's stream of messages to send to it.
        on_end: told when ``reads`` ends (the connection is gone).
        probes: the spans of ``server/discover`` probes in flight on this session.
        pinned: the handshake-era version ``initialize`` offers (``McpServer.protocol``), or ``None``.
    """

    __slots__ = ("_contextual", "_on_end", "_pinned", "_probes", "_reads", "_waiting", "_writes", "last_context")

    def __init__(
        self,
        reads: _Receiver,
        writes: _Sender,
        *,
        on_end: Callable[[], None],
        probes: ProbeSpans,
        pinned: str | None = None,
    ) -> None:
        self._reads = reads
        self._writes = writes
        self._on_end = on_end
        self._probes = probes
        self._waiting = probes.waiting  # the probes' answers awaited: one dict, read for every message
        self._pinned = pinned
        # The SDK's HTTP transports record each message's sender context on their stream; stdio's stream has none.
        self._contextual = hasattr(reads, "last_context")
        self.last_context: Any = None  # the sender's context of the last message read (read by the SDK's dispatcher)

    # -------------------------------------------------------------------------------------------- reading

    async def receive(self) -> Any:
        """The next message; at the end of the stream, report it and raise as the transport's stream does."""
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None

    def __aiter__(self) -> SessionStreams:
        return self

    async def __anext__(self) -> Any:
        """The next message, in one frame (the session reads with ``async for``); at the end of the stream, report it
        and stop."""
        try:
            item = await self._reads.receive()
        except _ENDED as exc:
            self._on_end()
            if isinstance(exc, anyio.EndOfStream):
                raise StopAsyncIteration from None
            raise
        if self._contextual:
            self.last_context = self._reads.last_context  # type: ignore[attr-defined]
        message = getattr(item, "message", None)
        if type(message) is not _RESPONSE or "task" in message.result:
            item = carry_task(item)
        if self._waiting:
            self._probes.received(item)
        return item

    # -------------------------------------------------------------------------------------------- writing

    async def send(self, item: SessionMessage, /) -> None:
        """Send ``item`` on the transport's stream (inside the SDK's span for it)."""
        message = item.message
        # by exact class first: isinstance() of a pydantic model class is an ABC check
        if type(message) is _REQUEST or (
            type(message) is not mcp_types.JSONRPCNotification and isinstance(message, _REQUEST)
        ):
            method = message.method
            if method == PROBE:
                self._probes.sent(message)
            elif method == _CALL or method in _FORWARDED:
                item = moved_into_place(item)  # a gateway's host's capabilities, when the request carries them
            elif method == _INITIALIZE and self._pinned is not None:
                item = pinned_initialize(item, self._pinned)
        await self._writes.send(item)

    # ---------------------------------------------------------------------------------------------- closing

    async def aclose(self) -> None:
        """Nothing: the transport closes its streams when it shuts down."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    @property
    def transport(self) -> _Opened:
        """These streams as the SDK's ``Transport``: an async context manager yielding the read and write stream."""
        return _Opened(self)


class _Opened:
    """:class:`SessionStreams`, already open, as the SDK's ``Transport``; the transport under them is entered and
    left by the generation's exit stack."""

    __slots__ = ("_streams",)

    def __init__(self, streams: SessionStreams) -> None:
        self._streams = streams

    async def __aenter__(self) -> tuple[SessionStreams, SessionStreams]:
        return self._streams, self._streams

    async def __aexit__(self, *exc: object) -> None:
        return None
