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

from kavalai.adapters.mcp import McpServer
from kavalai.adapters.python import pythontool
from kavalai.adapters.rest import RestServer
from kavalai.errors import (
    ConfigurationError,
    FunctionKernelException,
    HTTPStatusError,
    InvalidToolURIError,
    ServerConnectionError,
    ToolAccessDeniedError,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolOutputError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from kavalai.kernel import FunctionKernel, ToolDefinition, ToolURI

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "FunctionKernel",
    "FunctionKernelException",
    "HTTPStatusError",
    "InvalidToolURIError",
    "McpServer",
    "RestServer",
    "ServerConnectionError",
    "ToolAccessDeniedError",
    "ToolDefinition",
    "ToolExecutionError",
    "ToolInputError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolRegistrationError",
    "ToolTimeoutError",
    "ToolURI",
    "__version__",
    "pythontool",
]
