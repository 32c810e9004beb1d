"""An MCP server (the SDK's ``MCPServer``, over stdio) in front of a shop (``tests.servers.effects_app``) at the URL
in ``SHOP_URL``: ``charge`` (no annotations: it may not repeat) and ``settle`` (``idempotentHint``) each post a
charge of their order to the shop, with no idempotency key, so the shop counts every call:
``python -m tests.servers.mcp_shop``."""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from tests.servers.effects_app import post_charge


def build_server() -> MCPServer:
    """The server with its two tools."""
    server = MCPServer("shop", log_level="WARNING")

    @server.tool()
    def charge(order: str) -> dict[str, Any]:
        """Charge an order (each call a new charge)."""
        return post_charge(os.environ["SHOP_URL"], order)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=True))
    def settle(order: str) -> dict[str, Any]:
        """Settle an order (the server says a repeat has the effect of one call)."""
        return post_charge(os.environ["SHOP_URL"], order)

    return server


if __name__ == "__main__":
    build_server().run("stdio")
