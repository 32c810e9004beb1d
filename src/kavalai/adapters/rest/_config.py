"""RestServer: the configuration of one REST server (no I/O here, so importing it is cheap)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kavalai.kernel._uri import SERVER_NAME_PATTERN

__all__ = ["RestServer"]


class RestServer(BaseModel):
    """A REST server whose endpoints become ``rest://<name>.<tool>`` tools."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=f"^{SERVER_NAME_PATTERN}$", description="The server name used in tool URIs.")
    url: str = Field(description="The base URL of the server.")
