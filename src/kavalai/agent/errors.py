"""The errors of agent runs: branches of :class:`~kavalai.llm.errors.LLMError` (the LLM clients' errors stay in
:mod:`kavalai.llm.errors`, which knows nothing of agents)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kavalai.llm.errors import LLMError

if TYPE_CHECKING:
    from kavalai.agent._result import AgentResult

__all__ = ["AgentError", "ApprovalHookError", "MaxStepsExceededError"]


class AgentError(LLMError):
    """An agent run could not finish."""


class MaxStepsExceededError(AgentError):
    """The model was still calling tools when the run reached ``max_steps`` model calls.

    Attributes:
        max_steps: the limit that was reached.
        result: what the run produced so far (messages, trace, usage); its ``output`` is the last text, or ``None``.
    """

    def __init__(self, message: str, *, max_steps: int, result: AgentResult[Any] | None = None) -> None:
        super().__init__(message)
        self.max_steps = max_steps
        self.result = result


class ApprovalHookError(AgentError):
    """The approval hook raised (or returned something that is not a decision) for one or more calls of a step.

    The other calls of that step still ran; their records are in ``result.trace``.

    Attributes:
        errors: what the hook raised, one per failing call, in call order.
        result: what the run produced so far, the completed calls of the failing step included.
    """

    def __init__(self, message: str, *, errors: list[BaseException], result: AgentResult[Any] | None = None) -> None:
        super().__init__(message)
        self.errors = errors
        self.result = result
