"""A real MCP server (the SDK's ``MCPServer``) whose tools answer with every kind of content block: image, audio,
an embedded resource, a resource link, mixed lists with annotations and ``_meta``, structured content beside
content, and an ``isError`` result with an image in it.

Run it over stdio: ``python -m tests.servers.mcp_content``.
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    Annotations,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

from tests.servers.mcp_tools import PIXEL_PNG

PIXEL = base64.b64encode(PIXEL_PNG).decode()
#: A few bytes standing for a WAV file.
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()


def image() -> ImageContent:
    return ImageContent(data=PIXEL, mime_type="image/png", annotations=Annotations(audience=["user"], priority=0.5))


def audio() -> AudioContent:
    return AudioContent(data=WAV, mime_type="audio/wav")


def embedded() -> EmbeddedResource:
    contents = TextResourceContents(uri="test://embedded", mime_type="text/plain", text="an embedded text")
    return EmbeddedResource(resource=contents)


def link() -> ResourceLink:
    return ResourceLink(uri="test://linked", name="linked", mime_type="text/plain", description="a linked resource")


class Stats(BaseModel):
    """What stats returns: an object, declared as the tool's outputSchema."""

    words: int
    lines: int


def build_server(name: str = "content") -> MCPServer:
    """The server."""
    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def picture() -> CallToolResult:
        """An image."""
        return CallToolResult(content=[image()])

    @server.tool()
    def sound() -> CallToolResult:
        """Audio."""
        return CallToolResult(content=[audio()])

    @server.tool()
    def document() -> CallToolResult:
        """An embedded resource."""
        return CallToolResult(content=[embedded()])

    @server.tool()
    def pointer() -> CallToolResult:
        """A resource link."""
        return CallToolResult(content=[link()])

    @server.tool()
    def mixed() -> CallToolResult:
        """Text, an image, audio, an embedded resource and a link, in that order, with _meta on the text."""
        text = TextContent(text='{"looks": "like JSON"}', _meta={"example.com/mark": 1})
        return CallToolResult(content=[text, image(), audio(), embedded(), link()])

    @server.tool()
    def both() -> CallToolResult:
        """Structured content beside an image and a text."""
        content = [TextContent(text="two pictures"), image()]
        return CallToolResult(content=content, structured_content={"count": 2, "kind": "png"})

    @server.tool()
    def stats(text: str) -> Stats:
        """Count words and lines (an outputSchema, and structured content)."""
        return Stats(words=len(text.split()), lines=len(text.splitlines()))

    @server.tool()
    def broken() -> CallToolResult:
        """An error result with an image of what went wrong."""
        return CallToolResult(content=[TextContent(text="it broke"), image()], is_error=True)

    return server


if __name__ == "__main__":
    build_server().run("stdio")
