"""A real MCP server on the SDK's low-level ``Server`` API, over stdio: ``python -m tests.servers.mcp_listed``.

Everything it lists carries the fields a gateway must not drop: a title, annotations, icons and ``_meta`` on its
tool, resource, template and prompt; its prompt renders a resource link with a title and a size, and its resource
reads with ``_meta`` on the contents.
"""

from __future__ import annotations

from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

ICONS: Final = [types.Icon(src="https://example.com/icon.png", mime_type="image/png", sizes=["48x48"])]
META: Final = {"example.com/owner": "listing-tests"}
NOTE_URI: Final = "notes://first"


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    tool = types.Tool(
        name="lookup",
        title="Look it up",
        description="Echo the key.",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        icons=ICONS,
        _meta=META,
    )
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=str((params.arguments or {}).get("key")))])


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    resource = types.Resource(
        uri=NOTE_URI,
        name="first",
        title="The first note",
        mime_type="text/plain",
        size=5,
        annotations=types.Annotations(audience=["user"], priority=0.5),
        icons=ICONS,
        _meta=META,
    )
    return types.ListResourcesResult(resources=[resource])


async def list_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template="notes://{name}",
        name="note",
        title="A note",
        annotations=types.Annotations(audience=["assistant"]),
        icons=ICONS,
        _meta=META,
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
    contents = types.TextResourceContents(uri=str(params.uri), mime_type="text/plain", text="hello", _meta=META)
    return types.ReadResourceResult(contents=[contents])


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    argument = types.PromptArgument(name="topic", description="What about.", required=True)
    prompt = types.Prompt(name="brief", title="A brief", arguments=[argument], icons=ICONS, _meta=META)
    return types.ListPromptsResult(prompts=[prompt])


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
    link = types.ResourceLink(
        uri=NOTE_URI,
        name="first",
        title="The first note",
        size=5,
        mime_type="text/plain",
        annotations=types.Annotations(priority=1.0),
    )
    text = types.TextContent(text=f"Brief me on {(params.arguments or {}).get('topic')}.", _meta=META)
    messages = [types.PromptMessage(role="user", content=text), types.PromptMessage(role="user", content=link)]
    return types.GetPromptResult(description="A brief.", messages=messages, _meta=META)


def build_server() -> Server[Any]:
    return Server(
        "listed",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def main() -> None:
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
