"""Tool search: with many tools, an agent offers a few and a ``search_tools`` tool that finds the others.

Past a few dozen tools, sending every definition costs thousands of tokens per request and models choose worse.
:class:`ToolSearch` ranks the agent's tools for a query:

- by words, with BM25 (the ``bm25s`` library, from the ``search`` extra) over each tool's name split into words and
  its description, every word stemmed (``PyStemmer``: "deleting" finds "delete"); the arguments' names and
  descriptions count too, at a lower weight (:data:`ARGUMENT_WEIGHT`), so they break ties without pulling in every
  tool that takes a ``path``;
- by meaning, given an embedder (:mod:`kavalai.agent.embeddings`): the cosine of the query's vector and each tool's;
- the two scores fused, each scaled to [0, 1] over the candidates and added at :data:`EMBEDDING_WEIGHT` and the
  rest (a score fusion, not a rank fusion: a rank throws away how far ahead an exact match is), the weight chosen by
  its mean over the six catalogues of bench/tool_search.py settings may be chosen on, and reported on three never
  tuned on;
- the words the vocabulary adds to a query (:mod:`kavalai.agent._vocabulary`) counted in BM25 below the user's own
  (:data:`ADDED_WEIGHT`), where an embedder is there to carry the meaning too.

Tools that are the same tool offered twice (the same description and arguments under two names) are collapsed into
the first, whose result lists the others under ``also``. The agent offers its core tools plus ``search_tools``;
what a search finds is offered from the next step on, after the tools already offered, so the start of the tool
list (and a provider's prompt cache) stays the same.

Bounds: a query is cut to :data:`~kavalai.agent._search_text.MAX_QUERY_CHARS` characters before anything reads it,
and only its first :data:`~kavalai.agent._search_text.MAX_QUERY_WORDS` words are searched, so any query costs what
a short one costs. The agent builds the index and runs each search in a worker thread (:meth:`ToolSearch.asearch`),
so neither blocks the event loop.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import weakref
from collections.abc import Collection, Mapping, Sequence
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread

from kavalai.agent._blas import one_thread
from kavalai.agent._rescore import Rescorer
from kavalai.agent._search_text import (
    MAX_QUERY_CHARS,
    MAX_QUERY_WORDS,
    dedupe_key,
    document_fields,
    one_line,
    plain,
    required_arguments,
    stems,
    stems_of,
    summary_of,
    tokens,
    value_words,
    words,
)
from kavalai.agent._spelling import MIN_LENGTH, Spelling
from kavalai.agent._vocabulary import ABBREVIATIONS, expand_both

if TYPE_CHECKING:
    from kavalai.agent.embeddings import Embedder

__all__ = [
    "ADDED_WEIGHT",
    "ARGUMENT_WEIGHT",
    "EMBEDDING_WEIGHT",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_WORDS",
    "NOTHING_FOUND",
    "RERANK_WEIGHT",
    "RESULTS",
    "SEARCH_HINT",
    "SEARCH_TOOLS",
    "VALUE_WEIGHT",
    "ToolSearch",
    "model_result",
]

#: The name the model calls to search (handled by the agent, not the kernel).
SEARCH_TOOLS: Final = "search_tools"
#: How many candidates one search shows the model: the right tool is in the first 10 far more often than in the
#: first 5 (bench/tool_search.py), and ten compact lines cost a few hundred tokens.
RESULTS: Final = 10
#: What a search that found nothing tells the model.
NOTHING_FOUND: Final = (
    "No tool matched. Search again with the words tools use for this (an action and a thing, such as "
    "'create issue' or 'list files'), not the user's words."
)
#: Added to the agent's instructions when it searches: how to search, in the first request.
SEARCH_HINT: Final = (
    "Only some tools are offered now. To find others, call search_tools with a few words in the tools' own "
    "vocabulary (an action and a thing, such as 'terminate workflow' or 'delete file'), not the user's sentence; "
    "when nothing fits, search again with other words."
)
#: How much a match in the arguments' names and descriptions counts beside one in the name and description.
ARGUMENT_WEIGHT: Final = 0.5
#: The embedding's share of the fused score, BM25's being the rest (each scaled to [0, 1] over the pool; see
#: :meth:`ToolSearch._fused`): users' own words often share no word with the tool, and there the meaning decides.
#: Chosen by the mean recall@5 (then @1) over the six catalogues of bench/tool_search.py that settings may be chosen
#: on, each counted once: 0.5 to 0.6 are flat there (0.820 at 0.6, 0.810 at 0.75, the weight once chosen on the
#: tuning catalogue alone, which lost most on the others).
EMBEDDING_WEIGHT: Final = 0.6
#: How much a word of a URL or path in the query counts in BM25 beside the query's other words: "circleci" in
#: ".circleci/config.yml" says what the request is about, "notes" in "./notes/today.txt" only where the file is
#: (the highest weight at which tests/agent/test_search_ranking.py's paths still find the tool that reads them).
#: Those words also name servers for the second stage (:mod:`kavalai.agent._rescore`).
VALUE_WEIGHT: Final = 0.1
#: With an embedder, how much a word the vocabulary added to the query (:mod:`kavalai.agent._vocabulary`: a synonym,
#: the verb tools say, a phrase's words) counts in BM25 beside the user's own words (an abbreviation spelt out counts
#: as the user's): a guess at what the user meant ("add" also searches "create"), it should find a tool the user's
#: words miss without outranking one they name. Chosen with EMBEDDING_WEIGHT by the mean over bench/tool_search.py's
#: six tuning catalogues: 0.75 against 1.0 finds more first on four of them and one fewer on one.
ADDED_WEIGHT: Final = 0.75
#: The optional reranker's cosine weight beside the first stage's score (scaled so the best is 1). Chosen on the tuning
#: catalogues (bench/tool_search.py): 2.5 against 2.0 finds two more requests of the tune half in the top 5 and one
#: more of the held-out half first, one fewer of the fifth's first, and ties elsewhere; 3.0 and more lose recall@1.
RERANK_WEIGHT: Final = 2.5
_NAME_REPEAT: Final = 3  # the name's words count thrice in BM25: a name says what a tool does in a few words
_BM25: Final = {"k1": 1.5, "b": 0.75}  # bm25s's defaults
_CACHE_LIMIT: Final = 50_000  # tool documents' vectors kept per embedder (a catalog is embedded once, not per run)
_vectors: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_THREAD_ABOVE: Final = 500  # without an embedder, a search over this many tools or fewer takes well under 1 ms
_LETTERS: Final = re.compile(f"[A-Za-z]{{{MIN_LENGTH},}}")  # words long enough to be corrected
_POOL: Final = 50  # candidates each ranking gives the fusion, and the fusion the second stage
_ALSO_SHOWN: Final = 10  # a result names at most this many copies of its tool
_REQUIRED_SHOWN: Final = 16  # a result names at most this many required arguments, each cut to _ARGUMENT_CHARS
_ARGUMENT_CHARS: Final = 64
_QUERIES_KEPT: Final = 1_024  # queries' vectors the reranker keeps (an agent repeats its searches)
_WORDS_KEPT: Final = 10  # BM25's best go to the second stage even where the fusion ranks them lower than the pool
_SHORTLIST: Final = 400  # tools compared view by view after the coarse pass chose them (see ToolSearch._semantic)
_COARSE_DIMS: Final = 64  # dimensions the coarse pass compares
_SAMPLED: Final = 2_048  # tools whose summed views choose the coarse pass's directions (evenly spaced)


def _import_bm25s() -> Any:
    """``bm25s``, its logger left to the application's logging configuration.

    bm25s sets its logger to DEBUG when imported, so once anything adds a root handler (a library's bare
    ``logging.warning`` does), every index build prints ``DEBUG:bm25s:...``. Imported here first, the logger goes
    back to NOTSET: the level the application gives the root (or ``bm25s``) logger decides.
    """
    imported_here = "bm25s" not in sys.modules
    try:
        import bm25s
    except ImportError as exc:  # pragma: no cover - the extra is installed in development
        raise ImportError("Tool search needs bm25s: pip install 'kavalai[search]'.") from exc
    if imported_here:
        logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


class ToolSearch:
    """A search index over tool descriptions (as ``kernel.describe_tools()`` gives them).

    Args:
        descriptions: the tools to search.
        limit: the most tools one search returns.
        embedder: also rank by meaning, with this embedder (see :mod:`kavalai.agent.embeddings`;
            :func:`~kavalai.agent.embeddings.local_embedder` needs no download). Tool documents' vectors are cached
            per embedder, so a catalog is embedded once per process (and once per machine with an embedder that
            keeps them on disk, such as :func:`~kavalai.agent.embeddings.minilm_embedder`).

    Building the index embeds the tools (with an embedder) and may take a while for thousands of tools: in async
    code, build it with ``await anyio.to_thread.run_sync(ToolSearch, tools)`` and search with :meth:`asearch`.

    Raises:
        ImportError: ``bm25s`` is not installed (``pip install 'kavalai[search]'``).
        ValueError: the embedder did not return one vector per text.
    """

    def __init__(
        self,
        descriptions: Sequence[Mapping[str, Any]],
        *,
        limit: int = RESULTS,
        embedder: Embedder | None = None,
        reranker: Embedder | None = None,
    ) -> None:
        bm25s = _import_bm25s()
        self.limit = limit
        self._tools = [dict(d) for d in descriptions]
        self._names = [str(d.get("name", "")) for d in self._tools]
        self._position = {name: i for i, name in reversed(list(enumerate(self._names)))}
        self._also: dict[int, list[str]] = {}
        self._kept = self._collapse()  # the tools searched: one of each set of duplicates
        fields = [document_fields(self._tools[i]) for i in self._kept]
        # Tools repeat their arguments' texts ("The repository owner", "page", ...): each text is read once.
        read: dict[str, list[str]] = {}
        found = [tuple(read[t] if t in read else read.setdefault(t, tokens(t)) for t in three) for three in fields]
        name_stems = [stems_of(name) for name, _, _ in found]
        self._main = _bm25(
            bm25s,
            [stems * _NAME_REPEAT + stems_of(text) for stems, (_, text, _) in zip(name_stems, found, strict=True)],
        )
        arguments: dict[str, list[str]] = {}
        self._arguments = _bm25(
            bm25s,
            [
                arguments[a] if a in arguments else arguments.setdefault(a, stems_of(f))
                for (_, _, a), (_, _, f) in zip(fields, found, strict=True)
            ],
        )
        self._spelling = Spelling(chain.from_iterable(chain.from_iterable(three) for three in found))
        self._rescorer = _rescorer([name for name, _, _ in fields], [name for name, _, _ in found], name_stems)
        # Short forms the tools' names write themselves ("org" in ``list_org_members``): a query keeps them beside
        # their long form, which the vocabulary would otherwise put in their place.
        self._short = frozenset(ABBREVIATIONS).intersection(word.lower() for name, _, _ in found for word in name)
        self._embedder = embedder
        self._results: dict[int, dict[str, Any]] = {}
        self._matrix = self._coarse = None
        self._views = 0
        names = [" ".join(word.lower() for word in name) for name, _, _ in found]
        summaries = [summary_of(name, text) for name, (_, text, _) in zip(names, fields, strict=True)]
        with one_thread():  # the vectors' linear algebra (see kavalai.agent._blas)
            self._reranker = _Reranker(reranker, summaries) if reranker is not None and self._kept else None
            if embedder is not None and self._kept:
                # Views of each tool (arguments blur what a tool does): its name's words, for an embedder that wants
                # them (see _views), and name + description; rows [0, n), [n, 2n) of one matrix: a query is one
                # product.
                self._views = _views(embedder)
                self._matrix = _document_vectors(embedder, (names if self._views == 2 else []) + summaries)
                self._coarse = _coarse(self._matrix, len(self._kept))

    def _collapse(self) -> list[int]:
        first: dict[tuple[str, tuple[str, ...]], int] = {}
        kept = []
        for i, description in enumerate(self._tools):
            key = dedupe_key(description)
            if key is not None and key in first:
                self._also.setdefault(first[key], []).append(self._names[i])
                continue
            if key is not None:
                first[key] = i
            kept.append(i)
        return kept

    def __len__(self) -> int:
        return len(self._names)

    def search(self, query: str, *, limit: int | None = None, exclude: Collection[str] = ()) -> list[dict[str, Any]]:
        """The best matches for ``query``, best first (nothing for no match), skipping the tools named in
        ``exclude``: ``{"name", "description", "required"}`` each (the description's first sentence, the names of
        the required arguments), plus ``"also"``: the names of the same tool offered again, where there are any.

        The query is cut to :data:`MAX_QUERY_CHARS` characters and its first :data:`MAX_QUERY_WORDS` words. With
        an embedder or a reranker, the search's linear algebra runs on one BLAS thread (:mod:`kavalai.agent._blas`).
        """
        if self._matrix is None and self._reranker is None:
            return self._search(query, limit, exclude)
        with one_thread():
            return self._search(query, limit, exclude)

    def _search(self, query: str, limit: int | None, exclude: Collection[str]) -> list[dict[str, Any]]:
        bounded = _bounded(query)
        query, own, added = (self._corrected(part) for part in expand_both(plain(bounded), self._short))
        values = " ".join(value_words(bounded).split()[:MAX_QUERY_WORDS])
        k = min(limit or self.limit, len(self._kept))
        cut = " ".join(query.split()[:MAX_QUERY_WORDS])
        if k == 0 or not words(query):
            return []
        pool = min(len(self._kept), max(2 * k, _POOL) + len(exclude))
        # Without an embedder the vocabulary's words are the only way from the user's words to the tool's: they count
        # in full there (at ADDED_WEIGHT, BM25 alone lost recall on every tuning set).
        said = ((own, 1.0), (added, 1.0 if self._matrix is None else ADDED_WEIGHT), (values, VALUE_WEIGHT))
        first = self._lexical(said, pool) if self._matrix is None else self._fused(cut, said, pool)
        if self._reranker is not None:
            first = self._reranker.rerank(cut, *first)
        ranked = self._rescorer.rescore(words(cut), stems(cut), *first, servers=words(values))
        found = (self._kept[i] for i in ranked)
        return [self._result(i) for i in islice((i for i in found if self._names[i] not in exclude), k)]

    def _corrected(self, query: str) -> str:
        """``query`` with each word the catalogue does not know, in any form, replaced by the catalogue's word one
        slip away, where there is one ("git stauts" -> "git status"; see :mod:`kavalai.agent._spelling`)."""

        def fix(match: re.Match[str]) -> str:
            word = match.group().lower()
            if word in self._spelling or self._knows(word):
                return match.group()
            return self._spelling.correct(word) or match.group()

        return _LETTERS.sub(fix, query)

    def _knows(self, word: str) -> bool:
        """Whether the catalogue has ``word``'s stem ("deleting" is known where tools say "delete")."""
        found = stems(word)
        return not found or any(
            index is not None and found[0] in index.vocab_dict for index in (self._main, self._arguments)
        )

    async def asearch(
        self, query: str, *, limit: int | None = None, exclude: Collection[str] = ()
    ) -> list[dict[str, Any]]:
        """:meth:`search` in a worker thread when it may take over a millisecond (an embedder, or more than 500
        tools), so the event loop keeps running; in place otherwise (a thread hop costs about 0.1 ms)."""
        if self._matrix is None and len(self._kept) <= _THREAD_ABOVE:
            return self.search(query, limit=limit, exclude=exclude)
        return await anyio.to_thread.run_sync(lambda: self.search(query, limit=limit, exclude=exclude))

    def _result(self, index: int) -> dict[str, Any]:
        """What a search shows of a tool (built once per tool, copied per search: callers may change it)."""
        cached = self._results.get(index)
        if cached is None:
            cached = self._results[index] = self._describe(index)
        return {**cached, **({"also": list(cached["also"])} if "also" in cached else {})}

    def _describe(self, index: int) -> dict[str, Any]:
        tool = self._tools[index]
        result = {
            "name": self._names[index],
            "description": one_line(str(tool.get("description") or "")),
            "required": [argument[:_ARGUMENT_CHARS] for argument in required_arguments(tool)[:_REQUIRED_SHOWN]],
        }
        if index in self._also:
            result["also"] = self._also[index][:_ALSO_SHOWN]
        return result

    def _scores(self, said: Sequence[tuple[str, float]]) -> Any:
        """Each kept tool's BM25 score: name and description, plus the arguments' at :data:`ARGUMENT_WEIGHT`, for
        each text of ``said`` at its scale (the user's words at 1, the words the vocabulary added at
        :data:`ADDED_WEIGHT`, the words of the query's URLs and paths at :data:`VALUE_WEIGHT`).

        The sum bm25s's ``get_scores`` makes, one call per text and index, in one pass: each query word's weight
        over both indexes summed first, then every posting list it reads added up by one ``np.bincount`` (bm25s adds
        each list with ``np.add.at``: at 10,000 tools, six calls cost more than the rest of the lexical ranking)."""
        import numpy as np

        weights: dict[tuple[int, int], float] = {}  # (index, word's id in it) -> its weight in the sum
        for text, scale in said:
            for token in stems(text, limit=MAX_QUERY_WORDS):
                for which, (index, weight) in enumerate(((self._main, 1.0), (self._arguments, ARGUMENT_WEIGHT))):
                    found = index.vocab_dict.get(token) if index is not None else None
                    if found is not None:
                        weights[which, found] = weights.get((which, found), 0.0) + scale * weight
        if not weights:
            return np.zeros(len(self._kept), dtype=np.float32)
        places, values = [], []
        for (which, found), weight in weights.items():
            postings = (self._main if which == 0 else self._arguments).scores
            start, end = postings["indptr"][found], postings["indptr"][found + 1]
            places.append(postings["indices"][start:end])
            values.append(postings["data"][start:end] * np.float32(weight))
        total = np.bincount(np.concatenate(places), weights=np.concatenate(values), minlength=len(self._kept))
        return total.astype(np.float32)

    def _lexical(self, said: Sequence[tuple[str, float]], k: int) -> tuple[list[int], list[float]]:
        """Kept tools' places by BM25 score (see :meth:`_scores`), best first, and their scores; only tools sharing
        a word with the query."""
        scores = self._scores(said)
        ranked = _top_found(scores, k)
        return ranked, [float(scores[i]) for i in ranked]

    def _fused(self, cut: str, said: Sequence[tuple[str, float]], k: int) -> tuple[list[int], list[float]]:
        """The BM25 and embedding scores fused: each scaled to [0, 1] over the pool (BM25's by the best score, the
        cosine from the ``k``-th best to the best) and added, the embedding's at :data:`EMBEDDING_WEIGHT` and BM25's
        at the rest, so a strong exact match keeps its lead where the meanings are close. The best ``k``, BM25's
        best :data:`_WORDS_KEPT` after them wherever the fusion put them, and their scores."""
        import numpy as np

        assert self._embedder is not None
        (query_vector,) = _unit_rows(self._embedder([cut]), 1)
        semantic, cosines = self._semantic(query_vector, k)
        scores = self._scores(said)
        lexical = _top_found(scores, k)
        chosen = set(semantic)
        others = [index for index in lexical if index not in chosen]  # only these still need their cosine
        pool = np.asarray([*semantic, *others], dtype=np.int64)
        near = np.concatenate((cosines, self._near(pool[len(semantic) :], query_vector)))
        floor = float(cosines[-1]) if len(cosines) else 0.0
        spread = float(near.max()) - floor
        meaning = np.clip((near - floor) / spread, 0.0, None) if spread > 0 else np.zeros(len(pool))
        words = scores[pool] / (float(scores.max()) or 1.0)
        fused = (1.0 - EMBEDDING_WEIGHT) * words + EMBEDDING_WEIGHT * meaning
        order = np.lexsort((pool, -fused))  # best first, ties by place; read back as Python numbers in two calls
        places, sums = pool[order].tolist(), fused[order].tolist()
        ranked, best = places[:k], sums[:k]
        kept = set(ranked)
        extra = [index for index in lexical[:_WORDS_KEPT] if index not in kept]  # for the second stage to weigh
        if extra:
            rest = dict(zip(places[k:], sums[k:], strict=True))
            ranked, best = ranked + extra, best + [rest[index] for index in extra]
        return ranked, best

    def _near(self, places: Any, query_vector: Any) -> Any:
        """The cosine of the query and each of the kept tools at ``places``, by its closer view."""
        import numpy as np

        n = len(self._kept)
        assert self._matrix is not None
        near = self._matrix[places] @ query_vector  # view by view: no index array built, no rows copied twice
        for view in range(1, self._views):
            np.maximum(near, self._matrix[places + view * n] @ query_vector, out=near)
        return near

    def _semantic(self, query_vector: Any, k: int) -> tuple[list[int], Any]:
        """The ``k`` kept tools' places nearest the query by cosine, best first, and their cosines. A tool is as
        close as its closer view (see :func:`_views`): "kill the workflow" is near "terminate workflow execution"
        even where the description goes on about event histories.

        Over more than twice :data:`_SHORTLIST` tools, a coarse pass picks :data:`_SHORTLIST` tools and only those
        are compared view by view: each tool's views summed, projected on the catalogue's :data:`_COARSE_DIMS`
        main directions (a quarter of WordLlama's 256 dimensions), so the pass reads a quarter of the memory. It
        finds 97% of the ten nearest (bench/tool_search.py's 235 requests at 10,000 tools) in a third of the time."""
        import numpy as np

        assert self._matrix is not None
        n, views = len(self._kept), self._views
        if self._coarse is None:
            near = _cosines(self._matrix, query_vector).reshape(views, n).max(axis=0)
            best = _top(near, k)
            return best, near[best]
        projection, coarse = self._coarse
        rough = _cosines(coarse, query_vector @ projection)
        size = max(_SHORTLIST, k)
        shortlist = np.argpartition(rough, n - size)[n - size :] if n > size else np.arange(n)  # no negated copy
        exact = self._near(shortlist, query_vector)
        best = _top(exact, k)
        return shortlist[best].tolist(), exact[best]

    def description(self, name: str) -> dict[str, Any]:
        """The full description of the tool ``name``."""
        return self._tools[self._position[name]]

    def spec(self) -> dict[str, Any]:
        """The description of the ``search_tools`` tool."""
        return {
            "name": SEARCH_TOOLS,
            "description": f"Find tools for a task among the {len(self._names)} available. Search with a few words "
            "in the tools' own vocabulary (the action and the thing: 'terminate workflow', 'delete file', 'add "
            f"numbers'), not the user's whole request. Up to {self.limit} candidates, best first, each a tool's "
            "name, what it does in one line and its required arguments; the tools found can be called from the "
            "next step on. A search does not repeat tools an earlier one showed (set show_seen to see them "
            "again). When none fits, search again in the tools' own words: those of the names and descriptions "
            "the results showed.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What the tool does, in a few words (at most "
                        f"{MAX_QUERY_WORDS} words are read).",
                        "maxLength": MAX_QUERY_CHARS,
                    },
                    "show_seen": {
                        "type": "boolean",
                        "description": "Also list tools earlier searches showed.",
                        "default": False,
                    },
                },
                "required": ["query"],
            },
        }


class _Reranker:
    """The second stage's optional encoder: each candidate's first-stage score (scaled so the best is 1) plus
    :data:`RERANK_WEIGHT` times the cosine of the query and the tool's summary by a stronger encoder than the
    first stage's (all-MiniLM-L6-v2, :func:`~kavalai.agent.embeddings.minilm_embedder`). Tools' vectors are
    cached like the embedder's (and, for MiniLM, on disk); a query's, for the last :data:`_QUERIES_KEPT` queries."""

    def __init__(self, encoder: Embedder, summaries: list[str]) -> None:
        self._encoder = encoder
        self._matrix = _document_vectors(encoder, summaries)
        self._queries: dict[str, Any] = {}
        self._lock = threading.Lock()

    def rerank(self, query: str, candidates: list[int], scores: list[float]) -> tuple[list[int], list[float]]:
        top = max(scores, default=0.0) or 1.0
        near = self._matrix[candidates] @ self._vector(query) if candidates else []
        return candidates, [score / top + RERANK_WEIGHT * float(c) for score, c in zip(scores, near, strict=True)]

    def _vector(self, query: str) -> Any:
        with self._lock:
            found = self._queries.get(query)
        if found is None:
            (found,) = _unit_rows(self._encoder([query]), 1)
            with self._lock:
                if len(self._queries) >= _QUERIES_KEPT:
                    self._queries.pop(next(iter(self._queries)))
                self._queries[query] = found
        return found


def model_result(found: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``search_tools`` returns to the model: the candidates, and where there are none, what to do next."""
    return {"tools": found} if found else {"tools": [], "note": NOTHING_FOUND}


def _cosines(matrix: Any, vector: Any) -> Any:
    """``matrix @ vector`` in blocks of 1,024 rows: OpenBLAS splits a larger product over threads, which gains
    nothing here and, on a busy machine, made it five times slower (bench/tool_search.py at 10,000 tools)."""
    import numpy as np

    out = np.empty(len(matrix), dtype=np.float32)
    for start in range(0, len(matrix), 1024):
        np.dot(matrix[start : start + 1024], vector, out=out[start : start + 1024])
    return out


def _views(embedder: Embedder) -> int:
    """How many views of each tool are embedded: 2 (its name's words, and name + description), or 1 (name +
    description only) for an embedder whose ``name_view`` is false. A static model averages words, so a long
    description blurs what a tool does and the name alone says it better; a sentence encoder reads the whole
    summary in context, and there the name's view only adds near misses (MiniLM, on the tuning half: recall@5 0.955
    with the summary alone against 0.932 with both)."""
    return 1 if getattr(embedder, "name_view", True) is False else 2


def _coarse(matrix: Any, count: int) -> tuple[Any, Any] | None:
    """For the coarse pass of :meth:`ToolSearch._semantic`: a projection on the main directions of the tools'
    summed views (the eigenvectors of their Gram matrix with the largest eigenvalues, which keep their dot products
    best), and each tool's projected summed views; ``None`` for a catalogue too small to gain from a shortlist."""
    import numpy as np

    if count <= 2 * _SHORTLIST or matrix.shape[1] <= _COARSE_DIMS:
        return None
    summed = matrix.reshape(-1, count, matrix.shape[1]).sum(axis=0)
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    summed /= np.where(norms == 0, 1.0, norms)
    sample = summed[:: max(1, count // _SAMPLED)]  # the main directions of a catalogue show in a sample of it
    _, vectors = np.linalg.eigh(sample.T @ sample)  # eigenvalues ascending
    projection = np.ascontiguousarray(vectors[:, ::-1][:, :_COARSE_DIMS], dtype=np.float32)
    return projection, np.ascontiguousarray(summed @ projection, dtype=np.float32)


def _bm25(bm25s: Any, documents: list[list[str]]) -> Any:
    """A BM25 index of ``documents``' stems, or ``None`` when none has any (bm25s would divide by zero)."""
    if not any(documents):
        return None
    index = bm25s.BM25(**_BM25)
    index.index(documents, show_progress=False)
    return index


def _rescorer(names: list[str], found: list[list[str]], name_stems: list[list[str]]) -> Rescorer:
    """The second stage over the kept tools' names (``server.tool`` after the scheme), their words and stems."""
    servers = [name.split(".", 1)[0].lower() if "." in name else "" for name in names]
    name_words = [[word.lower() for word in words_found] for words_found in found]
    return Rescorer(servers, name_words, [set(stems) for stems in name_stems])


#: A surrogate code point: in a ``str`` always a lone one (a pair would be the one character it encodes).
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _bounded(query: str) -> str:
    """``query`` cut to :data:`MAX_QUERY_CHARS` characters, each lone surrogate (which a JSON ``"\\ud800"`` decodes
    to, and no tokenizer takes) made U+FFFD: what a search reads of any query."""
    cut = query[:MAX_QUERY_CHARS]
    return _LONE_SURROGATE.sub("\ufffd", cut) if not cut.isascii() else cut  # one for one: the length kept


def _top(scores: Any, k: int) -> list[int]:
    """The places of the ``k`` highest scores, highest first (ties by place), without sorting them all."""
    import numpy as np

    if k >= len(scores):
        return [int(i) for i in np.argsort(-scores, kind="stable")]
    part = np.argpartition(-scores, k)[:k]
    return [int(i) for i in part[np.lexsort((part, -scores[part]))]]


def _top_found(scores: Any, k: int) -> list[int]:
    """:func:`_top` of the tools sharing a word with the query (a positive score): few of a large catalogue. The
    ``k`` best of all are taken first (one pass, no index array of every positive built), then the positive."""
    import numpy as np

    if k < len(scores):
        part = np.argpartition(-scores, k)[:k]
        part = part[scores[part] > 0]
        return [int(i) for i in part[np.lexsort((part, -scores[part]))]]
    found = np.flatnonzero(scores > 0)
    return [int(found[i]) for i in _top(scores[found], k)]


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
        embed = getattr(embedder, "embed_documents", embedder)  # an embedder that keeps documents' vectors on disk
        cache.update(zip(missing, _unit_rows(embed(missing), len(missing)), strict=True))
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
