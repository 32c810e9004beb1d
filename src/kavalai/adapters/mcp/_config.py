"""McpServer: the configuration of one MCP server (no I/O here, so importing it is cheap)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kavalai.kernel._uri import SERVER_NAME_PATTERN

__all__ = ["McpServer"]


class McpServer(BaseModel):
    """An MCP server, started as a process (``command``) or reached at a ``url``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=f"^{SERVER_NAME_PATTERN}$", description="The server name used in tool URIs.")
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    url: str | None = None
