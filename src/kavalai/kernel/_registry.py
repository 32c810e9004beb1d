"""The one registry of a kernel: every tool of every scheme, by URI.

Adapters publish their tools here and withdraw them here; they keep no second table of definitions, so what is
listed is exactly what is callable. Definitions are frozen: to change one, publish a new one with ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Iterator

from kavalai.errors import ToolRegistrationError
from kavalai.kernel._definition import ToolDefinition

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Tool definitions by URI string, in registration order."""

    __slots__ = ("_tools",)

    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}

    def add_tool(self, definition: ToolDefinition, *, replace: bool = False) -> None:
        """Publish ``definition``.

        Raises:
            ToolRegistrationError: its URI is taken and ``replace`` is false.
        """
        name = definition.name
        if not replace and name in self._tools:
            raise ToolRegistrationError(
                f"A tool is already registered at {name}. Choose another name, or pass replace=True to replace it.",
                uri=name,
            )
        self._tools[name] = definition

    def remove_tool(self, uri: str) -> ToolDefinition | None:
        """Withdraw the tool at ``uri`` and return it; ``None`` if there was none."""
        return self._tools.pop(str(uri), None)

    def get(self, uri: str) -> ToolDefinition | None:
        """The tool at ``uri``, or ``None``."""
        return self._tools.get(uri)

    def tools_of(self, scheme: str, server: str | None = None) -> list[ToolDefinition]:
        """The tools of one scheme (and of one server of it, when ``server`` is given), in registration order."""
        return [
            d for d in self._tools.values() if d.uri.scheme == scheme and (server is None or d.uri.server == server)
        ]

    def names(self) -> list[str]:
        """Every registered URI, in registration order."""
        return list(self._tools)

    def __contains__(self, uri: object) -> bool:
        return uri in self._tools

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<ToolRegistry of {len(self._tools)} tools>"
