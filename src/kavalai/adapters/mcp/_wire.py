"""The wire result of an MCP tool call (or listing, resource read, rendered prompt), kept for a caller that passes
it on unchanged (``kavalai serve``).

The kernel turns a ``tools/call`` result into the tool's output model: text parsed, images as typed models. A
gateway that fronts the server wants the result as the server sent it instead (every content block, its
annotations and ``_meta``, ``structuredContent`` beside them), while the call still crosses the kernel (its
validation, middleware, deadline and approval). The gateway opens :func:`keeping_wire_results` around the call;
the connection hands each result it receives to :func:`keep`, which records it only inside such a block, so no
other caller pays for it. The same block keeps the last listing of resources, templates and prompts, resource read,
rendered prompt and completion, under their method's name (``"resources/list"``, ``"prompts/get"``,
``"completion/complete"``), with every field the server sent (annotations, icons, ``_meta``, the server's
``serverInfo`` stamp), which the kernel's models leave out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["WireResults", "keep", "keeping_wire_results"]


class WireResults:
    """The wire results received inside one :func:`keeping_wire_results` block, by tool URI or method name (the last
    one each)."""

    __slots__ = ("_by_uri",)

    def __init__(self) -> None:
        self._by_uri: dict[str, Any] = {}

    def get(self, uri: str) -> Any:
        """The last result received for ``uri`` (a tool URI, or a method name) in the block, or ``None``."""
        return self._by_uri.get(uri)

    def put(self, uri: str, result: Any) -> None:
        """Record ``result`` as the last one of ``uri``."""
        self._by_uri[uri] = result


_kept: ContextVar[WireResults | None] = ContextVar("kavalai_mcp_wire_results", default=None)


@contextmanager
def keeping_wire_results() -> Iterator[WireResults]:
    """Within the block, the ``CallToolResult`` of each MCP tool call made from this context is kept, as received."""
    results = WireResults()
    token = _kept.set(results)
    try:
        yield results
    finally:
        _kept.reset(token)


def keep(uri: str, result: Any) -> None:
    """Record ``result`` of the call of ``uri`` when the calling context keeps wire results (else nothing)."""
    results = _kept.get()
    if results is not None:
        results.put(uri, result)
