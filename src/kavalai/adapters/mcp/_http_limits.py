"""Byte limits on what an HTTP MCP server sends, under the SDK's transports.

The SDK reads a streamable-HTTP answer that comes as JSON whole (``response.aread()``), with no limit, and decodes a
compressed body before anything counts it. This transport sits under the SDK's ``httpx2`` client and bounds both:

- every request asks for an uncompressed answer (``Accept-Encoding: identity``), and a body that comes compressed
  anyway is refused before a byte is inflated;
- a body that is not an event stream is one message: it is refused as soon as it passes ``max_message_bytes``. The
  SDK turns the error into a JSON-RPC error answering the request that body answers, so that call fails at once
  with the limit in its message and the connection stays up.

Event streams are bounded per event by the SDK itself (``max_sse_event_size``, which the kernel sets to the same
limit for streamable HTTP; the legacy SSE client keeps the SDK's own 1 MiB per event).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import httpx2

__all__ = ["MessageTooLargeError", "bounded_transport"]


class MessageTooLargeError(httpx2.StreamError):
    """A server's message passed ``max_message_bytes``, or came compressed although asked not to be.

    A subclass of ``httpx2.StreamError`` because that is what the SDK catches while reading an answer, and turns
    into an error for the request it answers.
    """


def bounded_transport(server: str, limit: int, inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
    """``inner`` (the outbound gate's network transport) with every response of MCP server ``server`` bounded as
    the module says."""
    return _BoundedTransport(inner, server, limit)


class _BoundedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, server: str, limit: int) -> None:
        self._inner = inner
        self._server = server
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise MessageTooLargeError(
                f"MCP server {self._server!r} answered with a {encoding!r}-compressed body although asked for an "
                "uncompressed one; it is refused unread (a compressed body could inflate past max_message_bytes)."
            )
        if not response.headers.get("Content-Type", "").lower().startswith("text/event-stream"):
            response.stream = _BoundedStream(cast(httpx2.AsyncByteStream, response.stream), self._server, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, server: str, limit: int) -> None:
        self._inner = inner
        self._server = server
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise MessageTooLargeError(
                    f"a message from MCP server {self._server!r} is larger than {self._limit:,} bytes "
                    "(max_message_bytes of the McpServer; raise it if such messages are expected)"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
