"""The tools of :mod:`tests.servers.mcp_tools` served over HTTP: streamable HTTP at ``/mcp``, legacy SSE at ``/sse``.

Serve them on a free 127.0.0.1 port with :func:`tests.servers.uvicorn_server.serve`::

    with serve(streamable_http_app()) as base_url:
        McpServer(name="web", url=f"{base_url}/mcp")
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette

from tests.servers.mcp_tools import build_server


def streamable_http_app() -> Starlette:
    """A streamable HTTP MCP endpoint at ``/mcp``."""
    return build_server("web").streamable_http_app()


def sse_app() -> Starlette:
    """A legacy SSE MCP endpoint: events at ``/sse``, messages posted to ``/messages/``."""
    return build_server("legacy").sse_app()


class SessionForgettingApp:
    """An ASGI app in front of another that can forget the MCP sessions it has seen, as a restarted server (or one
    whose sessions timed out) does: requests that carry a forgotten ``mcp-session-id`` get HTTP 404 (or the
    ``status`` and ``message`` given, such as the TypeScript SDK examples' 400 "No valid session ID provided")."""

    def __init__(self, app: Any, status: int = 404, message: str = "Session not found") -> None:
        self.app = app
        self.status = status
        self.message = message
        self.seen: set[bytes] = set()
        self.forgotten: set[bytes] = set()

    def forget(self) -> None:
        """Forget every session seen so far."""
        self.forgotten |= self.seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer 404 for a forgotten session; pass everything else on."""
        session = dict(scope.get("headers", [])).get(b"mcp-session-id") if scope["type"] == "http" else None
        if session in self.forgotten:
            error = {"code": -32600, "message": self.message}
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": self.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if session is not None:
            self.seen.add(session)
        await self.app(scope, receive, send)
