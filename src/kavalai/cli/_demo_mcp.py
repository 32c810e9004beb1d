"""The demo's ``mcp://`` section: start the stdio MCP server that ships with kavalai and call its tools."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from kavalai import FunctionKernel
from kavalai.cli._console import DemoConsole
from kavalai.errors import ToolExecutionError

__all__ = ["mcp_section"]


@contextlib.asynccontextmanager
async def mcp_section(kernel: FunctionKernel, out: DemoConsole) -> AsyncIterator[list[str]]:
    """Register the demo MCP server as ``demo``, connect it, describe and call its tools, show a tool's error.

    Yields the ``mcp://`` URIs; the server stays connected while the block runs, so later sections (an agent, a
    workflow) can call the same tools. Leaving the block stops the server.
    """
    from kavalai.demo.mcp_server import demo_server_config

    out.heading("mcp:// tools (a stdio MCP server shipped with kavalai)")
    kernel.register_mcp_server(demo_server_config())
    await kernel.connect_mcp_servers()
    state = kernel.get_mcp_server_state("demo")
    out.line(f"server {state.name!r}: {state.status} over {state.transport}, {len(state.tools)} tools")
    for description in await kernel.get_tool_descriptions(["mcp://demo.*"]):
        params = ", ".join(description["inputSchema"].get("properties", {}))
        out.line(f"{description['name']}({params}): {description['description'].splitlines()[0]}")
    out.line()
    text = "Typed tools make agents dependable"
    out.show("text_stats (structured output)", await kernel.call_tool("mcp://demo.text_stats", {"text": text}))
    out.show("slugify (text output)", await kernel.call_tool("mcp://demo.slugify", {"text": text}))
    result = await kernel.call_tool("mcp://demo.to_fahrenheit", {"celsius": "21.5"})
    out.show("to_fahrenheit('21.5')", result)
    try:
        await kernel.call_tool("mcp://demo.to_fahrenheit", {"celsius": -300})
    except ToolExecutionError as exc:
        out.line(f"caught {type(exc).__name__}: {exc}")
    try:
        yield list(state.tools)
    finally:
        await kernel.close_mcp_servers()
