"""A real MCP server (the SDK's low-level ``Server``) whose prompt, resource and completion each answer with the
client capabilities the request told it (those of ``sampling``, ``elicitation`` and ``roots``, comma-separated): a
gateway fronting it tells it its host's, not its own (``tests/serve/test_asked_capabilities.py``). Its prompt
``needs_sampling`` refuses a client that did not declare sampling with -32021 (``MissingRequiredClientCapability``,
its data naming sampling), as a 2026-07-28 server must. Its tool ``counted`` reports progress 1 and 2 and answers
whether it was asked for progress (a progress token in its request); ``asked_then_counted`` asks a question in an
input-required round first, then does the same on the request carrying the answer; the prompt ``counted`` and the
resource ``caps://counted`` do as ``counted`` does.

Run it over stdio: ``python -m tests.servers.mcp_asked_capabilities``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

URI = "caps://asked"
COUNTED = "caps://counted"


def told(ctx: ServerRequestContext[Any]) -> str:
    """The capabilities the request said its client can be asked."""
    declared = ctx.session.client_capabilities or types.ClientCapabilities()
    return ",".join(name for name in ("sampling", "elicitation", "roots") if getattr(declared, name) is not None)


_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
_QUESTION: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"message": "Go on?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
}


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    names = ("counted", "asked_then_counted")
    return types.ListToolsResult(tools=[types.Tool(name=name, input_schema=_OBJECT) for name in names])


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    if params.name == "asked_then_counted" and not params.input_responses:
        await ctx.session.report_progress(5, 10, "before the question")
        return types.InputRequiredResult.model_validate({"inputRequests": {"go": _QUESTION}, "requestState": "asked"})
    return types.CallToolResult(content=[types.TextContent(text=await counted(ctx))])


async def counted(ctx: ServerRequestContext[Any]) -> str:
    """Report progress 1 and 2 of 2; whether the request asked for progress."""
    asked = (ctx.meta or {}).get("progress_token") is not None  # the SDK's RequestParamsMeta
    for step in (1, 2):
        await ctx.session.report_progress(step, 2, f"step {step}")
    return f"progress asked: {asked}"


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    names = ("asked", "needs_sampling", "counted")
    return types.ListPromptsResult(prompts=[types.Prompt(name=name) for name in names])


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
    if params.name == "needs_sampling" and "sampling" not in told(ctx):
        data = {"requiredCapabilities": {"sampling": {}}}
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, "the prompt needs sampling", data)
    text = await counted(ctx) if params.name == "counted" else told(ctx)
    message = types.PromptMessage(role="user", content=types.TextContent(text=text))
    return types.GetPromptResult(messages=[message])


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    resources = [types.Resource(uri=URI, name="asked"), types.Resource(uri=COUNTED, name="counted")]
    return types.ListResourcesResult(resources=resources)


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    if str(params.uri) == COUNTED:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=COUNTED, text=await counted(ctx))])
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=URI, text=told(ctx))])


async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[told(ctx) or "none"]))


def build_server() -> Server[Any]:
    """The server."""
    return Server(
        "asked",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
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
