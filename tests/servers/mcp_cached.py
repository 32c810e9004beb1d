"""A real MCP server (the SDK's low-level ``Server``, over stdio) whose tool listing carries a cache hint:
``CACHED_TTL_MS=400 python -m tests.servers.mcp_cached``.

Every ``tools/list`` it answers lists one tool more than the one before (``t1``; then ``t1``, ``t2``; ...),
with ``ttlMs`` set to ``CACHED_TTL_MS`` (0 or unset: no hint), and it never sends ``list_changed``: a client sees
the new tools only when it lists again. ``listings`` answers how many listings the server has answered so far.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

_listed = [0]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """``listings`` and one more ``tN`` than last time, kept for the hinted time."""
    _listed[0] += 1
    tools = [types.Tool(name="listings", description="How many listings so far.", input_schema={"type": "object"})]
    tools += [
        types.Tool(name=f"t{n}", description=f"Tool {n}.", input_schema={"type": "object"})
        for n in range(1, _listed[0] + 1)
    ]
    return types.ListToolsResult(tools=tools, ttl_ms=int(os.environ.get("CACHED_TTL_MS", "0")))


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    """``listings``: the count, as structured content; ``tN``: its name."""
    value: Any = _listed[0] if params.name == "listings" else params.name
    return types.CallToolResult(content=[], structured_content={"result": value})


async def main() -> None:
    """Serve over stdio until stdin closes."""
    server = Server("cached", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
