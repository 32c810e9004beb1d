"""What ``get_tool_descriptions()`` returns: Kaval.AI 1.0's JSON text of the tool descriptions, with the list at hand.

Kaval.AI 1.0 returned a ``str``: the JSON text of a list of ``{"name", "description", "inputSchema",
"outputSchema"}`` dicts, which its agents put in a prompt as it is and its users ``json.loads``. kavalai keeps that
type, so that code runs unchanged: :class:`ToolDescriptions` *is* that JSON text, a ``str`` in every way a function
taking a ``str`` can tell (``print``, f-strings, Jinja templates, ``json.loads``, ``len()`` counting characters, and
``json.dumps`` writing it as one JSON string, as it would any text).

The list itself is :attr:`ToolDescriptions.tools` (a plain ``list``; ``describe_tools()`` on the kernel returns one
too, without building the text). For convenience the text also reads as that list where a ``str`` has nothing
meaningful to say: iterating it, indexing it and ``list(...)`` give the dicts, ``==`` compares with a list, and it is
false when there are no tools. Anything that needs a real list (``len``, ``json.dumps`` into a request body, list
methods) takes ``.tools``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, SupportsIndex, overload

__all__ = ["ToolDescriptions"]


class ToolDescriptions(str):
    """The tool descriptions as JSON text (a ``str``, as Kaval.AI 1.0 returned them), with the list of
    ``{"name", "description", "inputSchema", "outputSchema"}`` dicts at :attr:`tools`; iterating or indexing the
    text gives those dicts too (see the module docstring)."""

    _items: list[dict[str, Any]]
    _qualifiers: dict[str, str]

    def __new__(cls, items: list[dict[str, Any]], *, qualifiers: Mapping[str, str] | None = None) -> ToolDescriptions:
        """``qualifiers``: by tool name, a qualifier the JSON text appends as Kaval.AI 1.0 did (``"... [GET]"``)."""
        shown = items
        if qualifiers:
            shown = [
                {**item, "name": f"{item['name']} [{qualifiers[item['name']]}]"} if item["name"] in qualifiers else item
                for item in items
            ]
        text = super().__new__(cls, json.dumps(shown, ensure_ascii=False))
        text._items = items
        text._qualifiers = dict(qualifiers or {})
        return text

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The descriptions as a plain ``list`` of dicts (a new list each time; the dicts are shared):
        ``len(descriptions.tools)`` counts the tools, ``json.dumps(descriptions.tools)`` encodes them once."""
        return list(self._items)

    def to_list(self) -> list[dict[str, Any]]:
        """The same as :attr:`tools`."""
        return list(self._items)

    def __iter__(self) -> Iterator[dict[str, Any]]:  # type: ignore[override]
        return iter(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    @overload  # type: ignore[override]
    def __getitem__(self, index: SupportsIndex) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._items[index]

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return str.__contains__(self, item)  # Kaval.AI code searches the JSON text
        return item in self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return self._items == other
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__

    def __repr__(self) -> str:  # says what it is: a REPL user would otherwise take it for a list
        return f"ToolDescriptions({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (self._items, self._qualifiers)


def _rebuild(items: list[dict[str, Any]], qualifiers: dict[str, str]) -> ToolDescriptions:
    return ToolDescriptions(items, qualifiers=qualifiers)
