"""kavalai: a typed tool kernel for LLM agents and workflows.

Python functions, REST endpoints and MCP servers are hosted behind one calling convention and addressed by URI
(``python://fs.ls``, ``rest://server.tool``, ``mcp://server.tool``); every argument and return value crosses a
Pydantic model::

    from kavalai import FunctionKernel, pythontool

    @pythontool
    def add(a: int, b: int) -> int:
        return a + b

    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", add)
    result = await kernel.call_tool("python://math.add", arguments={"a": 1, "b": "2"})
    assert result.result == 3
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from kavalai.errors import (
    AlreadyAnsweredError,
    AuthenticationError,
    ConfigurationError,
    DeadlineExceededError,
    DefinitionChangedError,
    DurableRunError,
    FunctionKernelException,
    HTTPStatusError,
    InvalidToolURIError,
    JsonRpcError,
    KernelClosedError,
    OutboundRefusedError,
    OutcomeUnknownError,
    ResponseTooLargeError,
    RunCancelledError,
    RunInterruptedError,
    ServerConnectionError,
    ToolAccessDeniedError,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolOutputError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from kavalai.secrets import get_logger as _get_logger

# A library logs; the application decides where it goes (and without a handler nothing reaches stderr).
_get_logger("kavalai").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from kavalai.adapters.mcp import (
        McpAudioContent,
        McpImageContent,
        McpResourceContent,
        McpResourceLink,
        McpServer,
        McpServerState,
    )
    from kavalai.adapters.python import pythontool
    from kavalai.adapters.rest import ApiKeyAuth, BasicAuth, BearerAuth, RestServer
    from kavalai.agent import Agent, AgentResult, Approval, ToolCallRecord
    from kavalai.agent.errors import AgentError, MaxStepsExceededError
    from kavalai.function_kernel import FunctionKernel
    from kavalai.kernel import ToolDefinition, ToolURI
    from kavalai.llm import LLMClient, make_client
    from kavalai.llm.errors import (
        LLMConfigurationError,
        LLMConnectionError,
        LLMError,
        LLMProviderError,
        LLMResponseError,
        StructuredOutputError,
    )
    from kavalai.workflow import RunResult, RunStatus, Workflow, WorkflowBuilder, WorkflowEngine
    from kavalai.workflow.errors import WorkflowError

# Names imported on first use, so that `import kavalai` costs almost nothing: pydantic, anyio and the kernel
# load when the first of them is touched (module __getattr__, PEP 562).
_LAZY: dict[str, str] = {
    "Agent": "kavalai.agent",
    "AgentError": "kavalai.agent.errors",
    "AgentResult": "kavalai.agent",
    "Approval": "kavalai.agent",
    "LLMClient": "kavalai.llm",
    "LLMConfigurationError": "kavalai.llm.errors",
    "LLMConnectionError": "kavalai.llm.errors",
    "LLMError": "kavalai.llm.errors",
    "LLMProviderError": "kavalai.llm.errors",
    "LLMResponseError": "kavalai.llm.errors",
    "MaxStepsExceededError": "kavalai.agent.errors",
    "StructuredOutputError": "kavalai.llm.errors",
    "ToolCallRecord": "kavalai.agent",
    "make_client": "kavalai.llm",
    "McpServerState": "kavalai.adapters.mcp",
    "McpImageContent": "kavalai.adapters.mcp",
    "McpAudioContent": "kavalai.adapters.mcp",
    "McpResourceContent": "kavalai.adapters.mcp",
    "McpResourceLink": "kavalai.adapters.mcp",
    "ApiKeyAuth": "kavalai.adapters.rest",
    "BasicAuth": "kavalai.adapters.rest",
    "BearerAuth": "kavalai.adapters.rest",
    "WorkflowEngine": "kavalai.workflow",
    "WorkflowBuilder": "kavalai.workflow",
    "Workflow": "kavalai.workflow",
    "RunResult": "kavalai.workflow",
    "RunStatus": "kavalai.workflow",
    "WorkflowError": "kavalai.workflow.errors",
    "FunctionKernel": "kavalai.function_kernel",
    "McpServer": "kavalai.adapters.mcp",
    "RestServer": "kavalai.adapters.rest",
    "ToolDefinition": "kavalai.kernel",
    "ToolURI": "kavalai.kernel",
    "pythontool": "kavalai.adapters.python",
}


# Subpackages reachable as attributes without an import of their own: `kavalai.tools.fs.register(kernel, ...)`.
_SUBPACKAGES = frozenset({"agent", "llm", "testing", "tools", "workflow"})


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"kavalai.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kavalai' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentError",
    "AgentResult",
    "AlreadyAnsweredError",
    "ApiKeyAuth",
    "Approval",
    "AuthenticationError",
    "BasicAuth",
    "BearerAuth",
    "ConfigurationError",
    "DeadlineExceededError",
    "DefinitionChangedError",
    "DurableRunError",
    "FunctionKernel",
    "FunctionKernelException",
    "HTTPStatusError",
    "InvalidToolURIError",
    "JsonRpcError",
    "KernelClosedError",
    "LLMClient",
    "LLMConfigurationError",
    "LLMConnectionError",
    "LLMError",
    "LLMProviderError",
    "LLMResponseError",
    "MaxStepsExceededError",
    "McpAudioContent",
    "McpImageContent",
    "McpResourceContent",
    "McpResourceLink",
    "McpServer",
    "McpServerState",
    "OutboundRefusedError",
    "OutcomeUnknownError",
    "ResponseTooLargeError",
    "RestServer",
    "RunCancelledError",
    "RunInterruptedError",
    "RunResult",
    "RunStatus",
    "ServerConnectionError",
    "StructuredOutputError",
    "ToolAccessDeniedError",
    "ToolCallRecord",
    "ToolDefinition",
    "ToolExecutionError",
    "ToolInputError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolRegistrationError",
    "ToolTimeoutError",
    "ToolURI",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowEngine",
    "WorkflowError",
    "__version__",
    "make_client",
    "pythontool",
]
