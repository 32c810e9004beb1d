"""Tool search is bounded: a query is cut to a documented size, heavy work runs off the event loop, and the search
libraries print nothing unless the application configured logging."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.agent.search import MAX_QUERY_CHARS, MAX_QUERY_WORDS, RESULTS, ToolSearch
from kavalai.testing import ScriptedLLM, tool_call

TOOLS = [
    {"name": "wx.forecast", "description": "Weather forecast for a city."},
    {"name": "fs.delete", "description": "Delete a file."},
]


class _Recorder:
    """An embedder that notes the thread it ran on and the longest text it was given."""

    def __init__(self) -> None:
        self.threads: set[int] = set()
        self.longest = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        self.longest = max([self.longest, *(len(text) for text in texts)])
        return [[float("weather" in text.lower()), float("delete" in text.lower()), 1.0] for text in texts]


def test_a_query_is_cut_to_its_first_characters_and_words() -> None:
    search = ToolSearch(TOOLS)
    assert [hit["name"] for hit in search.search("weather " + "x" * (MAX_QUERY_CHARS + 10))] == ["wx.forecast"]
    assert search.search("x" * MAX_QUERY_CHARS + " weather") == []  # past the characters read
    assert search.search("zz " * MAX_QUERY_WORDS + "weather") == []  # past the words read
    assert [hit["name"] for hit in search.search("zz " * (MAX_QUERY_WORDS - 1) + "weather")] == ["wx.forecast"]
    assert search.search("7" * 1_000_000) == []  # numbers are arguments, not what a tool does


async def test_a_million_character_query_runs_off_the_loop_while_the_loop_keeps_ticking() -> None:
    embedder = _Recorder()
    search = ToolSearch(TOOLS, embedder=embedder)
    loop_thread = threading.get_ident()
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    found = await search.asearch("7" * 1_000_000 + " weather")
    done.set()
    await ticking
    assert found  # an embedder always ranks every tool
    assert embedder.threads - {loop_thread}  # the search ran on a worker thread
    assert embedder.longest <= MAX_QUERY_CHARS  # the embedder never saw the million characters
    assert ticks > before  # the loop went on while the search ran


async def test_the_agent_builds_its_index_and_searches_on_worker_threads() -> None:
    @pythontool
    def forecast(city: str) -> str:
        """Weather forecast for a city."""
        return f"sunny in {city}"

    kernel = FunctionKernel()
    kernel.register_python_tool("wx.forecast", forecast)
    embedder = _Recorder()
    llm = ScriptedLLM([tool_call("search_tools", {"query": "weather " * 200_000}), "done"])
    result = await Agent(llm, kernel=kernel, tool_search=True, search_embedder=embedder).run("Weather?")
    assert threading.get_ident() not in embedder.threads  # index build and query alike
    assert embedder.longest <= MAX_QUERY_CHARS
    assert result.tool_calls[0].result["tools"][0]["name"] == "python://wx.forecast"


def _stderr_of(script: str) -> str:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return done.stderr


SEARCH = """
import logging
{setup}
from kavalai.agent.embeddings import local_embedder
from kavalai.agent.search import ToolSearch
logging.getLogger("some.library").warning("a library's warning")  # gives the root logger a handler
ToolSearch([{{"name": "a", "description": "add numbers"}}], embedder=local_embedder()).search("add")
"""


def test_the_search_libraries_log_nothing_unless_the_application_asks() -> None:
    quiet = _stderr_of(SEARCH.format(setup=""))
    assert "bm25s" not in quiet
    assert "a library's warning" in quiet  # the application's own logging still shows
    loud = _stderr_of(SEARCH.format(setup="logging.basicConfig(level=logging.DEBUG)"))
    assert "DEBUG:bm25s" in loud  # an application that asks for debug output gets bm25s's too


def _results(result: Any) -> list[list[str]]:
    return [[tool["name"] for tool in call.result["tools"]] for call in result.tool_calls]


async def test_a_search_again_shows_only_new_tools_unless_asked_and_the_first_request_says_how() -> None:
    kernel = FunctionKernel()
    for i in range(24):  # two searches of ten, and more

        def forecast(city: str) -> str:
            return city

        forecast.__doc__ = f"Weather forecast for a city, from provider {i}."
        kernel.register_python_tool(f"wx{i}.forecast", pythontool(forecast))
    query = {"query": "weather forecast"}
    llm = ScriptedLLM(
        [
            tool_call("search_tools", query),
            tool_call("search_tools", query),
            tool_call("search_tools", {**query, "show_seen": True}),
            "done",
        ]
    )
    result = await Agent(llm, kernel=kernel, tool_search=True, search_embedder=None).run("Weather?")
    first, second, third = _results(result)
    assert len(first) == len(second) == RESULTS
    assert not set(first) & set(second)
    assert set(third) <= set(first) | set(second)
    system = llm.requests[0].messages[0]
    assert system.role == "system"
    assert "search_tools" in system.content
    assert "tools' own vocabulary" in system.content
    spec = next(tool for tool in llm.requests[0].tools if tool.name == "search_tools")
    assert "required arguments" in spec.description
    assert "show_seen" in spec.input_schema["properties"]


def test_what_a_search_shows_the_model_is_bounded_whatever_the_tools_say() -> None:
    from kavalai.agent.search import model_result

    required = [f"argument_{i}_" + "x" * 500 for i in range(1_000)]
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in required}, "required": required}
    tools = [
        {"name": f"huge{i}.tool", "description": f"Says a lot {i}. " * 10_000, "inputSchema": schema} for i in range(30)
    ]
    copies = [{**tools[0], "name": f"copy{i}.tool"} for i in range(100)]  # the same tool offered 101 times
    [once] = ToolSearch([tools[0], *copies]).search("says a lot")
    assert len(once["also"]) == 10
    found = model_result(ToolSearch(tools).search("says a lot"))["tools"]
    assert len(found) == RESULTS
    for hit in found:
        assert len(hit["description"]) <= 160
        assert len(hit["required"]) == 16
        assert all(len(name) == 64 for name in hit["required"])
    assert len(json.dumps(found)) < RESULTS * 1_500  # ten compact lines, far under the default output budget


def test_a_search_over_two_thousand_tools_sharing_a_description_fits_the_output_budget() -> None:
    from kavalai.agent.budget import OutputBudget
    from kavalai.agent.search import model_result

    description = "Runs the report for the account and returns it as a table. " * 50
    schema = {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]}
    same = [{"name": f"srv{i}." + "r" * 100, "description": description, "inputSchema": schema} for i in range(2_000)]
    budget = OutputBudget().max_chars
    [one] = model_result(ToolSearch(same).search("run the report"))["tools"]  # the same tool 2,000 times
    assert len(one["also"]) == 10
    assert len(json.dumps(one)) < budget
    distinct = [  # the same description, each tool's own argument: 2,000 tools, none collapsed
        {**tool, "inputSchema": {**schema, "properties": {f"a{i}": {"type": "string"}}, "required": [f"a{i}"]}}
        for i, tool in enumerate(same)
    ]
    found = model_result(ToolSearch(distinct).search("run the report"))["tools"]
    assert len(found) == RESULTS
    assert len(json.dumps(found)) < budget


def test_a_search_with_an_embedder_runs_its_linear_algebra_on_one_blas_thread_and_gives_the_threads_back() -> None:
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"}

    seen: list[set[int]] = []

    def embedder(texts: Sequence[str]) -> Any:
        seen.append(blas_threads())
        return np.ones((len(texts), 3), dtype=np.float32)

    with threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        search = ToolSearch(TOOLS, embedder=embedder)  # the build: the tools' vectors
        search.search("weather")  # a search: the query's vector
        assert blas_threads() == {2}
    assert seen == [{1}, {1}]


def test_a_query_holding_a_lone_surrogate_is_searched_by_every_embedder() -> None:
    from kavalai.agent.embeddings import local_embedder

    query = json.loads('"delete the file \\ud800 now"')  # what a model's JSON arguments may decode to
    for embedder in (None, local_embedder(), _Recorder()):
        found = ToolSearch(TOOLS, embedder=embedder).search(query)
        assert found[0]["name"] == "fs.delete"  # the tokenizer refused the lone surrogate: TypeError


def test_a_query_of_lone_surrogates_is_still_cut_to_its_first_characters() -> None:
    """Each lone surrogate was made three U+FFFD (its UTF-8 bytes, each replaced): a query of a thousand of them was
    read as three thousand characters, past the bound every search reads a query by."""
    embedder = _Recorder()
    search = ToolSearch(TOOLS, embedder=embedder)
    embedder.longest = 0  # the build's texts (the tools') are not the query
    search.search("weather " + "\udc80" * (MAX_QUERY_CHARS * 2))
    assert 0 < embedder.longest <= MAX_QUERY_CHARS
