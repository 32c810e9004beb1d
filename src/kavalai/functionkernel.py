"""Kaval.AI 1.0's module path for the kernel: ``from kavalai.functionkernel import FunctionKernel, pythontool``.

Kept so that code written for Kaval.AI runs unchanged; new code imports these names from :mod:`kavalai`.
"""

from __future__ import annotations

from kavalai.adapters.python import pythontool
from kavalai.compat import is_tool_allowed as _is_tool_allowed
from kavalai.errors import FunctionKernelException
from kavalai.function_kernel import FunctionKernel
from kavalai.kernel import ToolDefinition

__all__ = ["FunctionKernel", "FunctionKernelException", "ToolDefinition", "_is_tool_allowed", "pythontool"]
