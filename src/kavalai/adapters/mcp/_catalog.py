"""What an MCP server offers besides tools, as kavalai's own frozen models (no ``mcp`` import here, so callers and
type hints need none): resources, resource templates, prompts and their messages, completions."""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from kavalai.adapters.mcp._content import (
    McpAudioContent,
    McpImageContent,
    McpResourceContent,
    McpResourceLink,
    McpTextContent,
)

__all__ = [
    "McpCompletion",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptContent",
    "McpPromptMessage",
    "McpPromptResult",
    "McpResource",
    "McpResourceTemplate",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class McpResource(_Model):
    """A resource a server lists."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = Field(default=None, description="Its size in bytes, when the server says.")


class McpResourceTemplate(_Model):
    """A parameterised resource URI (RFC 6570), such as ``weather://{city}/today``."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class McpPromptArgument(_Model):
    """One argument of a prompt."""

    name: str
    description: str | None = None
    required: bool = False


class McpPrompt(_Model):
    """A prompt template a server offers."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


#: The content of one prompt message.
McpPromptContent: TypeAlias = McpTextContent | McpImageContent | McpAudioContent | McpResourceContent | McpResourceLink


class McpPromptMessage(_Model):
    """One message of a rendered prompt."""

    role: Literal["user", "assistant"]
    content: McpPromptContent


class McpPromptResult(_Model):
    """A prompt rendered with its arguments."""

    description: str | None = None
    messages: tuple[McpPromptMessage, ...] = ()


class McpCompletion(_Model):
    """Suggested values for an argument of a prompt or a resource template."""

    values: tuple[str, ...] = ()
    total: int | None = None
    has_more: bool = False
