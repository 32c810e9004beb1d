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

Two more tables carry what a single word does not: :data:`VERBS` gives a request's verb the verbs tools are named with
("kill" also searches for "stop", "add" for "create"), and :data:`PHRASES` reads the field's phrasal verbs and
set phrases ("kick off", "get rid of", "let the team know", "open a bug"), adding the words tools use for them.
All four tables are merged at import into one lookup per word (:func:`expand` reads each word once, with one regular
expression for the phrases: a few microseconds a query).

To extend a table: add what users of the field write anywhere (a short form in common use, a verb and the verb tools
say for it, a phrasal verb), never a word picked because a benchmark request missed; keep each key one lower-case
word (:data:`PHRASES`: whole words, lower case) and each value the words to search for; tests/agent/test_vocabulary.py
checks the tables' shape.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from itertools import chain
from typing import Final, Literal

__all__ = [
    "ABBREVIATIONS",
    "ACTIONS",
    "PHRASES",
    "SYNONYMS",
    "VERBS",
    "Action",
    "action",
    "expand",
    "expand_apart",
    "expand_both",
    "tool_action",
]

Action = Literal["create", "start", "update", "delete", "read"]
#: The kinds of action, in the order a request's words are weighed.
ACTIONS: Final[tuple[Action, ...]] = ("create", "start", "update", "delete", "read")

#: Short forms of the field and what they stand for (the query reads the long form; a short form tools write too,
#: such as "info" or "ci", goes in :data:`SYNONYMS` instead, which keeps it).
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
    "es": "elasticsearch",
    "gcal": "google calendar",
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
    # short forms that tools write too: kept, and the long form added
    "pg": "postgres",
    "postgresql": "postgres",
    "mongo": "mongodb",
    "gdrive": "google drive",
    "gdoc": "google doc",
    "gdocs": "google docs",
    "ci": "continuous integration pipeline",
    "infra": "infrastructure",
    "txn": "transaction",
    "txns": "transactions",
    "qty": "quantity",
    "desc": "description",
    "info": "information",
    "todo": "task",
    "todos": "tasks",
    "doc": "document",
    "docs": "documents documentation",
    "board": "project",
    "card": "item",
    "teammate": "user member",
    "teammates": "users members",
    "colleague": "user member",
    "customer": "contact",
    "customers": "contacts",
    "email": "mail message",
    "inbox": "mail messages",
    "meeting": "event calendar",
    "appointment": "event calendar",
    "alert": "monitor",
    "alerts": "monitors",
    "spreadsheet": "sheet",
    "trash": "delete",
    "tell": "send message",
    "notify": "send notification",
}

#: A request's verbs and the verbs tools are named with for the same act: each key also searches for its value's
#: words (a verb already in the request is not added twice).
VERBS: Final[dict[str, str]] = {
    **dict.fromkeys(("add", "new", "make", "raise", "spawn"), "create"),
    **dict.fromkeys(("kick", "launch", "trigger", "fire", "invoke"), "run start"),
    **dict.fromkeys(("rerun", "retry"), "run"),
    **dict.fromkeys(("remove", "erase", "destroy", "drop", "purge", "wipe", "rm"), "delete"),
    **dict.fromkeys(("change", "edit", "modify", "alter", "tweak", "amend", "adjust"), "update"),
    **dict.fromkeys(("halt", "abort", "cancel", "terminate"), "stop"),
    **dict.fromkeys(("show", "display", "see", "fetch", "retrieve"), "get"),
    **dict.fromkeys(("find", "look", "lookup", "locate"), "search"),
    **dict.fromkeys(("announce", "ping", "dm"), "send message"),
    **dict.fromkeys(("write", "save"), "create"),
}

#: The field's phrasal verbs and set phrases (whole words, lower case, ``\\w+`` standing for any one word) and the
#: words tools say for them; the phrase stays in the query, the words are put before it (the first verb of a request
#: is the action it asks for: "get rid of" deletes).
PHRASES: Final[dict[str, str]] = {
    "kick off": "start run trigger",
    "spin up": "create start",
    "fire up": "start",
    "boot up": "start",
    "tear down": "delete",
    "shut down": "stop",
    "get rid of": "delete remove",
    "clean up": "delete cleanup",
    "wipe out": "delete",
    "look up": "get search",
    "look at": "get",
    "look into": "get",
    "find out": "get",
    "check on": "get status",
    "log in": "login",
    "sign in": "login",
    "log out": "logout",
    "sign out": "logout",
    "sign up": "register create",
    "set up": "create configure",
    "turn on": "enable",
    "turn off": "disable",
    "switch on": "enable",
    "switch off": "disable",
    "put up": "create publish",
    "take down": "delete unpublish",
    "roll back": "reset revert",
    "roll out": "deploy",
    "ship it": "deploy",
    "write down": "create note",
    "jot down": "create note",
    "let \\w+ know": "send message notify",
    "let \\w+ \\w+ know": "send message notify",
    "open a": "create",
    "open an": "create",
    "open new": "create",
    "file a": "create",
    "file an": "create",
    "leave a": "create add",
    "leave an": "create add",
    "how many": "count",
    "how far": "distance",
    "how long": "duration",
}

# A request's verbs (and phrases' first words) by the action they ask for; "open" and "file" are left out: "open
# the report" reads, "open a bug" creates, and the word alone does not say which (PHRASES adds "create" after
# "open a").
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


def _lookup() -> dict[str, tuple[str, str]]:
    """Each word of the tables and what it becomes: the word that replaces it (its long form, for an abbreviation;
    "" to keep it) and the words added after it."""
    table = {word: ("", also) for word, also in VERBS.items()}
    for word, also in SYNONYMS.items():
        table[word] = ("", f"{table[word][1]} {also}" if word in table else also)
    for word, long in ABBREVIATIONS.items():  # "dm" reads "direct message", and its verbs follow ("send message")
        table[word] = (long, table[word][1] if word in table else "")
    return table


_LOOKUP: Final = _lookup()
# A word standing alone: not part of a file name, a path or a URL ("notes.md", "src/db", "k8s.io").
_TOKEN: Final = re.compile(r"(?<![\w./:-])[A-Za-z0-9]+(?![\w/:-]|\.\w)")


# Each phrase's first word, and the phrases it starts (longest first), each as a pattern of whole words read from
# that word on, and the words added after it.
def _starts() -> dict[str, list[tuple[re.Pattern[str], str]]]:
    found: dict[str, list[tuple[re.Pattern[str], str]]] = {}
    for phrase, also in sorted(PHRASES.items(), key=lambda item: -len(item[0])):
        words = phrase.split()
        pattern = r"\s+".join(words) + r"(?![\w/:-]|\.\w)"
        found.setdefault(words[0], []).append((re.compile(pattern, re.IGNORECASE), also))
    return found


_STARTS: Final = _starts()


def expand(query: str, kept: Collection[str] = ()) -> str:
    """``query`` with each abbreviation of :data:`ABBREVIATIONS` spelt out, each word of :data:`SYNONYMS` and
    :data:`VERBS` followed by its other words, and each phrase of :data:`PHRASES` followed by the words tools say for
    it ("open a PR for my repo" -> "create open a pull request for my repository"). An abbreviation in ``kept`` (one
    the catalogue's tools write themselves: ``list_org_members``) stays beside its long form ("org organization")."""
    return "".join(chain.from_iterable(_expanded(query, kept)))


def expand_apart(query: str, kept: Collection[str] = ()) -> tuple[str, str]:
    """:func:`expand`'s query in two parts: the user's words (abbreviations spelt out, which stand for the user's
    own word) and the words the tables added (synonyms, tools' verbs, phrases' words), which a ranking may weigh
    lower: they are a guess at what the user meant, the user's own words are what was said."""
    return expand_both(query, kept)[1:]


def expand_both(query: str, kept: Collection[str] = ()) -> tuple[str, str, str]:
    """:func:`expand` and :func:`expand_apart`'s two parts, the query read once (a search wants all three)."""
    pieces = _expanded(query, kept)
    own = "".join(text for text, _ in pieces)
    added = " ".join(also for _, also in pieces if also)
    return "".join(chain.from_iterable(pieces)), own, added


def _expanded(query: str, kept: Collection[str]) -> list[tuple[str, str]]:
    """``query`` in pieces, each the user's text (abbreviations spelt out) and the words the tables add after it
    (phrases' words come first: :func:`expand` puts them before the phrase)."""
    out: list[tuple[str, str]] = []
    done = 0  # how far the query is copied to out
    for match in _TOKEN.finditer(query):
        if match.start() < done:
            continue  # a word of a phrase already read
        word = match.group().lower()
        for pattern, also in _STARTS.get(word, ()):
            phrase = pattern.match(query, match.start())
            if phrase is not None:
                out += [(query[done : match.start()], also), (" " + phrase.group(), "")]
                done = phrase.end()
                break
        else:
            if word in _LOOKUP:
                long, also = _LOOKUP[word]
                if long and word in kept:
                    long = f"{match.group()} {long}"
                out.append((query[done : match.start()] + (long or match.group()), f" {also}" if also else ""))
                done = match.end()
    out.append((query[done:], ""))
    return out


def action(words: list[str]) -> Action | None:
    """The action a request's words ask for: its first word that names one (``None`` when none does)."""
    return _first(words, _REQUEST_VERBS)


def tool_action(words: list[str]) -> Action | None:
    """The action a tool's name says it does: the first of its words that is a verb of :data:`_TOOL_VERBS`."""
    return _first(words, _TOOL_VERBS)


def _first(words: list[str], verbs: dict[str, Action]) -> Action | None:
    return next((verbs[word] for word in words if word in verbs), None)
