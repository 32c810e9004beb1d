"""The tools of :mod:`tests.servers.mcp_tools` served over HTTP: streamable HTTP at ``/mcp``, legacy SSE at ``/sse``.

Serve them on a free 127.0.0.1 port with :func:`tests.servers.uvicorn_server.serve`::

    with serve(streamable_http_app()) as base_url:
        McpServer(name="web", url=f"{base_url}/mcp")
"""

from __future__ import annotations

from starlette.applications import Starlette

from tests.servers.mcp_tools import build_server


def streamable_http_app() -> Starlette:
    """A streamable HTTP MCP endpoint at ``/mcp``."""
    return build_server("web").streamable_http_app()


def sse_app() -> Starlette:
    """A legacy SSE MCP endpoint: events at ``/sse``, messages posted to ``/messages/``."""
    return build_server("legacy").sse_app()
