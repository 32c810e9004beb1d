"""The field's vocabulary: abbreviations spelt out, synonyms added, actions read from requests and tool names."""

from __future__ import annotations

import re

from kavalai.agent._vocabulary import (
    ABBREVIATIONS,
    ACTIONS,
    PHRASES,
    SYNONYMS,
    VERBS,
    action,
    expand,
    expand_apart,
    tool_action,
)


def test_the_tables_map_single_lower_case_words() -> None:
    for table in (ABBREVIATIONS, SYNONYMS, VERBS):
        for word, meaning in table.items():
            assert word == word.lower(), word
            assert word.isalnum(), word
            assert meaning == meaning.lower(), word
            assert meaning.split(), word
    assert not set(ABBREVIATIONS) & set(SYNONYMS)
    for phrase, meaning in PHRASES.items():  # whole lower-case words (or "\\w+", any one word), two or more
        assert len(phrase.split()) >= 2, phrase
        assert all(re.fullmatch(r"[a-z]+|\\w\+", word) for word in phrase.split()), phrase
        assert meaning == meaning.lower(), phrase
        assert meaning.split(), phrase
    for short in ("pr", "mr", "repo", "db", "k8s", "env", "dm"):  # the ones the issue names
        assert short in ABBREVIATIONS


def test_expand_spells_out_whole_words_only() -> None:
    assert expand("merge my PR into the repo") == "merge my pull request into the repository"
    assert expand("cluster info, then CI") == "cluster info information, then CI continuous integration pipeline"
    assert expand("the k8s DB is down") == "the kubernetes database is down"
    assert expand("a new folder") == "a new create folder directory"
    assert expand("kill it, how many are left") == "kill terminate stop it, count how many are left"
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


def test_verbs_add_the_verbs_tools_are_named_with() -> None:
    assert expand("add a label") == "add create a label"
    assert expand("Remove the cache") == "Remove delete the cache"
    assert expand("DM Bob") == "direct message send message Bob"  # an abbreviation that is a verb too
    assert expand("create a label") == "create a label"  # the tools' own verb: nothing to add


def test_phrases_add_the_words_tools_say_for_them() -> None:
    assert expand("kick off the nightly dag") == "start run trigger kick off the nightly schedule dag"
    assert expand("get rid of old envs") == "delete remove get rid of old environments"
    assert action(expand("get rid of it").split()) == "delete"  # the phrase's verb comes first
    assert expand("open a PR for my repo") == "create open a pull request for my repository"
    assert expand("file a bug") == "create file a bug issue"
    assert expand("let the team know it shipped") == "send message notify let the team know it shipped"
    assert expand("Kick  Off it") == "start run trigger Kick  Off it"  # any case, any spaces
    # A phrase's words inside a path or a file name are not the phrase.
    assert expand("cat kick/off.txt") == "cat kick/off.txt"
    assert expand("open a.txt") == "open a.txt"


def test_a_short_form_the_tools_write_is_kept_beside_its_long_form() -> None:
    assert expand("members of the org") == "members of the organization"
    assert expand("members of the org", {"org"}) == "members of the org organization"
    assert expand("my repo", {"org"}) == "my repository"


def test_expand_apart_keeps_the_users_words_apart_from_the_words_the_tables_add() -> None:
    assert expand_apart("open a PR for my repo") == (" open a pull request for my repository", "create")
    assert expand_apart("kill it, add a label") == ("kill it, add a label", " terminate stop  create")
    assert expand_apart("nothing to see here") == ("nothing to see here", " get")
    assert expand_apart("DM Bob") == ("direct message Bob", " send message")  # the long form is the user's word
    for query in ("kick off the nightly dag", "DM Bob", "members of the org", "open a.txt", ""):
        own, added = expand_apart(query)  # the same words as expand's, in two parts
        assert sorted(own.split() + added.split()) == sorted(expand(query).split())
