"""Typed content items of MCP tool results, as kavalai models (so callers never need to import ``mcp``).

A tool without an ``outputSchema`` answers with content items. The kernel keeps text as text (parsed when it is
JSON) and turns every other item into one of these models, so nothing a server returns is dropped.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "McpAudioContent",
    "McpContent",
    "McpImageContent",
    "McpResourceContent",
    "McpResourceLink",
    "McpResult",
    "McpTextContent",
    "content_result_field",
]


class _Content(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)


class McpImageContent(_Content):
    """An image a tool returned: base64 ``data`` and its MIME type."""

    type: Literal["image"] = "image"
    data: str = Field(description="The image, base64-encoded.")
    mime_type: str = Field(alias="mimeType", description="The image's MIME type, e.g. image/png.")

    def decode(self) -> bytes:
        """The image's bytes."""
        return base64.b64decode(self.data)


class McpAudioContent(_Content):
    """Audio a tool returned: base64 ``data`` and its MIME type."""

    type: Literal["audio"] = "audio"
    data: str = Field(description="The audio, base64-encoded.")
    mime_type: str = Field(alias="mimeType", description="The audio's MIME type, e.g. audio/wav.")

    def decode(self) -> bytes:
        """The audio's bytes."""
        return base64.b64decode(self.data)


class McpResourceContent(_Content):
    """A resource's content (read with ``read_resource``, or embedded in a tool result or a prompt): its ``uri``
    and either ``text`` or base64 ``blob``."""

    type: Literal["resource"] = "resource"
    uri: str = Field(description="The resource's URI.")
    mime_type: str | None = Field(default=None, alias="mimeType", description="The resource's MIME type.")
    text: str | None = Field(default=None, description="The content, for a text resource.")
    blob: str | None = Field(default=None, description="The content base64-encoded, for a binary resource.")

    def decode(self) -> bytes:
        """The content's bytes: the blob decoded, or the text as UTF-8."""
        if self.blob is not None:
            return base64.b64decode(self.blob)
        return (self.text or "").encode()


class McpTextContent(_Content):
    """Text in a prompt message."""

    type: Literal["text"] = "text"
    text: str = Field(description="The text.")


class McpResourceLink(_Content):
    """A link to a resource the server can read, returned instead of its content."""

    type: Literal["resource_link"] = "resource_link"
    uri: str = Field(description="The resource's URI.")
    name: str = Field(description="The resource's name.")
    description: str | None = Field(default=None, description="What the resource is.")
    mime_type: str | None = Field(default=None, alias="mimeType", description="The resource's MIME type.")


#: One non-text content item of an MCP tool result.
McpContent: TypeAlias = Annotated[
    McpImageContent | McpAudioContent | McpResourceContent | McpResourceLink, Field(discriminator="type")
]

#: What ``result.result`` holds for an MCP tool without an ``outputSchema``: the structured content if the
#: server sent any; else the single item (text parsed as JSON when it is JSON, other items as typed content);
#: a list of them when there are several; ``None`` when there are none.
McpResult: TypeAlias = McpContent | list[McpContent | JsonValue] | JsonValue


def content_result_field() -> Any:
    """The ``result`` field definition of the output model of a tool without an ``outputSchema``."""
    return (
        McpResult,
        Field(description="The tool's structured content, or its text (parsed when JSON) and typed content items."),
    )
