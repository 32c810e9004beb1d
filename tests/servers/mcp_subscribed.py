"""A real MCP server (the SDK's low-level ``Server``, over stdio, in the handshake era) that records every
``resources/subscribe`` and ``resources/unsubscribe`` it is sent: ``python -m tests.servers.mcp_subscribed LOG``.

Its tools: ``flood(count, size)`` sends ``count`` log messages of ``size`` characters during the call, then
answers ``flooded``; ``progress(count)`` sends ``count`` progress notifications as fast as its client takes them,
records ``sent progress COUNT`` and answers ``progressed COUNT``; ``ask_many(count)`` puts ``count`` elicitations
to its client at once during the call, and answers how many were accepted and refused (``accepted 8, refused 32:
<the first refusal's message>``).

It offers the resources ``notes://a`` to ``notes://e``; each subscription request is
appended to the file ``LOG`` as one line (``subscribe notes://a``, ``unsubscribe notes://a``), written before it is
answered, so the file says what the server was sent even after it has stopped. A subscription to ``notes://c`` is
recorded and never answered, and so is an unsubscription from ``notes://d``; an unsubscription from ``notes://e`` is
answered after :data:`SLOW` seconds (longer than the SDK's bound on a connection's teardown), and its answer is
recorded too (``answered unsubscribe notes://e``, written only if the request was not cancelled meanwhile).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

NOTES = ("notes://a", "notes://b", "notes://c", "notes://d", "notes://e")
#: The resource whose subscription the server records but never answers.
HANGING = "notes://c"
#: The resource whose unsubscription the server records but never answers.
HANGING_UNSUBSCRIBE = "notes://d"
#: The resource whose unsubscription the server answers after SLOW seconds.
SLOW_UNSUBSCRIBE = "notes://e"
SLOW = 6.5


async def ask_many(ctx: ServerRequestContext[Any], count: int, record: Callable[[str], None]) -> types.CallToolResult:
    """Put ``count`` elicitations to the client at once; how many were accepted and refused (each refusal recorded
    as it comes: ``refused elicitation``)."""
    accepted: list[str] = []
    refused: list[str] = []
    schema: types.ElicitRequestedSchema = {"type": "object", "properties": {"name": {"type": "string"}}}

    async def ask() -> None:
        try:
            answer = await ctx.session.elicit_form("Who are you?", schema, related_request_id=ctx.request_id)
        except MCPError as exc:
            refused.append(exc.error.message)
            record("refused elicitation")
            return
        accepted.append(answer.action)

    async with anyio.create_task_group() as tasks:
        for _ in range(count):
            tasks.start_soon(ask)
    first = refused[0] if refused else ""
    text = f"accepted {accepted.count('accept')}, refused {len(refused)}: {first}"
    return types.CallToolResult(content=[types.TextContent(text=text)])


def build_server(log: Path) -> Server[Any]:
    """The server, recording into ``log``."""

    def record(line: str) -> None:
        with log.open("a", encoding="utf-8") as file:
            file.write(line + "\n")

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"count": {"type": "integer"}, "size": {"type": "integer"}}}
        asks = {"type": "object", "properties": {"count": {"type": "integer"}}}
        tools = [
            types.Tool(name="flood", input_schema=schema),
            types.Tool(name="ask_many", input_schema=asks),
            types.Tool(name="progress", input_schema=asks),
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name == "ask_many":
            return await ask_many(ctx, int(arguments["count"]), record)
        if params.name == "progress":
            count = int(arguments["count"])
            for sent in range(1, count + 1):
                await ctx.session.report_progress(sent, count)
            record(f"sent progress {count}")
            return types.CallToolResult(content=[types.TextContent(text=f"progressed {count}")])
        for _ in range(int(arguments["count"])):
            await ctx.session.send_log_message("info", "x" * int(arguments["size"]), related_request_id=ctx.request_id)
        return types.CallToolResult(content=[types.TextContent(text="flooded")])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[types.Resource(uri=uri, name=uri.rsplit("/", 1)[-1], mime_type="text/plain") for uri in NOTES]
        )

    async def read(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="a note")])

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        record(f"subscribe {params.uri}")
        if params.uri == HANGING:  # recorded, never answered: a host may leave while it waits
            await anyio.sleep_forever()
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        record(f"unsubscribe {params.uri}")
        if params.uri == HANGING_UNSUBSCRIBE:  # recorded, never answered: the gateway must still end
            await anyio.sleep_forever()
        if params.uri == SLOW_UNSUBSCRIBE:  # answered late: the gateway must wait for it
            await anyio.sleep(SLOW)
            record(f"answered unsubscribe {params.uri}")
        return types.EmptyResult()

    return Server(
        "subscribed",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )


async def main(log: Path) -> None:
    """Serve over stdio until stdin closes."""
    server = build_server(log)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
