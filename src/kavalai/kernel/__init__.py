"""The leaf kernel: URIs, tool definitions, the one registry, the adapter contract, ``call_tool``, middleware.

Nothing here knows HTTP, MCP, agents or workflows, and nothing here imports them: tool kinds are adapters plugged
in by scheme (:meth:`Kernel.add_adapter`), cross-cutting concerns are middleware around every call
(:meth:`Kernel.add_middleware`). :class:`kavalai.FunctionKernel` is :class:`Kernel` with the built-in kinds
(``python://``, ``rest://``, ``mcp://``) and the seed's registration methods.
"""

from __future__ import annotations

from kavalai.kernel._adapter import ToolAdapter
from kavalai.kernel._call import (
    CallNext,
    Deadline,
    Middleware,
    ProgressCallback,
    ToolCall,
    bind_current_call,
    current_call,
    current_deadline,
    deadline,
    deadline_paused,
)
from kavalai.kernel._coerce import coerce_output, convert_output, validate_input
from kavalai.kernel._core import Kernel
from kavalai.kernel._definition import FIELDS_CALL, Invoker, ToolDefinition
from kavalai.kernel._descriptions import ToolDescriptions
from kavalai.kernel._jsonschema import model_from_json_schema, output_model_from_json_schema, type_from_json_schema
from kavalai.kernel._registry import LazyTool, ToolRegistry
from kavalai.kernel._schema import FunctionSchema, code_of, function_schema, qualname, wrap_output_model
from kavalai.kernel._seconds import MAX_SECONDS, Seconds, limit_seconds, required_seconds
from kavalai.kernel._tasks import TaskStatus, ToolTask
from kavalai.kernel._uri import SCHEMES, SERVER_NAME_PATTERN, ToolURI, validate_server_name

__all__ = [
    "FIELDS_CALL",
    "MAX_SECONDS",
    "SCHEMES",
    "SERVER_NAME_PATTERN",
    "CallNext",
    "Deadline",
    "FunctionSchema",
    "Invoker",
    "Kernel",
    "LazyTool",
    "Middleware",
    "ProgressCallback",
    "Seconds",
    "TaskStatus",
    "ToolAdapter",
    "ToolCall",
    "ToolDefinition",
    "ToolDescriptions",
    "ToolRegistry",
    "ToolTask",
    "ToolURI",
    "bind_current_call",
    "code_of",
    "coerce_output",
    "convert_output",
    "current_call",
    "current_deadline",
    "deadline",
    "deadline_paused",
    "function_schema",
    "limit_seconds",
    "model_from_json_schema",
    "output_model_from_json_schema",
    "qualname",
    "required_seconds",
    "type_from_json_schema",
    "validate_input",
    "validate_server_name",
    "wrap_output_model",
]
