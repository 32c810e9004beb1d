"""The kernel core: URIs, tool definitions, model building, validation and the FunctionKernel itself.

The names below load on first use, so that adapters can import the kernel's leaf modules (``_definition``,
``_uri``) without pulling in :class:`FunctionKernel`, which itself imports the adapters.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kavalai.kernel._definition import ToolDefinition
    from kavalai.kernel._kernel import FunctionKernel
    from kavalai.kernel._uri import ToolURI

__all__ = ["FunctionKernel", "ToolDefinition", "ToolURI"]

_HOMES = {
    "FunctionKernel": "kavalai.kernel._kernel",
    "ToolDefinition": "kavalai.kernel._definition",
    "ToolURI": "kavalai.kernel._uri",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kavalai.kernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
