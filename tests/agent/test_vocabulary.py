"""The field's vocabulary: abbreviations spelt out, synonyms added, actions read from requests and tool names."""

from __future__ import annotations

from kavalai.agent._vocabulary import ABBREVIATIONS, ACTIONS, SYNONYMS, action, expand, tool_action


def test_the_tables_map_single_lower_case_words() -> None:
    for table in (ABBREVIATIONS, SYNONYMS):
        for word, meaning in table.items():
            assert word == word.lower(), word
            assert word.isalnum(), word
            assert meaning == meaning.lower(), word
            assert meaning.split(), word
    assert not set(ABBREVIATIONS) & set(SYNONYMS)
    for short in ("pr", "mr", "repo", "db", "k8s", "env", "dm"):  # the ones the issue names
        assert short in ABBREVIATIONS


def test_expand_spells_out_whole_words_only() -> None:
    assert expand("open a PR for my repo") == "open a pull request for my repository"
    assert expand("DM Bob, the k8s DB is down") == "direct message Bob, the kubernetes database is down"
    assert expand("make a folder") == "make a folder directory"
    assert expand("kill it, how many are left") == "kill terminate stop it, how many count are left"
    # Inside file names, paths and URLs nothing changes.
    for value in ("notes.db", "src/env/x", "k8s.io", "pr-12", "my_repo"):
        assert expand(value) == value


def test_the_action_of_a_request_and_of_a_tool() -> None:
    assert action(["file", "a", "new", "bug"]) == "create"
    assert action(["kick", "off", "the", "dag"]) == "start"
    assert action(["get", "rid", "of", "it"]) == "read"  # the first verb decides, as written
    assert action(["forget", "carol"]) == "delete"
    assert action(["the", "weather"]) is None
    assert tool_action(["slack", "post", "message"]) == "create"
    assert tool_action(["kubectl", "get"]) == "read"
    assert tool_action(["trigger", "dag", "run"]) == "start"
    assert tool_action(["config", "helper"]) is None
    assert set(ACTIONS) == {"create", "start", "update", "delete", "read"}
