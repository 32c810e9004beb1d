"""Provider-neutral conversation types: messages, tool calls, tool specifications, usage, responses, stream events.

Tool names here are always kernel URIs (``python://fs.ls``); each provider client maps them to the names its API
accepts and back (see :mod:`kavalai.llm.names`), so agents, scripts and traces never see provider names.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "AssistantMessage",
    "LLMResponse",
    "Message",
    "ResponseDone",
    "StreamEvent",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "parse_messages",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class ToolCall(BaseModel):
    """A model's request to call one tool.

    Attributes:
        id: the provider's call id; a tool result answers it with the same id.
        name: the tool's kernel URI, e.g. ``"python://fs.ls"`` (or, for a tool the model made up, what it sent).
        arguments: the decoded JSON arguments.
        arguments_error: set when the provider sent arguments that are not a JSON object; ``arguments`` is then
            empty and the agent tells the model to resend them.
    """

    model_config = _FROZEN

    id: str = Field(default_factory=_new_call_id)
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None


class SystemMessage(BaseModel):
    """Instructions for the model."""

    model_config = _FROZEN

    role: Literal["system"] = "system"
    content: str


class UserMessage(BaseModel):
    """A message from the user (or from the agent speaking for the user, e.g. a repair request)."""

    model_config = _FROZEN

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(BaseModel):
    """A reply of the model: text, tool calls, or both."""

    model_config = _FROZEN

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    #: The reply's content as the provider sent it, kept when it holds what only that provider reads back (the
    #: blocks of its own tool search, reasoning items): sent back as it is to that provider, ignored by others.
    provider_content: tuple[dict[str, Any], ...] = ()
    #: Whose format ``provider_content`` is in: ``"anthropic"`` (Messages blocks) or ``"openai-responses"``
    #: (Responses items); ``None`` in conversations stored before the field existed, which only Anthropic's
    #: client wrote.
    provider_format: str | None = None


class ToolResultMessage(BaseModel):
    """The result of one tool call, sent back to the model.

    Attributes:
        tool_call_id: the id of the :class:`ToolCall` this answers.
        name: the tool's URI.
        content: the result as JSON text, or an error message.
        is_error: whether ``content`` describes a failure.
    """

    model_config = _FROZEN

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


#: Any message of a conversation; ``role`` tells them apart (also when validating plain dicts).
Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]


@functools.cache
def _message_list() -> TypeAdapter[list[Message]]:
    return TypeAdapter(list[Message])


def parse_messages(data: Sequence[Mapping[str, Any] | Message]) -> list[Message]:
    """Validate messages from JSON-like data (e.g. a stored conversation): ``[{"role": "user", "content": ...}]``."""
    return _message_list().validate_python(list(data))


class ToolSpec(BaseModel):
    """A tool as offered to a model.

    Attributes:
        name: the tool's kernel URI.
        description: what the tool does.
        input_schema: the JSON schema of its arguments, as the kernel describes it.
    """

    model_config = _FROZEN

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    #: Left for the provider's own tool search to find (a client whose ``native_tool_search`` is true); other
    #: clients offer it like any tool.
    deferred: bool = False

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> ToolSpec:
        """Build a spec from one entry of :meth:`FunctionKernel.get_tool_descriptions`."""
        return cls(
            name=description["name"],
            description=description.get("description") or "",
            input_schema=description.get("inputSchema") or {"type": "object", "properties": {}},
        )


class Usage(BaseModel):
    """Tokens used by one or more model calls; ``+`` adds them up."""

    model_config = _FROZEN

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
        )


class LLMResponse(BaseModel):
    """What one model call returned.

    Attributes:
        message: the assistant message (text and/or tool calls, tool names as URIs).
        usage: the tokens this call used.
        model: the model that answered, as the provider reports it.
        stop_reason: why generation stopped (``"stop"``, ``"tool_calls"``, ``"end_turn"``, ``"max_tokens"``, ...).
        parsed: with a ``response_model`` and a reply without tool calls, the validated instance.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    message: AssistantMessage
    usage: Usage = Usage()
    model: str | None = None
    stop_reason: str | None = None
    parsed: Any = None

    @property
    def text(self) -> str:
        """The reply's text, ``""`` when there is none."""
        return self.message.content or ""

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of the reply."""
        return self.message.tool_calls


class TextDelta(BaseModel):
    """A piece of streamed text."""

    model_config = _FROZEN

    type: Literal["text_delta"] = "text_delta"
    text: str


class ResponseDone(BaseModel):
    """The last event of a stream: the complete response, as :meth:`LLMClient.complete` would return it."""

    model_config = ConfigDict(frozen=True)

    type: Literal["response_done"] = "response_done"
    response: LLMResponse


#: What :meth:`LLMClient.stream` yields: text deltas, then exactly one :class:`ResponseDone`.
StreamEvent = TextDelta | ResponseDone
