"""How tool search ranks: name splitting, stemming, argument weight, duplicates collapsed, fusion with embeddings."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from kavalai.agent import _search_text
from kavalai.agent.search import ToolSearch, _top_found


def _tool(name: str, description: str = "", **arguments: str) -> dict[str, Any]:
    properties = {arg: {"type": "string", "description": text} for arg, text in arguments.items()}
    schema = {"type": "object", "properties": properties, "required": list(arguments)}
    return {"name": name, "description": description, "inputSchema": schema}


def _names(search: ToolSearch, query: str) -> list[str]:
    return [hit["name"] for hit in search.search(query)]


@pytest.fixture
def unstemmed() -> Iterator[None]:
    """Words compared as written, as before stemming."""
    saved = _search_text._stem
    _search_text._stem = list
    _search_text._stems.clear()  # the words' stems learnt so far
    yield
    _search_text._stem = saved
    _search_text._stems.clear()


def test_names_are_split_into_the_words_a_user_types() -> None:
    assert _search_text.words("rest://temporal.TerminateWorkflowExecution") == [
        "rest",
        "temporal",
        "terminate",
        "workflow",
        "execution",
    ]
    assert _search_text.words("mcp://everything.get-sum2 HTTPRequest read_text_file") == [
        *("mcp", "everything", "get", "sum", "2", "http", "request", "read", "text", "file"),
    ]
    search = ToolSearch([_tool("rest://temporal.TerminateWorkflowExecution"), _tool("mcp://files.read_text_file")])
    assert _names(search, "terminate the workflow") == ["rest://temporal.TerminateWorkflowExecution"]
    assert _names(search, "read a text") == ["mcp://files.read_text_file"]


def test_stemming_finds_a_tool_whatever_form_of_the_word_the_user_uses(unstemmed: None) -> None:
    tools = [_tool("fs.remove", "Delete a file."), _tool("git.history", "Show the commit logs.")]
    before = ToolSearch(tools)
    assert _names(before, "deleting old logging output") == []  # "deleting" is not "delete", "logging" not "logs"
    _search_text._stem = None  # the stemmer again
    _search_text._stems.clear()
    after = ToolSearch(tools)
    assert _names(after, "deleting old logging output") == ["fs.remove", "git.history"]
    assert _search_text.stems("deleting deleted deletes") == ["delet"] * 3


def test_numbers_and_function_words_are_not_searched_for() -> None:
    assert _search_text.stems("add 17 and 25 for me please") == ["add"]
    search = ToolSearch([_tool("math.add", "Add two numbers."), _tool("v1.status", "Status of API version 1.")])
    assert _names(search, "add 17 and 25") == ["math.add"]


def test_arguments_count_but_less_than_the_name_and_description() -> None:
    tools = [
        _tool("notes.write", "Write a note.", path="Where the note goes."),
        _tool("fs.path_info", "Describe a location."),
    ]
    assert _names(ToolSearch(tools), "path") == ["fs.path_info", "notes.write"]


def test_duplicates_are_collapsed_into_the_first_and_named_as_also() -> None:
    same = "Get the cluster's info."
    tools = [
        _tool("rest://t.GetClusterInfo", same),
        _tool("rest://t.GetClusterInfo_2", same),
        _tool("rest://t.GetSystemInfo", "Get the system's info."),
        _tool("rest://u.GetClusterInfo", same, namespace="Another argument: another tool."),
    ]
    hits = ToolSearch(tools).search("cluster info")
    assert [hit["name"] for hit in hits] == [
        "rest://t.GetClusterInfo",
        "rest://u.GetClusterInfo",
        "rest://t.GetSystemInfo",
    ]
    assert hits[0]["also"] == ["rest://t.GetClusterInfo_2"]
    assert "also" not in hits[1]
    assert ToolSearch(tools).description("rest://t.GetClusterInfo_2")["name"] == "rest://t.GetClusterInfo_2"


def test_results_give_the_name_the_first_sentence_and_the_required_arguments() -> None:
    tool = _tool(
        "rest://temporal.TerminateWorkflowExecution", "Terminates a workflow.\n\nAt length, more.", namespace=""
    )
    [hit] = ToolSearch([tool]).search("terminate workflow")
    assert hit == {
        "name": "rest://temporal.TerminateWorkflowExecution",
        "description": "Terminates a workflow.",
        "required": ["namespace"],
    }


def test_excluded_tools_leave_room_for_the_next_ones() -> None:
    tools = [_tool(f"svc{i}.weather", f"Weather forecast number {i}.") for i in range(8)]
    first = _names(ToolSearch(tools, limit=3), "weather forecast")
    again = ToolSearch(tools, limit=3).search("weather forecast", exclude=set(first))
    assert len(again) == 3
    assert not {hit["name"] for hit in again} & set(first)


class _Toy:
    """Two dimensions, "stopping" and "reading": a real ranking by cosine, of a toy model."""

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        stop, read = ("kill", "stop", "terminat", "halt"), ("read", "show", "open")
        return [[float(any(w in t.lower() for w in stop)), float(any(w in t.lower() for w in read))] for t in texts]


def test_fusion_adds_what_the_meaning_finds_and_puts_what_both_agree_on_first() -> None:
    tools = [
        _tool("wf.halt_run", "Halt a run."),  # the meaning matches "kill"; no word does
        _tool("wf.terminate_workflow", "Terminate a workflow."),  # both
        *(_tool(f"wf.open_file{i}", f"Open file {i}.") for i in range(5)),  # far from "kill" in meaning
        _tool("wf.show_workflow", "Show a workflow."),  # a word matches; the meaning does not (last of 8)
    ]
    words_only = _names(ToolSearch(tools), "kill that workflow")
    assert set(words_only) == {"wf.show_workflow", "wf.terminate_workflow"}
    fused = _names(ToolSearch(tools, embedder=_Toy()), "kill that workflow")
    assert fused[0] == "wf.terminate_workflow"  # both rankings put it near the top
    assert "wf.halt_run" in fused[:2]  # found by meaning alone, above a tool that only shares a word
    assert fused.index("wf.halt_run") < fused.index("wf.show_workflow")


GIT = [
    _tool("git.git_status", "Shows the working tree status."),
    _tool("git.git_commit", "Records changes to the repository."),
    _tool("git.git_diff", "Shows differences between commits."),
    _tool("files.directory_tree", "Get a recursive tree view of files and directories."),
    _tool("billing.change_plan", "Change the customer's plan."),
]


def test_a_typo_the_catalogue_can_tell_is_corrected() -> None:
    search = ToolSearch(GIT)
    assert _names(search, "git stauts")[0] == "git.git_status"  # two letters swapped
    assert _names(search, "show the dirctory tree")[0] == "files.directory_tree"  # a letter dropped, long word
    assert search._corrected("git stauts") == "git status"


def test_real_words_are_not_corrected_into_the_catalogues() -> None:
    search = ToolSearch(GIT)
    # One changed letter away from catalogue words ("change", "status"... "right" / "might"), but words of their own.
    for query in ("charge the card", "what is the statue", "right now", "commits", "Deleting"):
        assert search._corrected(query) == query
    assert _names(search, "charge the card") == []  # not "change plan"


WEB = [
    _tool("web.fetch", "Fetch a web page and return its text.", url="The page's URL."),
    _tool("data.examples", "Example organisation records for demos."),
    _tool("fs.read", "Read a text file.", path="The file's path."),
    _tool("notes.today", "Today's notes, as text."),
]


def test_a_url_or_a_path_in_a_request_searches_for_what_takes_one() -> None:
    search = ToolSearch(WEB)
    assert _search_text.plain("summarise https://example.org/about please") == "summarise url please"
    assert _names(search, "summarise https://example.org/about")[0] == "web.fetch"  # not the "example ... org" one
    assert _names(search, "get api.example.org/v1/items")[0] == "web.fetch"
    assert _names(search, "show me ./notes/today.txt")[0] == "fs.read"  # a path, not today's notes
    assert _search_text.plain("and/or, e.g. node.js 1.2") == "and/or, e.g. node.js 1.2"  # not values


def test_looking_for_values_in_a_query_is_linear() -> None:
    # A regex with nested repetition took ~30 ms on the first of these at 1,000 characters, growing as the square.
    for hostile in ("a." * 500, "a-" * 499 + ".com/", "/a" * 500, "http://" + "a" * 993):
        assert len(_search_text.plain(hostile)) <= len(hostile)
    assert _search_text.plain("a." * 500) == "a." * 500


class _Words:
    """A toy embedder: a text's vector counts its words, each word hashed to one of 256 dimensions."""

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        rows = []
        for text in texts:
            row = [0.0] * 256
            for word in _search_text.words(text):
                row[sum(map(ord, word)) % 256] += 1.0
            rows.append(row)
        return rows


def test_over_a_large_catalogue_the_shortlist_finds_what_comparing_every_tool_finds() -> None:
    nouns = ["workflow", "file", "branch", "schedule", "namespace", "queue", "worker", "commit", "image", "note"]
    verbs = ["create", "delete", "list", "describe", "update", "pause", "reset", "count", "start", "stop"]
    tools = [
        _tool(f"s{i}.{verb}_{noun}", f"{verb.title()} a {noun} on server {i}.")
        for i in range(10)
        for verb in verbs
        for noun in nouns
    ]  # 1,000 tools
    shortlisted = ToolSearch(tools, embedder=_Words(), limit=10)
    assert shortlisted._coarse is not None
    exact = ToolSearch(tools, embedder=_Words(), limit=10)
    exact._coarse = None  # every tool compared view by view
    for verb, noun in zip(verbs, nouns, strict=True):
        found = _names(shortlisted, f"{verb} {noun}")
        # The same ten (equal scores may come out in another order: the two passes round differently).
        assert set(found) == set(_names(exact, f"{verb} {noun}"))
        assert set(found) == {f"s{i}.{verb}_{noun}" for i in range(10)}


def test_a_result_changed_by_the_caller_is_shown_unchanged_next_time() -> None:
    search = ToolSearch([*GIT, _tool("git.status_again", "Shows the working tree status.")])
    first = search.search("working tree status")
    first[0]["description"] = "changed"
    first[0]["also"].append("changed")
    again = search.search("working tree status")
    assert again[0]["description"] == "Shows the working tree status."
    assert again[0]["also"] == ["git.status_again"]


class _Recording(_Words):
    """The toy embedder, noting the texts it is given; a sentence encoder's ``name_view = False``."""

    name_view = False

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return super().__call__(texts)


def test_an_embedder_without_a_name_view_gets_each_tool_once_with_its_description() -> None:
    recording = _Recording()
    search = ToolSearch(GIT, embedder=recording)
    assert recording.seen == [_search_text.summary(tool) for tool in GIT]  # no name-only view
    assert _names(search, "working tree status")[0] == "git.git_status"
    both = _Words()
    assert ToolSearch(GIT, embedder=both)._matrix.shape == (2 * len(GIT), 256)  # type: ignore[union-attr]


def test_a_short_form_the_tools_names_write_is_searched_as_written() -> None:
    """ "org" is spelt out as "organization" for tools that say so, and kept for a catalogue whose names say "org"."""
    short = [_tool("vault.list_org_members", "List all members."), _tool("vault.list_items", "List all items.")]
    assert _names(ToolSearch(short), "the org") == ["vault.list_org_members"]
    spelt = [_tool("hub.list_members", "List an organization's members."), _tool("hub.list_orgs", "List groups.")]
    assert _names(ToolSearch(spelt), "the org")[0] == "hub.list_members"


def test_bm25s_best_are_the_tools_sharing_a_word_best_first_ties_by_place() -> None:
    scores = np.array([0.0, 3.0, 1.0, 3.0, 0.0, 2.0], dtype=np.float32)
    assert _top_found(scores, 2) == [1, 3]
    assert _top_found(scores, 5) == [1, 3, 5, 2]  # fewer share a word than were asked for: no zero comes along
    assert _top_found(scores, 10) == [1, 3, 5, 2]
    assert _top_found(np.zeros(4, dtype=np.float32), 2) == []


class _Blind:
    """An embedder that sees no meaning in anything (every vector zero): the words alone decide."""

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return [[0.0] * 8 for _ in texts]


def test_with_an_embedder_the_users_own_word_outranks_the_word_the_vocabulary_added() -> None:
    # "add" and "create" are as common as each other here, so at equal weight the vocabulary's "create" (added to
    # "add") would tie with the user's "add", and the first listed, create_note, come first; the user said "add".
    tools = [
        _tool("notes.create_note", "Create a note."),
        _tool("notes.add_note", "Add a note."),
        *(_tool(f"math.add_{i}", f"Add numbers {i}.") for i in range(2)),
        *(_tool(f"files.create_{i}", f"Create file {i}.") for i in range(2)),
        *(_tool(f"misc.note_{i}", f"Note {i}.") for i in range(6)),
    ]
    assert _names(ToolSearch(tools, embedder=_Blind()), "add a note")[0] == "notes.add_note"
    # BM25 alone has no meaning to carry the user from "add" to "create": the vocabulary's words count in full there.
    assert {"notes.add_note", "notes.create_note"} <= set(_names(ToolSearch(tools), "add a note")[:2])
