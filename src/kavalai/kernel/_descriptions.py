"""What ``get_tool_descriptions()`` returns: the list of tool descriptions, readable in both published forms.

kavalai returns a list of dicts; Kaval.AI 1.0 returned the same list as JSON text, which its users ``json.loads``.
:class:`ToolDescriptions` is both, so code written for either keeps working unchanged: it *is* the JSON text (a
``str``, so ``json.loads(descriptions)`` and ``print(descriptions)`` behave as in Kaval.AI), and it *reads as* the
list (iteration, indexing, slicing, membership of a dict, comparison with a list, truthiness, ``list(descriptions)``).
Two things stay as a ``str`` has them, because ``json.loads`` relies on them: ``len()`` counts characters, and
``json.dumps`` writes it as one string. Count tools with ``len(descriptions.to_list())``, and call
:meth:`ToolDescriptions.to_list` (or ``describe_tools()`` on the kernel) where a real ``list`` is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, SupportsIndex, overload

__all__ = ["ToolDescriptions"]


class ToolDescriptions(str):
    """The tool descriptions: JSON text that also reads as the list of ``{"name", "description", "inputSchema",
    "outputSchema"}`` dicts it encodes."""

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

    def to_list(self) -> list[dict[str, Any]]:
        """The descriptions as a plain ``list`` (a new list; the dicts are shared)."""
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

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (self._items, self._qualifiers)


def _rebuild(items: list[dict[str, Any]], qualifiers: dict[str, str]) -> ToolDescriptions:
    return ToolDescriptions(items, qualifiers=qualifiers)
