"""The second stage of tool search: rare exact words, the server named, the action asked, and the words of values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kavalai.agent import _rescore, _search_text
from kavalai.agent.search import ToolSearch


def _tool(name: str, description: str = "", **arguments: str) -> dict[str, Any]:
    properties = {arg: {"type": "string", "description": text} for arg, text in arguments.items()}
    schema = {"type": "object", "properties": properties, "required": list(arguments)}
    return {"name": name, "description": description, "inputSchema": schema}


def _names(search: ToolSearch, query: str, limit: int = 5) -> list[str]:
    return [hit["name"] for hit in search.search(query, limit=limit)]


class _Against:
    """A toy embedder that finds the tools whose text has ``near`` nearest the query (the text with ``query``), the
    others less near, and those whose text has ``word`` farthest: the embedding ranking puts the exact match last."""

    def __init__(self, word: str, near: str = "dag", query: str = "daily") -> None:
        self.word, self.near, self.query = word, near, query

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text.lower()) for text in texts]

    def _vector(self, text: str) -> list[float]:
        if self.query in text or (self.near in text and self.word not in text):
            return [1.0, 0.0]
        return [0.6, 0.8] if self.word in text else [0.8, 0.6]


class _Same:
    """A toy embedder that finds every text equally near every other."""

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


def _dag_tools() -> list[dict[str, Any]]:
    tools = [_tool(f"airflow.get_dag_{thing}", f"Get the dag's {thing}.") for thing in ("runs", "stats", "source")]
    tools += [_tool(f"airflow.patch_dag_{i}", f"Update dag setting {i}.") for i in range(30)]
    tools += [_tool(f"other{i}.list_items", f"List items of kind {i}.") for i in range(400)]
    return [*tools, _tool("airflow.create_backfill", "Create Backfill")]


def test_a_rare_exact_word_in_a_name_is_never_buried_by_the_meaning() -> None:
    tools = _dag_tools()
    words_only = _names(ToolSearch(tools), "backfill the daily_revenue dag")
    assert words_only[0] == "airflow.create_backfill"
    search = ToolSearch(tools, embedder=_Against("backfill"))
    query = "backfill the daily revenue dag"
    first_stage, _ = search._fused(query, [(query, 1.0)], 50)
    assert first_stage.index(len(tools) - 1) > _rescore.FLOOR  # fusion alone buries it under the dag tools
    assert "airflow.create_backfill" in _names(search, "backfill the daily_revenue dag", limit=3)


def test_the_fusion_adds_scores_so_where_the_meanings_tie_the_words_decide() -> None:
    tools = _dag_tools()
    search = ToolSearch(tools, embedder=_Same())
    query = "backfill the daily revenue dag"
    fused, _ = search._fused(query, [(query, 1.0)], 50)
    words_only, _ = search._lexical([(query, 1.0)], 50)
    assert fused[: len(words_only)] == words_only
    assert fused[0] == len(tools) - 1


def test_the_words_of_a_path_or_a_url_are_kept_and_name_the_server() -> None:
    assert _search_text.value_words("check my .circleci/config.yml for mistakes") == "circleci config yml"
    assert _search_text.value_words("see https://www.github.com/a/b-c and /tmp/x.txt") == "github a b c tmp x txt"
    assert _search_text.value_words("no values here, e.g. node.js") == ""
    tools = [
        _tool("circleci.config_helper", "Analyze and validate a configuration file.", configFile="Its text."),
        *(_tool(f"files{i}.read_file", "Read a file.", path="The file's path.") for i in range(3)),
        _tool("gitlab.get_file_contents", "Get a file from a project.", path="The file's path."),
        _tool("github.get_file_contents", "Get a file from a repository.", path="The file's path."),
    ]
    search = ToolSearch(tools)
    assert _names(search, "check my .circleci/config.yml for mistakes")[0] == "circleci.config_helper"
    assert _names(search, "what's in https://github.com/a/b/blob/main/README.md")[0] == "github.get_file_contents"


def test_the_action_asked_for_is_weighed_against_the_tools_verb() -> None:
    tools = [
        _tool("tracker.get_issue", "Get an issue."),
        _tool("tracker.create_issue", "Create an issue."),
        _tool("tracker.delete_issue", "Delete an issue."),
        _tool("tracker.update_issue", "Update an issue."),
    ]
    asked = {  # each request shares only "issue" with the tools: the action decides
        "add an issue about the login page": "create",
        "show me issue 12": "get",
        "remove issue 12, it was spam": "delete",
        "rename issue 12": "update",
        "issue 12": "get",  # no action asked: the first of equals
    }
    search = ToolSearch(tools)
    assert {query: _names(search, query)[0] for query in asked} == {q: f"tracker.{v}_issue" for q, v in asked.items()}


def test_abbreviations_of_the_field_are_spelt_out() -> None:
    tools = [
        _tool("github.create_pull_request", "Create a new pull request."),
        _tool("gitlab.create_merge_request", "Create a new merge request."),
        _tool("cluster.kubernetes_get", "Get Kubernetes resources."),
        _tool("sql.query_database", "Run a query on the database."),
        _tool("code.create_repository", "Create a repository."),
    ]
    search = ToolSearch(tools)
    queries = ["open a PR", "open an MR", "get the k8s pods", "how many rows in the users table of our DB", "new repo"]
    assert [_names(search, query)[0] for query in queries] == [tool["name"] for tool in tools]


def test_a_server_the_user_names_is_preferred() -> None:
    tools = [
        _tool("github.search_issues", "Search for issues and pull requests."),
        _tool("sentry.search_issues", "Search for grouped issues."),
        _tool("jira.search_issues", "Search issues with JQL."),
    ]
    search = ToolSearch(tools)
    for server in ("github", "sentry", "jira"):
        assert _names(search, f"search the open issues in {server}")[0] == f"{server}.search_issues"
    assert len(_names(search, "search the open issues")) == 3  # named none: all found


def test_the_words_a_request_uses_for_an_action_reach_the_tools_verb() -> None:
    tools = [
        _tool("deploy.get_environment", "Get an environment."),
        _tool("deploy.delete_environment", "Delete an environment."),
        _tool("chat.list_channels", "List the channels of the workspace."),
        _tool("chat.post_message", "Post a message to a channel."),
        _tool("airflow.get_dag", "Get a DAG."),
        _tool("airflow.trigger_dag_run", "Trigger a new DAG run."),
    ]
    search = ToolSearch(tools)
    assert _names(search, "get rid of the staging env")[0] == "deploy.delete_environment"
    assert _names(search, "let the team know in #general that we shipped")[0] == "chat.post_message"
    assert _names(search, "kick off the etl dag")[0] == "airflow.trigger_dag_run"


def test_a_server_named_by_the_start_of_its_name_is_preferred() -> None:
    tools = [
        _tool("opensearch.search", "Search an index with a query."),
        _tool("elasticsearch.search", "Search an index with a query string."),
        _tool("linear.search", "Search an index with a query text."),
    ]
    search = ToolSearch(tools)
    assert _names(search, "search elastic for timeout errors")[0] == "elasticsearch.search"
    assert _names(search, "search the opens index")[0] == "opensearch.search"
    assert _names(search, "search by line")[0] == "opensearch.search"  # "line": too short to name "linear"
    assert _rescore._short_forms({"github", "gitlab", "mongodb"}) == {"githu": "github", "gitla": "gitlab"} | {
        "mongo": "mongodb",
        "mongod": "mongodb",
    }


class _Counting:
    """A toy encoder that puts texts with "halt" near the query and counts what it is asked to encode."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return [[1.0, 0.0] if "halt" in text or "scrap" in text else [0.0, 1.0] for text in texts]


def test_the_optional_reranker_reorders_the_candidates_and_caches_its_vectors() -> None:
    tools = [
        _tool("wf.show_workflow", "Show a workflow."),
        _tool("wf.list_workflows", "List the workflows."),
        _tool("wf.halt_run", "Halt a workflow run."),
    ]
    assert _names(ToolSearch(tools), "scrap the workflow")[0] == "wf.show_workflow"
    encoder = _Counting()
    search = ToolSearch(tools, reranker=encoder)
    assert len(encoder.texts) == 3  # each tool's summary, once
    assert _names(search, "scrap the workflow")[0] == "wf.halt_run"
    assert _names(search, "scrap the workflow")[0] == "wf.halt_run"
    assert encoder.texts[3:] == ["scrap the workflow"]  # the query's vector is kept
    ToolSearch(tools, reranker=encoder)
    assert len(encoder.texts) == 4  # and the tools' vectors, per encoder
