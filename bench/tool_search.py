"""Benchmark: tool search on requests in users' own words, over a catalogue of real tools, and at 10,000 tools.

Run: ``.venv/bin/python bench/tool_search.py`` (offline: it reads bench/data/; the ``search``, ``embeddings`` and
``minilm`` extras and pydantic-ai-slim, all in ``dev``).

The catalogue (bench/data/tool_catalog.json, captured by bench/tool_search_catalog.py): Temporal's HTTP API from
the OpenAPI document in the ``temporalio`` wheel, npm's ``@modelcontextprotocol/server-everything`` and
``server-filesystem``, PyPI's ``mcp-server-time`` and ``mcp-server-git``, kavalai's bundled tools and demo server.
The requests (bench/data/tool_requests*.json) are written as users write them ("kill that workflow, it's stuck",
"throw away scratch.log", "add 17 and 25"), each with the tool(s) that do it: the ``tune`` half chose the settings
in kavalai.agent.search, the ``held_out`` half did not, and the ``unseen`` and ``unseen2`` sets were each written
before any search was run on them and never used to choose anything (``unseen2`` in a later round, after the
settings of that round were chosen). A request counts at k when one of its tools is among the first k results.

Printed: recall@1, recall@5 and the mean time of one search for each mode on each set, beside pydantic-ai's local
search (``keywords_search``, its ``keywords`` strategy) on the same requests; then, at 10,000 tools (the catalogue's
tools copied under 62 more server names), each mode's index build time, memory (tracemalloc's peak while building,
which sees numpy's arrays but not ONNX Runtime's), and time per search. Targets: the default install (``search`` +
``embeddings``) recall@5 >= 0.80 on held_out and the unseen sets, <= 1 ms a search and <= 2 s to index at 10,000 tools;
MiniLM recall@5 >= 0.85 and <= 15 ms a search at 10,000 tools.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from pydantic_ai.tools import ToolDefinition  # noqa: E402

try:  # pydantic-ai 2.78 and later: public, as ``ToolSearch(strategy="keywords")`` runs it
    from pydantic_ai.capabilities import keywords_search as keywords_search_fn
except ImportError:  # earlier: the same function under its first, private name
    from pydantic_ai.toolsets._tool_search import keywords_search_fn  # type: ignore[no-redef,attr-defined]

from kavalai.agent.embeddings import local_embedder, minilm_embedder  # noqa: E402
from kavalai.agent.search import ToolSearch  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
Search = Callable[[str], list[str]]


def _load() -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    tools = json.loads((DATA / "tool_catalog.json").read_text())["tools"]
    split = json.loads((DATA / "tool_requests.json").read_text())
    unseen = json.loads((DATA / "tool_requests_unseen.json").read_text())["requests"]
    unseen2 = json.loads((DATA / "tool_requests_unseen2.json").read_text())["requests"]
    return tools, {"tune": split["tune"], "held_out": split["held_out"], "unseen": unseen, "unseen2": unseen2}


def _ours(index: ToolSearch) -> Search:
    return lambda query: [hit["name"] for hit in index.search(query, limit=5)]


def _pydantic_ai(tools: Sequence[dict[str, Any]]) -> Search:
    definitions = [
        ToolDefinition(name=t["name"], description=t.get("description"), parameters_json_schema=t["inputSchema"])
        for t in tools
    ]
    return lambda query: keywords_search_fn(None, [query], definitions)[:5]  # type: ignore[arg-type]


def _score(search: Search, requests: list[dict[str, Any]]) -> tuple[float, float, float]:
    """recall@1, recall@5, and the mean seconds of one search."""
    at1 = at5 = 0
    started = time.perf_counter()
    found = [search(request["request"]) for request in requests]
    elapsed = time.perf_counter() - started
    for request, names in zip(requests, found, strict=True):
        at1 += bool(names) and names[0] in request["tools"]
        at5 += any(name in request["tools"] for name in names[:5])
    return at1 / len(requests), at5 / len(requests), elapsed / len(requests)


def _copies(tools: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """``total`` tools: the catalogue, then copies under other server names (``temporal`` -> ``temporal7``)."""
    out = list(tools)
    copy = 1
    while len(out) < total:
        for tool in tools:
            scheme, rest = tool["name"].split("://", 1)
            server, name = rest.split(".", 1)
            description = f"{tool.get('description') or ''} ({server} {copy})"
            out.append({**tool, "name": f"{scheme}://{server}{copy}.{name}", "description": description})
            if len(out) == total:
                break
        copy += 1
    return out


def _build(make: Callable[[], Any]) -> tuple[Any, float, float]:
    """What ``make`` built, the seconds it took, and tracemalloc's peak in MiB while it ran again (tracemalloc
    slows Python's allocations down, so the time is measured on a build of its own)."""
    gc.collect()
    started = time.perf_counter()
    built = make()
    elapsed = time.perf_counter() - started
    gc.collect()
    tracemalloc.start()
    make()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return built, elapsed, peak


def main() -> None:
    tools, sets = _load()
    wordllama, minilm = local_embedder(), minilm_embedder()
    modes: dict[str, Callable[[list[dict[str, Any]]], Search]] = {
        "BM25 (search extra)": lambda ts: _ours(ToolSearch(ts)),
        "BM25 + WordLlama (default: search + embeddings)": lambda ts: _ours(ToolSearch(ts, embedder=wordllama)),
        "BM25 + MiniLM (minilm extra)": lambda ts: _ours(ToolSearch(ts, embedder=minilm)),
        "pydantic-ai keywords_search": _pydantic_ai,
    }
    sizes = ", ".join(f"{name} {len(requests)}" for name, requests in sets.items())
    print(f"catalogue: {len(tools)} real tools; requests in users' words: {sizes}")
    print(f"{'mode':50s} {'set':9s} {'recall@1':>8s} {'recall@5':>8s} {'ms/search':>9s} {'x peer':>7s}")
    searches = {label: make(tools) for label, make in modes.items()}
    peer = searches["pydantic-ai keywords_search"]
    for label, search in searches.items():
        for name, requests in sets.items():
            search(requests[0]["request"])  # warm up
            at1, at5, seconds = _score(search, requests)
            floor = _score(peer, requests)[2]  # the peer, measured right after on the same requests
            print(f"{label:50s} {name:9s} {at1:8.2f} {at5:8.2f} {seconds * 1e3:9.2f} {seconds / floor:7.2f}")
    many = _copies(tools, 10_000)
    queries = [request["request"] for request in sets["held_out"]]
    print(f"\nat {len(many):,} tools ({len(queries)} held-out requests searched):")
    print(f"{'mode':50s} {'build s':>8s} {'MiB':>6s} {'ms/search':>9s} {'median':>7s}")
    for label, make in modes.items():
        search, build, peak = _build(lambda make=make: make(many))
        search(queries[0])
        times = []
        for query in queries:
            started = time.perf_counter()
            search(query)
            times.append(time.perf_counter() - started)
        mean, median = statistics.mean(times) * 1e3, statistics.median(times) * 1e3
        print(f"{label:50s} {build:8.2f} {peak:6.1f} {mean:9.2f} {median:7.2f}")
    print(
        "\n(MiniLM's build reads tools' vectors from its disk cache, "
        f"{minilm.cache_file}; the first run embeds them: "  # type: ignore[attr-defined]
        "10,000 texts, one per tool, minutes on 2 cores.)"
    )


if __name__ == "__main__":
    main()
