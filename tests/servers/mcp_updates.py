"""A real MCP server (the SDK's ``MCPServer``) whose tool ``touch`` says that a resource changed, for the change
streams of the 2026-07-28 era (``subscriptions/listen``) and the handshake's ``notifications/resources/updated``.

Run it over stdio: ``python -m tests.servers.mcp_updates``.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer


def build_server() -> MCPServer:
    """The server."""
    server = MCPServer("updates", log_level="WARNING")

    @server.resource("notes://{name}", name="note", description="A note.", mime_type="text/plain")
    def note(name: str) -> str:
        return f"note {name}"

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Say that the resource at ``uri`` changed, to every stream that listens for it."""
        await ctx.notify_resource_updated(uri)
        return "touched"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
