"""A real MCP server (the SDK's low-level ``Server``) whose prompt, resource and completion each answer with the
client capabilities the request told it (those of ``sampling``, ``elicitation`` and ``roots``, comma-separated): a
gateway fronting it tells it its host's, not its own (``tests/serve/test_asked_capabilities.py``).

Run it over stdio: ``python -m tests.servers.mcp_asked_capabilities``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

URI = "caps://asked"


def told(ctx: ServerRequestContext[Any]) -> str:
    """The capabilities the request said its client can be asked."""
    declared = ctx.session.client_capabilities or types.ClientCapabilities()
    return ",".join(name for name in ("sampling", "elicitation", "roots") if getattr(declared, name) is not None)


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[])


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="asked")])


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
    message = types.PromptMessage(role="user", content=types.TextContent(text=told(ctx)))
    return types.GetPromptResult(messages=[message])


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=URI, name="asked")])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=URI, text=told(ctx))])


async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[told(ctx) or "none"]))


def build_server() -> Server[Any]:
    """The server."""
    return Server(
        "asked",
        on_list_tools=list_tools,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_completion=complete,
    )


async def main() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
