"""The words tool search compares: names split into words, stop words dropped, words stemmed.

``mcp://files.read_text_file``, ``rest://temporal.TerminateWorkflowExecution`` and ``python://fs.ls`` become words
a user would type (read text file; terminate workflow execution; fs ls), and "deleting", "deleted" and "delete"
become one stem, with the Snowball English stemmer from ``PyStemmer`` (the ``search`` extra; the same stemmer
``bm25s`` offers). Without PyStemmer the words are compared unstemmed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_WORDS",
    "dedupe_key",
    "document_fields",
    "one_line",
    "plain",
    "required_arguments",
    "stems",
    "stems_of",
    "summary",
    "summary_of",
    "tokens",
    "value_words",
    "words",
]

#: A query is cut to this many characters before anything else reads it (a search costs the same for any input).
MAX_QUERY_CHARS: Final = 1_000
#: Of a query's words, only the first this many are searched (the embedder too sees only the text they span).
MAX_QUERY_WORDS: Final = 64
# Lower case runs after a capital, capital runs before one (HTTPRequest -> HTTP Request), digit runs.
_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# English function words that say nothing about what a tool does (bm25s's list, plus a few words of requests).
_STOP: Final = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
        "me",
        "my",
        "i",
        "you",
        "your",
        "please",
        "can",
        "could",
        "would",
        "should",
        "pls",
        "u",
    }
)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s")
# Values in a request that say what kind of thing the tool takes, not what it does: a URL, a path (a file name
# alone is left as it is: on the tuning half, reading it as "file" lost more than it found).
# Each is matched on one whitespace-separated token, from its start (linear in the query's length).
_URL: Final = re.compile(
    r"[a-z][a-z0-9+.-]*://|www\.|(?:(?:[\w-]+\.)+[a-z]{2,6}|localhost|\d+\.\d+\.\d+\.\d+)(?::\d+)?/", re.IGNORECASE
)
_SCHEME: Final = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_FILE: Final = re.compile(r"\.?[\w-]+\.[a-z][a-z0-9]{0,4}", re.IGNORECASE)
_EDGES: Final = "\"'`()<>[]{},;:!?"
_lock = threading.Lock()
_stem: Callable[[list[str]], list[str]] | None = None
_stems: dict[str, str] = {}  # a word as written -> its stem, or "" when it is not searched for
_STEMS_LIMIT: Final = 200_000


def words(text: str) -> list[str]:
    """Lower-case words, splitting URIs, snake_case, kebab-case, camelCase and digits (``getSum2`` -> get sum 2)."""
    return [word.lower() for word in _WORD.findall(text)]


def plain(query: str) -> str:
    """``query`` with URLs and paths replaced by the words "url" and "path": "read this article:
    https://example.org/a/1" searches for a tool that reads a URL, not one about examples (their words are
    :func:`value_words`, searched at a lower weight)."""
    return " ".join(_value_kind(token) or token for token in query.split())


def value_words(query: str) -> str:
    """The words of the URLs and paths in ``query``, which :func:`plain` replaces: "check .circleci/config.yml"
    has "circleci config yml". Of a URL the scheme, ``www`` and the top-level domain are dropped
    ("https://api.github.com/repos" -> "api github repos")."""
    found = []
    for token in query.split():
        kind = _value_kind(token)
        if kind is None:
            continue
        value = token.strip(_EDGES)
        if kind == "url":
            host, _, rest = _SCHEME.sub("", value).partition("/")
            labels = [label for label in host.split(".") if label.lower() != "www"]
            value = " ".join([*(labels[:-1] if len(labels) > 1 else labels), rest])
        found.extend(_WORD.findall(value))
    return " ".join(found)


def _value_kind(token: str) -> str | None:
    """ "url" or "path" for a token that is one, else ``None``."""
    value = token.strip(_EDGES)
    if _URL.match(value):
        return "url"
    if "/" in value and (value.startswith(("/", "~/", "./", "../")) or value.count("/") > 1 or _is_file(value)):
        return "path"
    return None


def _is_file(value: str) -> bool:
    last = value.rsplit("/", 1)[-1]
    return _FILE.fullmatch(last) is not None and not last.replace(".", "").isdigit()


def tokens(text: str) -> list[str]:
    """``text``'s words as written (:func:`words` before lower-casing), for :func:`stems_of`."""
    return _WORD.findall(text)


def stems(text: str, *, limit: int | None = None) -> list[str]:
    """The stems of ``text``'s words that are not stop words, numbers or single letters (at most ``limit`` words
    read): "add 17 and 25" searches for "add"; the numbers are the arguments, not what the tool does."""
    return stems_of(_WORD.findall(text)[:limit])


def stems_of(found: list[str]) -> list[str]:
    """:func:`stems` of words already found (:func:`tokens`)."""
    unknown = [word for word in found if word not in _stems]  # most words of a catalogue are known after a few tools
    if unknown:
        _learn(list(dict.fromkeys(unknown)))
    return [stem for word in found if (stem := _stems[word])]


def _learn(raw: list[str]) -> None:
    """Remember each word's stem ("" for a word not searched for): a catalogue repeats its words, and a word
    stemmed once costs a dict lookup after (indexing 10,000 tools: half the time)."""
    lower = [word.lower() for word in raw]
    kept = [word for word in lower if len(word) > 1 and word not in _STOP and not word.isdigit()]
    stemmed = dict(zip(kept, _stemmer()(kept), strict=True)) if kept else {}
    with _lock:
        if len(_stems) > _STEMS_LIMIT:
            _stems.clear()
        _stems.update((word, stemmed.get(low, "")) for word, low in zip(raw, lower, strict=True))


def _stemmer() -> Callable[[list[str]], list[str]]:
    global _stem
    with _lock:
        if _stem is None:
            try:
                import Stemmer
            except ImportError:  # pragma: no cover - the search extra brings PyStemmer
                _stem = list
            else:
                _stem = Stemmer.Stemmer("english").stemWords
        return _stem


def _properties(description: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = description.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def document_fields(description: Mapping[str, Any]) -> tuple[str, str, str]:
    """A tool's name (the part after the scheme), its description, and its arguments' names and descriptions."""
    name = str(description.get("name", "")).split("://", 1)[-1]
    arguments = []
    for argument, prop in _properties(description).items():
        arguments.append(str(argument))
        if isinstance(prop, Mapping) and isinstance(prop.get("description"), str):
            arguments.append(prop["description"])
    return name, str(description.get("description") or ""), " ".join(arguments)


def summary(description: Mapping[str, Any], *, max_chars: int = 300) -> str:
    """What a tool does, for an embedder: its name's words and the start of its description."""
    name, text, _ = document_fields(description)
    return summary_of(" ".join(words(name)), text, max_chars=max_chars)


def summary_of(name: str, text: str, *, max_chars: int = 300) -> str:
    """:func:`summary` of a name (its words, space-separated) and description already read."""
    return f"{name}. {' '.join(text[: 4 * max_chars].split())[:max_chars]}"


def one_line(text: str, *, max_chars: int = 160) -> str:
    """The first sentence of ``text`` on one line, at most ``max_chars`` characters."""
    flat = " ".join(text.split())
    first = _SENTENCE_END.split(flat, 1)[0]
    return first if len(first) <= max_chars else first[: max_chars - 1].rstrip() + "…"


def required_arguments(description: Mapping[str, Any]) -> list[str]:
    """The names of the arguments a tool requires."""
    schema = description.get("inputSchema")
    required = schema.get("required") if isinstance(schema, Mapping) else None
    return [str(name) for name in required] if isinstance(required, list) else []


def dedupe_key(description: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """Tools with the same description and arguments are one tool offered twice (``X`` and ``X_2``, or one server
    registered under two names); ``None`` for a tool without a description, which is never collapsed."""
    text = " ".join(str(description.get("description") or "").split())
    if not text:
        return None
    return text, tuple(sorted(str(name) for name in _properties(description)))
