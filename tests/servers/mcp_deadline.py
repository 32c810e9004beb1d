"""An MCP server (the SDK's ``MCPServer``, over stdio) that records the ``io.kavalai/deadline`` each call carried
in ``_meta``: ``python -m tests.servers.mcp_deadline``.

Tools: ``echo(text)`` answers at once; ``sleep(seconds)`` sleeps (a call to cut); ``seen()`` lists the deadlines
(milliseconds, or ``None`` for a call that carried none) of the ``sleep`` and ``echo`` calls so far, oldest first.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

KEY = "io.kavalai/deadline"
_seen: list[int | None] = []


def _deadline(ctx: Context) -> int | None:
    meta: Any = ctx.request_context.meta
    if meta is None:
        return None
    found = meta.get(KEY) if isinstance(meta, dict) else (getattr(meta, "model_extra", None) or {}).get(KEY)
    return found if isinstance(found, int) else None


def build_server() -> MCPServer:
    """The server with its three tools."""
    server = MCPServer("deadline", log_level="WARNING")

    @server.tool()
    def echo(text: str, ctx: Context) -> str:
        """Return the text."""
        _seen.append(_deadline(ctx))
        return text

    @server.tool()
    async def sleep(seconds: float, ctx: Context) -> str:
        """Sleep, then say so."""
        _seen.append(_deadline(ctx))
        await anyio.sleep(seconds)
        return "slept"

    @server.tool()
    def seen() -> list[int | None]:
        """The deadlines the calls so far carried, oldest first."""
        return list(_seen)

    return server


if __name__ == "__main__":
    build_server().run("stdio")
