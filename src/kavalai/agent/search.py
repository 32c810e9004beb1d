"""Tool search: with many tools, an agent offers a few and a ``search_tools`` tool that finds the others.

Past a few dozen tools, sending every definition costs thousands of tokens per request and models choose worse.
:class:`ToolSearch` ranks the agent's tools for a query with BM25 (the ``bm25s`` library, from the ``search`` extra)
over each tool's name, description and argument names and descriptions. The agent offers its core tools plus
``search_tools``; what a search finds is offered from the next step on, after the tools already offered, so the
start of the tool list (and a provider's prompt cache) stays the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = ["SEARCH_TOOLS", "ToolSearch"]

#: The name the model calls to search (handled by the agent, not the kernel).
SEARCH_TOOLS: Final = "search_tools"
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")


class ToolSearch:
    """A BM25 index over tool descriptions (as ``kernel.describe_tools()`` gives them).

    Args:
        descriptions: the tools to search.
        limit: the most tools one search returns.

    Raises:
        ImportError: ``bm25s`` is not installed (``pip install 'kavalai[search]'``).
    """

    def __init__(self, descriptions: Sequence[Mapping[str, Any]], *, limit: int = 5) -> None:
        try:
            import bm25s
        except ImportError as exc:  # pragma: no cover - the extra is installed in development
            raise ImportError("Tool search needs bm25s: pip install 'kavalai[search]'.") from exc
        self._bm25s = bm25s
        self.limit = limit
        self._tools = [dict(d) for d in descriptions]
        self._names = [str(d["name"]) for d in self._tools]
        self._index = bm25s.BM25()
        self._index.index(self._tokenize([_document(d) for d in self._tools]), show_progress=False)

    def search(self, query: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The best matches for ``query``, best first: ``{"name", "description"}`` each (nothing for no match)."""
        k = min(limit or self.limit, len(self._names))
        if k == 0 or not _words(query):
            return []
        found, scores = self._index.retrieve(self._tokenize([query]), k=k, show_progress=False)
        return [
            {"name": self._names[int(i)], "description": self._tools[int(i)].get("description") or ""}
            for i, score in zip(found[0], scores[0], strict=True)
            if score > 0
        ]

    def description(self, name: str) -> dict[str, Any]:
        """The full description of the tool ``name``."""
        return self._tools[self._names.index(name)]

    def spec(self) -> dict[str, Any]:
        """The description of the ``search_tools`` tool."""
        return {
            "name": SEARCH_TOOLS,
            "description": f"Find tools for a task among the {len(self._names)} available; the tools found can be "
            "called from the next step on. Search again with other words when nothing fits.",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What the tool should do, in words."}},
                "required": ["query"],
            },
        }

    def _tokenize(self, texts: Iterable[str]) -> Any:
        return self._bm25s.tokenize([" ".join(_words(text)) for text in texts], stopwords="en", show_progress=False)


def _words(text: str) -> list[str]:
    """Lower-case words, splitting URIs, snake_case and camelCase (``mcp://gh.createIssue`` -> gh create issue)."""
    return [word.lower() for word in _WORD.findall(text)]


def _document(description: Mapping[str, Any]) -> str:
    parts = [str(description.get("name", "")), str(description.get("description") or "")]
    schema = description.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            parts.append(str(name))
            if isinstance(prop, Mapping) and isinstance(prop.get("description"), str):
                parts.append(prop["description"])
    return " ".join(parts)
