"""The field's vocabulary for tool search: abbreviations and synonyms users type, and the actions verbs ask for.

A user writes "open a PR", a tool says ``create_pull_request``; a user writes "k8s", a server is called
``kubernetes``. :data:`ABBREVIATIONS` spells out the short forms common across software tools (each replaced by
its long form before anything reads the query), and :data:`SYNONYMS` adds the field's other word for a thing
("folder" also searches for "directory"). Both tables are general: they list what developers and operators write
anywhere (source control, chat, clusters, databases, files), not the words of any one catalogue, and they were not
chosen by a benchmark. Each entry is one word (lower case) and what it stands for.

:func:`action` reads the action a request asks for, and :func:`tool_action` the action a tool's name says it does,
each as one of :data:`ACTIONS` ("create", "start", "update", "delete", "read"), so the ranking can prefer a tool
that does what was asked ("open a bug" is a create, not ``get_issue``).
"""

from __future__ import annotations

import re
from typing import Final, Literal

__all__ = ["ABBREVIATIONS", "ACTIONS", "SYNONYMS", "Action", "action", "expand", "tool_action"]

Action = Literal["create", "start", "update", "delete", "read"]
#: The kinds of action, in the order a request's words are weighed.
ACTIONS: Final[tuple[Action, ...]] = ("create", "start", "update", "delete", "read")

#: Short forms of the field and what they stand for (the query reads the long form).
ABBREVIATIONS: Final[dict[str, str]] = {
    "pr": "pull request",
    "prs": "pull requests",
    "mr": "merge request",
    "mrs": "merge requests",
    "repo": "repository",
    "repos": "repositories",
    "db": "database",
    "dbs": "databases",
    "k8s": "kubernetes",
    "kube": "kubernetes",
    "env": "environment",
    "envs": "environments",
    "dm": "direct message",
    "dms": "direct messages",
    "msg": "message",
    "msgs": "messages",
    "cfg": "config",
    "conf": "config",
    "dir": "directory",
    "dirs": "directories",
    "auth": "authentication",
    "creds": "credentials",
    "perms": "permissions",
    "deps": "dependencies",
    "img": "image",
    "pic": "image",
    "pics": "images",
    "vm": "virtual machine",
    "ns": "namespace",
    "gh": "github",
    "tz": "timezone",
    "addr": "address",
    "pwd": "password",
    "dl": "download",
    "prod": "production",
    "dev": "development",
    "stg": "staging",
    "tmp": "temporary",
    "stats": "statistics",
    "err": "error",
    "errs": "errors",
    "exec": "execute",
    "proc": "process",
    "svc": "service",
    "org": "organization",
    "orgs": "organizations",
    "acct": "account",
    "req": "request",
    "resp": "response",
    "sched": "schedule",
    "calc": "calculate",
}

#: The field's other words for a thing: each key also searches for its value's words.
SYNONYMS: Final[dict[str, str]] = {
    "folder": "directory",
    "folders": "directories",
    "bug": "issue",
    "bugs": "issues",
    "ticket": "issue",
    "tickets": "issues",
    "photo": "image",
    "picture": "image",
    "link": "url",
    "website": "url page",
    "site": "url page",
    "webpage": "url page",
    "exception": "error",
    "chat": "message",
    # operators' words for what tools call otherwise
    "kill": "terminate stop",
    "nuke": "delete terminate",
    "freeze": "pause",
    "unfreeze": "unpause resume",
    "rewind": "reset",
    "rollback": "reset revert",
    "bulk": "batch",
    "nightly": "schedule",
    "hourly": "schedule",
    "recurring": "schedule",
    "cron": "schedule",
    "history": "log",
    "many": "count",
}

# A request's verbs (and phrases' first words) by the action they ask for; "open" and "file" are left out: "open
# the report" reads, "open a bug" creates, and the word alone does not say which.
_REQUEST_VERBS: Final[dict[str, Action]] = {
    **dict.fromkeys(("create", "new", "make", "add", "raise", "register", "insert", "generate", "post"), "create"),
    **dict.fromkeys(("write", "save", "upload", "fork", "setup"), "create"),
    **dict.fromkeys(("start", "run", "trigger", "kick", "launch", "execute", "rerun", "resume"), "start"),
    **dict.fromkeys(("update", "change", "edit", "modify", "rename", "set", "patch", "replace", "mark"), "update"),
    **dict.fromkeys(("toggle", "enable", "disable", "turn", "switch", "move", "merge", "close"), "update"),
    **dict.fromkeys(("delete", "remove", "drop", "destroy", "erase", "forget", "purge", "rm", "uninstall"), "delete"),
    **dict.fromkeys(("get", "list", "show", "view", "read", "find", "search", "describe", "fetch", "see"), "read"),
    **dict.fromkeys(("retrieve", "which", "what", "who", "display", "look", "count", "lookup"), "read"),
}
# A tool name's verbs by the action they do (the first such word of the name decides).
_TOOL_VERBS: Final[dict[str, Action]] = {
    **dict.fromkeys(("create", "add", "new", "post", "insert", "register", "make", "generate", "fork"), "create"),
    **dict.fromkeys(("write", "upload", "push", "install", "put"), "create"),
    **dict.fromkeys(("start", "run", "trigger", "execute", "exec", "launch", "rerun", "restart"), "start"),
    **dict.fromkeys(("resume", "unpause", "signal"), "start"),
    **dict.fromkeys(("update", "patch", "edit", "modify", "set", "rename", "move", "merge", "replace"), "update"),
    **dict.fromkeys(("toggle", "enable", "disable", "scale", "pause"), "update"),
    **dict.fromkeys(("delete", "remove", "drop", "destroy", "purge", "uninstall", "clear", "cleanup"), "delete"),
    **dict.fromkeys(("get", "list", "show", "read", "find", "search", "describe", "fetch", "retrieve"), "read"),
    **dict.fromkeys(("query", "count", "view", "lookup", "explain"), "read"),
}
# A word standing alone: not part of a file name, a path or a URL ("notes.md", "src/db", "k8s.io").
_TOKEN: Final = re.compile(r"(?<![\w./:-])[A-Za-z0-9]+(?![\w/:-]|\.\w)")


def expand(query: str) -> str:
    """``query`` with each abbreviation of :data:`ABBREVIATIONS` spelt out and each word of :data:`SYNONYMS`
    followed by its synonym ("open a PR for my repo" -> "open a pull request for my repository")."""

    def spell(match: re.Match[str]) -> str:
        word = match.group()
        lower = word.lower()
        if lower in ABBREVIATIONS:
            return ABBREVIATIONS[lower]
        if lower in SYNONYMS:
            return f"{word} {SYNONYMS[lower]}"
        return word

    return _TOKEN.sub(spell, query)


def action(words: list[str]) -> Action | None:
    """The action a request's words ask for: its first word that names one (``None`` when none does)."""
    return _first(words, _REQUEST_VERBS)


def tool_action(words: list[str]) -> Action | None:
    """The action a tool's name says it does: the first of its words that is a verb of :data:`_TOOL_VERBS`."""
    return _first(words, _TOOL_VERBS)


def _first(words: list[str], verbs: dict[str, Action]) -> Action | None:
    return next((verbs[word] for word in words if word in verbs), None)
