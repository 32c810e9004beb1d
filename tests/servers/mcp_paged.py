"""A real MCP server on the SDK's low-level ``Server`` API, over stdio: ``python -m tests.servers.mcp_paged``.

It lists its tools three per page (so the client must follow ``nextCursor``), gives one tool a hand-written
input schema with everything the JSON Schema converter must keep, and answers calls with the arguments it
received (as structured content) or with every kind of content item.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

PAGE_SIZE = 3
TOOL_COUNT = 8

#: A schema with nesting, arrays, enum, const, oneOf, anyOf, nullable type lists, a recursive $ref, defaults,
#: descriptions, and keywords the converter does not support (which must not break discovery).
RICH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Arguments of the rich tool.",
    "properties": {
        "title": {"type": "string", "description": "The title.", "minLength": 1},
        "mode": {"enum": ["fast", "slow"], "default": "fast", "description": "How to run."},
        "version": {"const": 2},
        "limit": {"type": ["integer", "null"], "description": "At most this many."},
        "target": {
            "oneOf": [
                {"type": "string"},
                {"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]},
            ]
        },
        "tree": {"$ref": "#/$defs/Node"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "odd": {"not": {"type": "string"}, "if": {"type": "integer"}, "then": {"minimum": 1}},
    },
    "required": ["title"],
    "$defs": {
        "Node": {
            "type": "object",
            "description": "A tree node.",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["label"],
        }
    },
}


def _tools() -> list[types.Tool]:
    tools = [
        types.Tool(name="rich", description="Echo the arguments it received.", input_schema=RICH_SCHEMA),
        types.Tool(
            name="media",
            description="Return text, JSON text, audio, an embedded resource and a resource link.",
            input_schema={"type": "object", "properties": {}},
        ),
        types.Tool(
            name="bad name/with slash", description="A name no tool URI can hold.", input_schema={"type": "object"}
        ),
    ]
    tools += [
        types.Tool(name=f"tool{i}", description=f"Filler tool {i}.", input_schema={"type": "object"})
        for i in range(TOOL_COUNT - len(tools))
    ]
    return tools


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """Three tools per page; the cursor is the index of the next page's first tool."""
    start = int(params.cursor) if params is not None and params.cursor else 0
    tools = _tools()
    end = start + PAGE_SIZE
    return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    """``rich`` echoes its arguments as structured content; ``media`` returns every content kind; ``tool0``
    answers with a JSON-RPC error."""
    if params.name == "tool0":
        raise MCPError(code=types.INVALID_PARAMS, message="tool0 is out of order", data={"retry_after": 3})
    if params.name == "media":
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="plain words"),
                types.TextContent(type="text", text='{"n": 1}'),
                types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="hi"),
                ),
                types.ResourceLink(type="resource_link", uri="file:///big.bin", name="big"),
            ]
        )
    return types.CallToolResult(content=[], structured_content={"received": params.arguments or {}})


def build_server() -> Server[Any]:
    """The low-level server with the paginated listing and the two handlers."""
    return Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    """Serve over stdio until stdin closes."""
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
