"""``mcp://`` tools: MCP servers over stdio, streamable HTTP or SSE.

Only the configuration, the state snapshot and the content models are imported here; the adapter (and with it
the ``mcp`` SDK) loads when the first server is registered.
"""

from kavalai.adapters.mcp._config import McpServer, McpTransport
from kavalai.adapters.mcp._content import (
    McpAudioContent,
    McpContent,
    McpImageContent,
    McpResourceContent,
    McpResourceLink,
    McpResult,
)
from kavalai.adapters.mcp._state import McpServerState, McpStatus

__all__ = [
    "McpAudioContent",
    "McpContent",
    "McpImageContent",
    "McpResourceContent",
    "McpResourceLink",
    "McpResult",
    "McpServer",
    "McpServerState",
    "McpStatus",
    "McpTransport",
]
