"""Events an agent reports while it runs, for observers (``Agent(on_event=...)``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from kavalai.adapters.mcp import McpElicitation
from kavalai.agent._result import AgentResult, ToolCallRecord
from kavalai.llm.messages import LLMResponse, ToolCall

__all__ = [
    "AgentEvent",
    "EventHandler",
    "InputRequested",
    "ModelResponded",
    "ModelTextDelta",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StepStarted",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolProgress",
]


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began; ``tools`` are the URIs offered to the model for the whole run."""

    prompt: str
    tools: list[str]
    type: Literal["run_started"] = "run_started"


@dataclass(frozen=True, slots=True)
class StepStarted:
    """The model is about to be called for step ``step`` (1-based)."""

    step: int
    type: Literal["step_started"] = "step_started"


@dataclass(frozen=True, slots=True)
class ModelTextDelta:
    """A piece of the model's text, when the agent streams (``Agent(stream=True)``)."""

    step: int
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ModelResponded:
    """The model replied in step ``step``."""

    step: int
    response: LLMResponse
    type: Literal["model_responded"] = "model_responded"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call is about to run (before approval)."""

    step: int
    call: ToolCall
    type: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call finished, failed or was refused; ``record`` is its trace entry."""

    step: int
    record: ToolCallRecord
    type: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool call reported how far it is (an MCP server's progress notifications, a Python tool's
    ``current_call().report_progress``): ``progress`` of ``total`` (when known), with an optional message."""

    step: int
    call: ToolCall
    progress: float
    total: float | None
    message: str | None
    type: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True)
class InputRequested:
    """An MCP server asked the user for input during a tool call (``Agent(on_elicitation=...)`` answers it)."""

    request: McpElicitation
    type: Literal["input_requested"] = "input_requested"


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run produced its final answer."""

    result: AgentResult[Any]
    type: Literal["run_finished"] = "run_finished"


@dataclass(frozen=True, slots=True)
class RunFailed:
    """The run ended with an exception (``run()`` raises it next); ``result`` is what it produced until then."""

    error: Exception
    result: AgentResult[Any]
    type: Literal["run_failed"] = "run_failed"


#: Everything an observer may receive.
AgentEvent: TypeAlias = (
    RunStarted
    | StepStarted
    | ModelTextDelta
    | ModelResponded
    | ToolCallStarted
    | ToolCallFinished
    | ToolProgress
    | InputRequested
    | RunFinished
    | RunFailed
)

#: An observer: a function of one event, sync or async. Exceptions it raises end the run.
EventHandler: TypeAlias = Callable[[AgentEvent], Awaitable[None] | None]
