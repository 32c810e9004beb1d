"""The HTTP transports of the SDK (streamable HTTP and legacy SSE), opened from an :class:`McpServer`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from kavalai.adapters.mcp._config import McpServer
from kavalai.errors import ConfigurationError

__all__ = ["open_http"]

# A server may stay silent on its event stream for a long time; per-call timeouts are the kernel's job.
_SSE_READ_TIMEOUT: Final = 24 * 3600.0


@asynccontextmanager
async def open_http(server: McpServer) -> AsyncIterator[Any]:
    """Open the session streams of an HTTP server: streamable HTTP, or SSE for ``transport="sse"``."""
    if server.url is None:
        raise ConfigurationError(f"MCP server {server.name!r} has no url to connect to.")
    if server.kind == "sse":
        async with sse_client(
            server.url,
            headers=dict(server.headers),
            timeout=server.connect_timeout,
            sse_read_timeout=_SSE_READ_TIMEOUT,
        ) as streams:
            yield streams
        return
    timeout = httpx2.Timeout(server.connect_timeout, read=None)
    async with (
        httpx2.AsyncClient(headers=dict(server.headers), timeout=timeout) as client,
        streamable_http_client(server.url, http_client=client) as streams,
    ):
        yield streams
