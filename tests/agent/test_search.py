"""Tool search: with many tools the agent offers its core tools and search_tools, and loads what a search finds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.agent.search import NOTHING_FOUND, RESULTS, SEARCH_TOOLS, ToolSearch, model_result
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call

TOPICS = [
    ("weather", "Get the weather forecast for a city", "city"),
    ("stock", "Look up the latest stock price of a ticker symbol", "ticker"),
    ("translate", "Translate a text into another language", "language"),
    ("invoice", "Create an invoice for a customer", "customer"),
    ("calendar", "Book a meeting in the calendar", "attendees"),
    ("email", "Send an email message to a recipient", "recipient"),
    ("geocode", "Turn a street address into coordinates", "address"),
    ("currency", "Convert an amount between currencies", "amount"),
    ("timezone", "Convert a time between time zones", "timezone"),
    ("shipping", "Track a parcel shipment by tracking number", "tracking_number"),
]


def _tool(name: str, description: str, argument: str) -> Any:
    def tool(**kwargs: str) -> str:
        return f"{name}: {kwargs[argument]}"

    tool.__name__ = name
    tool.__doc__ = description
    tool.__annotations__ = {argument: str, "return": str}
    import inspect

    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(argument, inspect.Parameter.KEYWORD_ONLY, annotation=str)], return_annotation=str
    )
    return pythontool(tool)


@pytest.fixture
def catalog() -> FunctionKernel:
    """40 tools: ten topics, each in four services."""
    kernel = FunctionKernel()
    for service in ("acme", "globex", "initech", "umbrella"):
        for name, description, argument in TOPICS:
            kernel.register_python_tool(f"{service}.{name}", _tool(name, f"{description} ({service}).", argument))
    return kernel


async def test_many_tools_are_searched_and_what_is_found_is_loaded_next_step(catalog: FunctionKernel) -> None:
    def script(request: ScriptedRequest) -> object:
        if len(request.messages) == 2:  # the instructions (how to search) and the prompt
            return tool_call("search_tools", {"query": "what is the weather in a city"})
        if "python://acme.weather" in request.tool_names and len(request.messages) == 4:
            return tool_call("python://acme.weather", {"city": "Oslo"})
        return "done"

    llm = ScriptedLLM(script)
    result = await Agent(llm, kernel=catalog, core_tools=["python://acme.email"]).run("Weather in Oslo?")
    first, second, third = llm.requests
    assert first.tool_names == ["python://acme.email", "search_tools"]  # not 40 tools
    found = result.tool_calls[0].result["tools"]
    assert {t["name"] for t in found[:4]} == {
        f"python://{s}.weather" for s in ("acme", "globex", "initech", "umbrella")
    }
    assert second.tool_names[:2] == ["python://acme.email", "search_tools"]  # the start stays put (prompt cache)
    assert "python://acme.weather" in second.tool_names
    assert result.tool_calls[1].result == {"result": "weather: Oslo"}
    assert third.tool_names == second.tool_names


async def test_few_tools_are_all_offered_and_search_can_be_forced(catalog: FunctionKernel) -> None:
    few = ScriptedLLM(["done"])
    await Agent(few, kernel=catalog, allowed_tools=["python://acme.*"]).run("hi")
    assert len(few.requests[0].tool_names) == 10
    forced = ScriptedLLM(["done"])
    await Agent(forced, kernel=catalog, allowed_tools=["python://acme.*"], tool_search=True).run("hi")
    assert forced.requests[0].tool_names == ["search_tools"]
    never = ScriptedLLM(["done"])
    await Agent(never, kernel=catalog, tool_search=False).run("hi")
    assert len(never.requests[0].tool_names) == 40


async def test_a_tool_not_yet_offered_can_still_be_called_and_empty_queries_are_errors(catalog: FunctionKernel) -> None:
    llm = ScriptedLLM(
        [tool_call("python://globex.stock", {"ticker": "KVL"}), tool_call("search_tools", {"query": " "}), "done"]
    )
    result = await Agent(llm, kernel=catalog).run("price?")
    assert result.tool_calls[0].result == {"result": "stock: KVL"}
    assert result.tool_calls[1].status == "error"
    assert "Give search_tools a query" in (result.tool_calls[1].error or "")


def test_recall_at_5_on_queries_a_model_writes(catalog: FunctionKernel) -> None:
    """The model writes the query (what the tool should do), not the user's raw words."""
    descriptions = [catalog.registry.describe(name) for name in catalog.list_tools()]
    search = ToolSearch(descriptions)
    tasks = {
        "weather forecast for Paris tomorrow": "weather",
        "current price of AAPL stock": "stock",
        "translate a sentence to French": "translate",
        "bill a customer: create invoice": "invoice",
        "schedule a meeting with attendees": "calendar",
        "send the report by email": "email",
        "coordinates of a street address": "geocode",
        "convert 100 dollars to euros currency": "currency",
        "what time is it in Tokyo, time zone conversion": "timezone",
        "track my parcel": "shipping",
    }
    hits = 0
    for task, topic in tasks.items():
        names = [t["name"].split(".")[-1] for t in search.search(task, limit=5)]
        hits += topic in names
    assert hits / len(tasks) >= 0.9


RAW_WORDING = {  # what a user types: few words shared with the tool's description
    "will it rain in Oslo tomorrow?": "weather",
    "how much is Apple trading at": "stock",
    "say this in Spanish please": "translate",
    "bill Globex for last month's work": "invoice",
    "set up a call with Ana on Friday": "calendar",
    "mail the quarterly report to my boss": "email",
    "where exactly is 10 Downing Street on a map": "geocode",
    "how many yen is 50 dollars": "currency",
    "what hour is it in Tokyo right now": "timezone",
    "where is my package": "shipping",
}


def _recall(search: ToolSearch, tasks: dict[str, str]) -> float:
    found = {task: [t["name"].split(".")[-1] for t in search.search(task, limit=5)] for task in tasks}
    return sum(topic in found[task] for task, topic in tasks.items()) / len(tasks)


def test_the_local_embedder_finds_tools_by_meaning_where_words_do_not_overlap(catalog: FunctionKernel) -> None:
    from kavalai.agent.embeddings import local_embedder

    descriptions = [catalog.registry.describe(name) for name in catalog.list_tools()]
    words_only = _recall(ToolSearch(descriptions), RAW_WORDING)
    fused = _recall(ToolSearch(descriptions, embedder=local_embedder()), RAW_WORDING)
    assert words_only <= 0.3  # BM25 cannot bridge "rain" to "weather forecast"
    assert fused >= 0.9
    assert local_embedder() is local_embedder()  # loaded once per process


def test_an_embedder_of_the_user_s_ranks_with_bm25_and_is_asked_once_per_document(catalog: FunctionKernel) -> None:
    asked: list[list[str]] = []

    def embedder(texts: Any) -> list[list[float]]:
        asked.append(list(texts))
        # Two dimensions: "money" and "time". A toy, but a real ranking by cosine.
        return [[float("price" in t or "invoice" in t or "dollars" in t), float("time" in t)] for t in texts]

    descriptions = [catalog.registry.describe(name) for name in catalog.list_tools()]
    search = ToolSearch(descriptions, embedder=embedder)
    found = [t["name"] for t in search.search("dollars", limit=8)]
    assert {name.split(".")[-1] for name in found} == {"stock", "invoice"}  # by meaning: no tool says "dollars"
    assert ToolSearch(descriptions, embedder=embedder).search("time", limit=4)
    documents = [call for call in asked if len(call) > 1]
    assert len(documents) == 1  # the catalog's vectors were cached for the second index
    assert len(documents[0]) == 80  # two views of each of the 40 tools: its name's words, name and description


def test_an_embedder_returning_the_wrong_shape_is_refused_saying_so(catalog: FunctionKernel) -> None:
    descriptions = [catalog.registry.describe(name) for name in catalog.list_tools()]
    with pytest.raises(ValueError, match=r"80 vector\(s\) of finite numbers.*shape \(3, 2\)"):
        ToolSearch(descriptions, embedder=lambda texts: [[1.0, 0.0]] * 3)
    with pytest.raises(ValueError, match="not a list of vectors"):
        ToolSearch(descriptions, embedder=lambda texts: [[1.0], [1.0, 2.0]] + [[0.0]] * 78)
    with pytest.raises(ValueError, match="finite numbers"):
        ToolSearch(descriptions, embedder=lambda texts: [[float("nan")]] * len(texts))
    with pytest.raises(ValueError, match="search_embedder is an embedder, 'auto', 'local' or 'minilm'"):
        Agent(ScriptedLLM([]), kernel=catalog, search_embedder="wordllama")  # type: ignore[arg-type]


async def test_an_agent_searching_with_the_local_embedder_finds_and_calls_the_tool(catalog: FunctionKernel) -> None:
    def script(request: ScriptedRequest) -> object:
        if len(request.messages) == 2:
            return tool_call("search_tools", {"query": "where is my package"})
        if len(request.messages) == 4:
            found = [name for name in request.tool_names if name.endswith(".shipping")]
            return tool_call(found[0], {"tracking_number": "KV123"}) if found else "nothing found"
        return "done"

    llm = ScriptedLLM(script)
    result = await Agent(llm, kernel=catalog, search_embedder="local").run("Where is my package KV123?")
    assert result.tool_calls[1].uri.endswith(".shipping")
    assert result.tool_calls[1].result == {"result": "shipping: KV123"}


async def test_a_model_that_finds_nothing_fitting_searches_again_in_the_tools_words(catalog: FunctionKernel) -> None:
    """A scripted model searches in the user's words, reads the candidates, finds none that sends anything, and
    searches again with the words the tools use ("send message"), then calls what it found."""
    queries: list[str] = []

    def script(request: ScriptedRequest) -> object:
        last = request.last_message
        if last.role != "tool":
            queries.append("Bob needs to hear the meeting moved")
            return tool_call("search_tools", {"query": queries[-1]})
        if last.name != SEARCH_TOOLS:
            return "done"
        candidates = json.loads(str(last.content))["tools"]
        senders = [c["name"] for c in candidates if "send" in c["description"].lower()]
        if senders:
            return tool_call(senders[0], {"recipient": "bob@example.org"})
        queries.append("send message")  # the tools' own words: an action and a thing
        return tool_call("search_tools", {"query": queries[-1]})

    llm = ScriptedLLM(script)
    result = await Agent(llm, kernel=catalog, search_embedder=None).run("Tell Bob the meeting moved to 3pm.")
    assert queries == ["Bob needs to hear the meeting moved", "send message"]
    first, second = (call.result["tools"] for call in result.tool_calls[:2])
    assert not any("email" in hit["name"] for hit in first)  # the user's words found the calendar, not email
    assert any("email" in hit["name"] for hit in second)
    assert result.tool_calls[2].uri.endswith(".email")
    assert result.tool_calls[2].result == {"result": "email: bob@example.org"}
    for hit in [*first, *second]:  # compact: a name, one line, the required arguments
        assert set(hit) <= {"name", "description", "required", "also"}
        assert "\n" not in hit["description"]
        assert len(hit["description"]) <= 160
    assert len(first) <= RESULTS
    spec = next(tool for tool in llm.requests[0].tools if tool.name == SEARCH_TOOLS)
    assert "search again in the tools' own words" in spec.description


def test_a_search_shows_up_to_ten_and_says_what_to_do_when_nothing_matched(catalog: FunctionKernel) -> None:
    descriptions = [catalog.registry.describe(name) for name in catalog.list_tools()]
    search = ToolSearch(descriptions)
    assert len(search.search("convert or forecast")) == RESULTS  # 8 tools convert, 4 forecast: ten are shown
    assert model_result(search.search("zebra migration")) == {"tools": [], "note": NOTHING_FOUND}
    assert model_result(search.search("weather"))["tools"][0]["name"].endswith(".weather")


async def test_an_agent_reranks_with_the_reranker_it_is_given(catalog: FunctionKernel) -> None:
    with pytest.raises(ValueError, match="search_reranker"):
        Agent(ScriptedLLM(["done"]), kernel=catalog, search_reranker="cross-encoder")  # type: ignore[arg-type]

    def near_email(texts: Any) -> list[list[float]]:  # the query, and globex's tools, are near each other
        return [[1.0, 0.0] if "globex" in text or text.startswith("send") else [0.0, 1.0] for text in texts]

    llm = ScriptedLLM([tool_call("search_tools", {"query": "send an email message"}), "done"])
    agent = Agent(llm, kernel=catalog, search_embedder=None, search_reranker=near_email)
    result = await agent.run("Mail Bob.")
    assert result.tool_calls[0].result["tools"][0]["name"] == "python://globex.email"


def test_the_one_pass_bm25_sum_equals_bm25s_own_scores() -> None:
    """ToolSearch._scores adds the posting lists itself (one bincount); the sum is bm25s's get_scores, text by text
    and index by index at each weight, repeated words counted as often as they are said."""
    import numpy as np

    from kavalai.agent._search_text import stems
    from kavalai.agent.search import ARGUMENT_WEIGHT

    tools = [
        {
            "name": f"mcp://s.{name}",
            "description": text,
            "inputSchema": {"properties": {argument: {"type": "string", "description": f"the {argument}"}}},
        }
        for name, text, argument in TOPICS
    ]
    index = ToolSearch(tools)
    said = (("convert the currency amount amount", 1.0), ("time zone city", 0.75), ("weather unknownword", 0.1))
    expected = np.zeros(len(tools), dtype=np.float64)
    for text, scale in said:
        for bm25, weight in ((index._main, 1.0), (index._arguments, ARGUMENT_WEIGHT)):
            known = [token for token in stems(text) if token in bm25.vocab_dict]
            if known:  # bm25s refuses an empty list
                expected += scale * weight * bm25.get_scores(known)
    got = index._scores(said)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert got[[name for name, _, _ in TOPICS].index("currency")] == got.max() > 0
    assert not index._scores((("", 1.0), ("nothingknown", 1.0))).any()
