"""What an agent run returns: the output, the new messages, the trace of tool calls and the token usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from kavalai.llm.messages import Message, Usage

__all__ = ["AgentResult", "ToolCallRecord"]

OutputT = TypeVar("OutputT")


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call of a run, as it happened.

    Attributes:
        step: the step (1-based model call) whose reply asked for it.
        call_id: the provider's call id.
        uri: the tool's URI (or the unknown name the model used).
        arguments: the arguments the kernel received (after an approval hook's edit), or the model's if refused.
        status: ``"ok"``, ``"error"`` (the kernel raised) or ``"denied"`` (not allowed, or refused by approval).
        result: the tool's output as JSON-ready data (``model_dump(mode="json")``) when ``status == "ok"``.
        error: the message sent back to the model when the call failed or was refused.
        error_type: the exception class name behind ``error`` (``"ToolInputError"``, ...).
        duration: seconds from the start of the call (approval included) to its result.
        edited: whether an approval hook changed the arguments.
    """

    step: int
    call_id: str
    uri: str
    arguments: dict[str, Any]
    status: Literal["ok", "error", "denied"]
    result: Any = None
    error: str | None = None
    error_type: str | None = None
    duration: float = 0.0
    edited: bool = False

    @property
    def ok(self) -> bool:
        """Whether the tool ran and returned a valid result."""
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class AgentResult(Generic[OutputT]):
    """The outcome of :meth:`Agent.run`.

    Attributes:
        output: the final answer: the model's text, or an instance of the agent's ``output_type``.
        new_messages: the messages this run added (the prompt, the replies, the tool results); pass
            ``result.all_messages()`` as ``history`` to continue the conversation.
        history: the history the run started from.
        tool_calls: the trace of every tool call, in the order they were asked for.
        usage: the tokens of every model call of the run, added up.
        steps: how many model calls the run made.
    """

    output: OutputT
    new_messages: list[Message]
    history: list[Message] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0

    def all_messages(self) -> list[Message]:
        """The history followed by this run's messages (the system instructions are not included)."""
        return [*self.history, *self.new_messages]
