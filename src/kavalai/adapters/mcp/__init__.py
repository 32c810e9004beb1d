"""``mcp://`` tools. Only the configuration is imported here; the adapter (and the mcp SDK) loads on first use."""

from kavalai.adapters.mcp._config import McpServer

__all__ = ["McpServer"]
