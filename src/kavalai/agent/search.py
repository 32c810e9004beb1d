"""Tool search: with many tools, an agent offers a few and a ``search_tools`` tool that finds the others.

Past a few dozen tools, sending every definition costs thousands of tokens per request and models choose worse.
:class:`ToolSearch` ranks the agent's tools for a query with BM25 (the ``bm25s`` library, from the ``search`` extra)
over each tool's name, description and argument names and descriptions; given an embedder
(:mod:`kavalai.agent.embeddings`), it also ranks them by the cosine of their embeddings and fuses the two rankings
(reciprocal rank fusion), so a query finds a tool whose description says the same thing in other words. The agent
offers its core tools plus ``search_tools``; what a search finds is offered from the next step on, after the tools
already offered, so the start of the tool list (and a provider's prompt cache) stays the same.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from kavalai.agent.embeddings import Embedder

__all__ = ["SEARCH_TOOLS", "ToolSearch"]

#: The name the model calls to search (handled by the agent, not the kernel).
SEARCH_TOOLS: Final = "search_tools"
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_RRF_K: Final = 60  # reciprocal rank fusion's damping constant, as in Cormack et al. (2009)
# The embedding ranking's weight in the fusion: it rescues queries whose words no tool shares, while BM25 stays in
# charge where it matches (on bench/tool_search.py's 50 tasks over 494 tools, recall@5: 0.96 at 1.0, 0.98 at 0.5).
_SEMANTIC_WEIGHT: Final = 0.5
_CACHE_LIMIT: Final = 50_000  # tool documents' vectors kept per embedder (a catalog is embedded once, not per run)
_vectors: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


class ToolSearch:
    """A BM25 index over tool descriptions (as ``kernel.describe_tools()`` gives them).

    Args:
        descriptions: the tools to search.
        limit: the most tools one search returns.
        embedder: also rank by meaning, with this embedder (see :mod:`kavalai.agent.embeddings`;
            :func:`~kavalai.agent.embeddings.local_embedder` needs no download). Tool documents' vectors are cached
            per embedder, so a catalog is embedded once per process.

    Raises:
        ImportError: ``bm25s`` is not installed (``pip install 'kavalai[search]'``).
        ValueError: the embedder did not return one vector per text.
    """

    def __init__(
        self, descriptions: Sequence[Mapping[str, Any]], *, limit: int = 5, embedder: Embedder | None = None
    ) -> None:
        try:
            import bm25s
        except ImportError as exc:  # pragma: no cover - the extra is installed in development
            raise ImportError("Tool search needs bm25s: pip install 'kavalai[search]'.") from exc
        self._bm25s = bm25s
        self.limit = limit
        self._tools = [dict(d) for d in descriptions]
        self._names = [str(d["name"]) for d in self._tools]
        documents = [_document(d) for d in self._tools]
        self._index = bm25s.BM25()
        self._index.index(self._tokenize(documents), show_progress=False)
        self._embedder = embedder
        if embedder is None or not documents:
            self._matrix = None
        else:  # the name and description only: argument names blur what a tool does (recall@5 0.76 -> 0.92)
            self._matrix = _document_vectors(embedder, [_summary(d) for d in self._tools])

    def search(self, query: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The best matches for ``query``, best first: ``{"name", "description"}`` each (nothing for no match)."""
        k = min(limit or self.limit, len(self._names))
        if k == 0 or not _words(query):
            return []
        found = self._lexical(query, k) if self._matrix is None else self._fused(query, k)
        return [{"name": self._names[i], "description": self._tools[i].get("description") or ""} for i in found]

    def _lexical(self, query: str, k: int) -> list[int]:
        """Tool indexes by BM25 score, best first; only tools sharing a word with the query."""
        found, scores = self._index.retrieve(self._tokenize([query]), k=k, show_progress=False)
        return [int(i) for i, score in zip(found[0], scores[0], strict=True) if score > 0]

    def _fused(self, query: str, k: int) -> list[int]:
        """The BM25 and embedding rankings fused by reciprocal rank: each tool scores the weighted sum of
        1 / (60 + rank) over the rankings it is in, so agreement wins and neither ranking's scale matters."""
        import numpy as np

        assert self._embedder is not None
        assert self._matrix is not None
        pool = min(len(self._names), max(10 * k, 50))
        (query_vector,) = _unit_rows(self._embedder([query]), 1)
        semantic = np.argsort(-(self._matrix @ query_vector), kind="stable")[:pool]
        fused: dict[int, float] = {}
        rankings = ((1.0, self._lexical(query, pool)), (_SEMANTIC_WEIGHT, [int(i) for i in semantic]))
        for weight, ranking in rankings:
            for rank, index in enumerate(ranking, start=1):
                fused[index] = fused.get(index, 0.0) + weight / (_RRF_K + rank)
        return sorted(fused, key=lambda index: (-fused[index], index))[:k]

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


def _document_vectors(embedder: Embedder, documents: list[str]) -> Any:
    """The documents' unit vectors as one matrix, embedding only those not cached for this embedder."""
    import numpy as np

    try:
        cache = _vectors.setdefault(embedder, {})
    except TypeError:  # an embedder that cannot be weakly referenced: no cache
        cache = {}
    missing = list(dict.fromkeys(text for text in documents if text not in cache))
    if missing:
        if len(cache) + len(missing) > _CACHE_LIMIT:
            cache.clear()
        cache.update(zip(missing, _unit_rows(embedder(missing), len(missing)), strict=True))
    return np.stack([cache[text] for text in documents])


def _unit_rows(vectors: Any, count: int) -> Any:
    """The embedder's answer as ``count`` rows of unit length (a zero vector stays zero)."""
    import numpy as np

    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"The embedder returned something that is not a list of vectors: {exc}") from None
    if matrix.ndim != 2 or matrix.shape[0] != count or not np.isfinite(matrix).all():
        raise ValueError(
            f"The embedder must return {count} vector(s) of finite numbers, one per text; it returned an array of "
            f"shape {matrix.shape}."
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _words(text: str) -> list[str]:
    """Lower-case words, splitting URIs, snake_case and camelCase (``mcp://gh.createIssue`` -> gh create issue)."""
    return [word.lower() for word in _WORD.findall(text)]


def _summary(description: Mapping[str, Any]) -> str:
    """What a tool does, for embedding: its name's words and its description."""
    name = str(description.get("name", "")).split("://", 1)[-1]
    return f"{' '.join(_words(name))}. {description.get('description') or ''}"


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
