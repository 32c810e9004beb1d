"""An MCP server (the SDK's ``MCPServer``, over stdio) whose ``charge`` tool answers with the idempotency key the
request carried in ``_meta`` ("" when none): ``python -m tests.servers.mcp_idempotent``."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

KEY = "io.kavalai/idempotency-key"


def build_server() -> MCPServer:
    """The server with its one tool."""
    server = MCPServer("pay", log_level="WARNING")

    @server.tool()
    def charge(order: str, ctx: Context) -> str:
        """Charge an order; returns the idempotency key of the request."""
        meta = ctx.request_context.meta
        if meta is None:
            return ""
        found = meta.get(KEY) if isinstance(meta, dict) else getattr(meta, "model_extra", {}).get(KEY)
        return str(found or "")

    return server


if __name__ == "__main__":
    build_server().run("stdio")
