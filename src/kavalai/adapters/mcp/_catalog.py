"""What an MCP server offers besides tools (resources, templates, prompts, completions) and what it may ask of the
client (sampling, elicitation), as kavalai's own models: no ``mcp`` import here, so callers and type hints need none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from kavalai.adapters.mcp._content import (
    McpAudioContent,
    McpImageContent,
    McpResourceContent,
    McpResourceLink,
    McpTextContent,
)

__all__ = [
    "ChangeCallback",
    "ElicitationHandler",
    "McpChange",
    "McpCompletion",
    "McpElicitation",
    "McpElicitationResult",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptContent",
    "McpPromptMessage",
    "McpPromptResult",
    "McpResource",
    "McpResourceTemplate",
    "McpSamplingRequest",
    "SamplingApproval",
    "SamplingHandler",
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


@dataclass(frozen=True, slots=True)
class McpSamplingRequest:
    """A server's request for a model completion.

    Attributes:
        server: the server that asks.
        messages: the conversation, as ``(role, text)`` pairs (a non-text part is described in brackets).
        system_prompt: the system prompt it asks for, if any.
        max_tokens: the tokens it may have (already capped at the server's ``sampling_max_tokens``).
        temperature: the temperature it asks for, if any.
        stop_sequences: where generation should stop.
        model_hints: the model names it prefers, best first.
    """

    server: str
    messages: tuple[tuple[Literal["user", "assistant"], str], ...]
    system_prompt: str | None = None
    max_tokens: int = 0
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    model_hints: tuple[str, ...] = ()


#: Answers a sampling request with the reply's text, or ``None`` to refuse it. An ``LLMClient`` of
#: :mod:`kavalai.llm` may be given instead: it is asked with the request's messages and limits.
SamplingHandler: TypeAlias = Callable[[McpSamplingRequest], Awaitable["str | None"]]
#: Decides whether a sampling request may be answered at all (sync or async); ``False`` refuses it.
SamplingApproval: TypeAlias = Callable[[McpSamplingRequest], "bool | Awaitable[bool]"]


@dataclass(frozen=True, slots=True)
class McpElicitation:
    """A server's request for input from the user.

    Attributes:
        server: the server that asks.
        message: what it asks, for the user to read.
        mode: ``"form"`` (answer with values fitting ``schema``) or ``"url"`` (the user opens ``url``).
        schema: the JSON Schema of the values (form mode).
        url: the page to open (URL mode).
    """

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    schema: Mapping[str, Any] = field(default_factory=dict)
    url: str | None = None


@dataclass(frozen=True, slots=True)
class McpElicitationResult:
    """The user's answer: ``accept`` (with ``content`` in form mode), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


#: Answers an elicitation: the values (a mapping, meaning accept), ``None`` (decline), or a full
#: :class:`McpElicitationResult`.
ElicitationHandler: TypeAlias = Callable[[McpElicitation], Awaitable["Mapping[str, Any] | McpElicitationResult | None"]]


@dataclass(frozen=True, slots=True)
class McpChange:
    """A server's notice that something changed (given to ``McpServer(on_change=...)``), or the kernel's notice of
    what a reconnect changed or could not restore.

    Attributes:
        server: the server.
        kind: ``"tools"``, ``"resources"`` or ``"prompts"`` (the list changed; the kernel has already re-listed the
            tools), ``"resource"`` (a subscribed resource changed, or may have: read it again), ``"lost"`` (after a
            reconnect, something the caller had set up on the server could not be restored: ``uri`` names a
            resource subscription, or is ``None`` for the logging level; ``reason`` says why), or ``"restored"``
            (a subscription reported lost is in force again: the server accepted it at a later reconnect, or its
            event stream opened again; read the resource again, updates sent meanwhile are not replayed).
        uri: the resource's URI, for ``"resource"`` and a lost or restored subscription.
        added: after a reconnect, what the new listing has that the old one had not (tool or prompt names,
            resource URIs); empty on a server's own list-changed notice, which does not say.
        removed: after a reconnect, what the old listing had that the new one has not.
        changed: after a reconnect, what is in both listings but differs (a tool's schemas or description, a
            resource's or prompt's description or arguments).
        reason: for ``"lost"``, why it could not be restored; for ``"restored"``, how it was; for ``"resource"``,
            set when the kernel (not the server) says to read it again: it was subscribed again after a reconnect,
            or the event stream that carries the server's updates was down for a while, so updates sent meanwhile
            may be lost.
    """

    server: str
    kind: Literal["tools", "resources", "prompts", "resource", "lost", "restored"]
    uri: str | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    reason: str | None = None


#: Called with each :class:`McpChange`, sync or async; a callback that fails is logged, not raised.
ChangeCallback: TypeAlias = Callable[[McpChange], "Awaitable[None] | None"]


#: The levels of MCP's log messages (RFC 5424's), least severe first.
McpLogLevel: TypeAlias = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


@dataclass(frozen=True, slots=True)
class McpLogMessage:
    """A log message of a server (``notifications/message``), given to ``McpServer(log_handler=...)``.

    Attributes:
        server: the server.
        level: its level.
        logger: the name the server gave its logger, if any.
        data: what it logged (text, or JSON data), with the server's configured secrets masked.
    """

    server: str
    level: McpLogLevel
    logger: str | None
    data: Any


#: Called with each :class:`McpLogMessage`, sync or async; a handler that fails is logged, not raised.
LogHandler: TypeAlias = Callable[[McpLogMessage], "Awaitable[None] | None"]
