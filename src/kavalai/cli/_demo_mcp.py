"""The demo's ``mcp://`` section: start the stdio MCP server that ships with kavalai and call its tools."""

from __future__ import annotations

from kavalai.cli._console import DemoConsole
from kavalai.errors import ToolExecutionError
from kavalai.kernel import FunctionKernel

__all__ = ["mcp_section"]


async def mcp_section(kernel: FunctionKernel, out: DemoConsole) -> None:
    """Register the demo MCP server, connect it, describe and call its tools, and show a tool's error.

    The server stays registered and connected, so later sections (the agent) can use ``mcp://demo.*``;
    ``kernel.close()`` stops it.
    """
    from kavalai.adapters.mcp.demo_server import demo_server_config

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
