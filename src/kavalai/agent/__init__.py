"""The tool-calling agent: :class:`Agent`, its :class:`AgentResult`, events for observers and approval hooks."""

from kavalai.agent._agent import Agent
from kavalai.agent._approval import Approval, ApprovalHook, OutsideApproval
from kavalai.agent._events import (
    AgentEvent,
    EventHandler,
    InputRequested,
    ModelResponded,
    ModelTextDelta,
    RunFailed,
    RunFinished,
    RunStarted,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from kavalai.agent._result import AgentResult, ToolCallRecord
from kavalai.agent.budget import ArtifactStore, FileArtifactStore, MemoryArtifactStore, OutputBudget, artifact_scope
from kavalai.agent.elicitation import OutsideElicitation
from kavalai.agent.errors import AgentError, ApprovalHookError, MaxStepsExceededError

__all__ = [
    "Agent",
    "AgentError",
    "AgentEvent",
    "AgentResult",
    "Approval",
    "ApprovalHook",
    "ApprovalHookError",
    "ArtifactStore",
    "EventHandler",
    "FileArtifactStore",
    "InputRequested",
    "MaxStepsExceededError",
    "MemoryArtifactStore",
    "ModelResponded",
    "ModelTextDelta",
    "OutputBudget",
    "OutsideApproval",
    "OutsideElicitation",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StepStarted",
    "ToolCallFinished",
    "ToolCallRecord",
    "ToolCallStarted",
    "ToolProgress",
    "artifact_scope",
]
