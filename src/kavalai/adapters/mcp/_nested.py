"""Progress of the MCP calls a tool makes while it runs, for a caller that follows the tool on someone's behalf
(``kavalai serve``: a Python tool called by a host that asked for progress, and calling MCP tools itself).

A call made with a progress callback of its own (``kernel.call_tool(..., progress=...)``) reports to it, and a call
made with none asks its server for no progress. A gateway's host that asked for progress of a Python tool would then
see none of the MCP calls the tool makes: the tool does not know of the host, and should not have to. The gateway
opens :func:`relaying_progress` around the host's call; an MCP call made within it without a callback of its own
asks its server for progress and hands it to the block's callback (:func:`relayed_progress`), which decides what
reaches the host. Outside such a block nothing changes, so no other caller pays for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["relayed_progress", "relaying_progress"]

_relayed: ContextVar[Any] = ContextVar("kavalai_mcp_relayed_progress", default=None)


@contextmanager
def relaying_progress(callback: Any) -> Iterator[None]:
    """Within the block, an MCP tool call made from this context without a progress callback of its own sends its
    server's progress to ``callback(progress, total, message)`` (async); ``None``: none is asked (as outside)."""
    token = _relayed.set(callback)
    try:
        yield
    finally:
        _relayed.reset(token)


def relayed_progress() -> Any:
    """The callback of the enclosing :func:`relaying_progress` block, or ``None``."""
    return _relayed.get()
