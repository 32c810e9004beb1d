"""The kernel core: URIs, tool definitions, model building, validation and the FunctionKernel itself."""

from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._kernel import FunctionKernel
from kavalai.kernel._uri import ToolURI

__all__ = ["FunctionKernel", "ToolDefinition", "ToolURI"]
