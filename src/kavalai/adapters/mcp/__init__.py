"""``mcp://`` tools: MCP servers over stdio, streamable HTTP or SSE.

Only the configuration, the state snapshot and the content models are imported here; the adapter (and with it
the ``mcp`` SDK) loads when the first server is registered.
"""

from typing import TYPE_CHECKING

from kavalai.adapters.mcp._answering import (
    CALLER,
    INPUT_KEY,
    INPUT_ROUND,
    InputRound,
    answering,
    asking_together,
    current_answerer,
)
from kavalai.adapters.mcp._asked import asking_of
from kavalai.adapters.mcp._catalog import (
    ChangeCallback,
    ElicitationHandler,
    LogHandler,
    McpChange,
    McpCompletion,
    McpElicitation,
    McpElicitationResult,
    McpLogLevel,
    McpLogMessage,
    McpPrompt,
    McpPromptArgument,
    McpPromptContent,
    McpPromptMessage,
    McpPromptResult,
    McpResource,
    McpResourceTemplate,
    McpSamplingRequest,
    SamplingApproval,
    SamplingHandler,
)
from kavalai.adapters.mcp._config import McpServer, McpTransport
from kavalai.adapters.mcp._content import (
    McpAudioContent,
    McpContent,
    McpImageContent,
    McpResourceContent,
    McpResourceLink,
    McpResult,
    McpTextContent,
)
from kavalai.adapters.mcp._escalation import on_server_task
from kavalai.adapters.mcp._idempotency import (
    DEADLINE_META_KEY,
    IDEMPOTENCY_META_KEY,
    calls_logging_at,
    deadline_from_meta,
)
from kavalai.adapters.mcp._nested import relaying_progress
from kavalai.adapters.mcp._state import McpServerState, McpStatus
from kavalai.adapters.mcp._wire import WireResults, keeping_wire_results

__all__ = [
    "CALLER",
    "DEADLINE_META_KEY",
    "IDEMPOTENCY_META_KEY",
    "INPUT_KEY",
    "INPUT_ROUND",
    "ChangeCallback",
    "ElicitationHandler",
    "InputRound",
    "LogHandler",
    "McpAdapter",
    "McpAudioContent",
    "McpChange",
    "McpCompletion",
    "McpContent",
    "McpElicitation",
    "McpElicitationResult",
    "McpImageContent",
    "McpLogLevel",
    "McpLogMessage",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptContent",
    "McpPromptMessage",
    "McpPromptResult",
    "McpResource",
    "McpResourceContent",
    "McpResourceLink",
    "McpResourceTemplate",
    "McpResult",
    "McpSamplingRequest",
    "McpServer",
    "McpServerState",
    "McpStatus",
    "McpTextContent",
    "McpTransport",
    "SamplingApproval",
    "SamplingHandler",
    "WireResults",
    "answering",
    "asking_of",
    "asking_together",
    "calls_logging_at",
    "current_answerer",
    "deadline_from_meta",
    "keeping_wire_results",
    "kill_stdio_servers_now",
    "on_server_task",
    "relaying_progress",
]


if TYPE_CHECKING:
    from kavalai.adapters.mcp._adapter import McpAdapter
    from kavalai.adapters.mcp._reaper import kill_now as kill_stdio_servers_now


def __getattr__(name: str) -> object:
    # The adapter imports its heavy dependencies: loaded when the kernel first needs it.
    if name == "kill_stdio_servers_now":
        from kavalai.adapters.mcp._reaper import kill_now

        return kill_now
    if name == "McpAdapter":
        from kavalai.adapters.mcp._adapter import McpAdapter

        return McpAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
