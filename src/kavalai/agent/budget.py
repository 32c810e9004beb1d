"""Output budgets: how much of a tool's result reaches the model, and what happens to the rest.

A result over its budget is either cut, with a notice saying so (``overflow="truncate"``), or kept whole as an
*artifact* (``overflow="artifact"``): the model gets the start of it, the artifact's handle and the
``read_artifact`` tool, with which it pages through the rest. Budgets count characters of the JSON text the model
reads. One :class:`OutputBudget` sets the default and, by URI or glob, the budget of single tools; an agent takes
its own (``Agent(output_budget=...)``) or, failing that, its kernel's (``kernel.output_budget``).

The model reads an artifact only through a handle given in its own run: a store serves only what it wrote (a
handle is 128 random bits, recorded when written), and ``read_artifact`` serves only handles issued in the current
*artifact scope*. Each agent run, and each workflow run with the agents of its nodes, is a scope of its own, so two
agents sharing a budget (a kernel's ``output_budget``) cannot read each other's results. Runs share on purpose:
inside one ``with artifact_scope():`` block, or with ``OutputBudget(share_artifacts=True)`` (any handle the store
wrote). Every bad handle (unknown, another run's, too long, not text) is an error result for the model, whose
message quotes at most :data:`HANDLE_ECHO_CHARS` characters of it.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import anyio

from kavalai.errors import ToolInputError
from kavalai.secrets import redact, redact_data

__all__ = [
    "DEFAULT_BUDGET",
    "HANDLE_ECHO_CHARS",
    "MAX_HANDLE_CHARS",
    "READ_ARTIFACT",
    "ArtifactStore",
    "FileArtifactStore",
    "MemoryArtifactStore",
    "OutputBudget",
    "artifact_scope",
    "model_text",
]

#: The name the model calls to read an artifact (it is handled by the agent, not the kernel).
READ_ARTIFACT: Final = "read_artifact"
#: The longest handle ``read_artifact`` looks up; a longer one is refused unread.
MAX_HANDLE_CHARS: Final = 128
#: The most characters of a refused handle an error message quotes.
HANDLE_ECHO_CHARS: Final = 64
_HANDLE_PREFIX: Final = "artifact://"
_OUR_HANDLE: Final = re.compile(r"artifact://([0-9a-f]{32})")  # what both stores issue: 128 random bits
# Any Python text survives a file and back: a lone surrogate (a file name that is not UTF-8, as os.listdir gives it)
# is written as its 3 bytes and read back as itself.
_ANY_TEXT: Final = "surrogatepass"


class _Scope:
    """The handles issued to one run (or one ``artifact_scope()`` block); gone with it."""

    __slots__ = ("handles",)

    def __init__(self) -> None:
        self.handles: set[str] = set()


_scope: ContextVar[_Scope | None] = ContextVar("kavalai_artifact_scope", default=None)


@contextmanager
def artifact_scope() -> Iterator[None]:
    """A scope of artifacts shared by every run inside the block: an agent run reads the handles issued to any
    run before it in the block (by default each run is a scope of its own).

    Example::

        with artifact_scope():
            first = await researcher.run("Collect the logs")
            second = await reviewer.run("Review the logs")  # may read what the first run kept
    """
    token = _scope.set(_Scope())
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def run_scope() -> Iterator[None]:
    """The artifact scope of a run: the current one when the run is inside another (an agent node in a workflow
    run, an ``artifact_scope()`` block), else a new one for the run."""
    if _scope.get() is not None:
        yield
        return
    with artifact_scope():
        yield


def _quoted(handle: str) -> str:
    """``handle`` as an error message may quote it: at most :data:`HANDLE_ECHO_CHARS` characters, printable."""
    shown = handle[:HANDLE_ECHO_CHARS].encode("unicode_escape").decode("ascii")[:HANDLE_ECHO_CHARS]
    return repr(shown) if len(handle) <= HANDLE_ECHO_CHARS else f"{shown!r}... ({len(handle):,} characters)"


class ArtifactStore(Protocol):
    """Where results over their budget are kept whole.

    A store serves only what it wrote: ``get`` raises ``KeyError`` for any handle its ``put`` did not return
    (never reading a path or key made of the handle's text). :class:`OutputBudget` also checks every handle the
    model sends before it reaches the store (its length, and that it was issued in the model's own run).
    """

    async def put(self, text: str) -> str:
        """Keep ``text``; return its handle (``artifact://...``)."""
        ...

    async def get(self, handle: str) -> str:
        """The text kept under ``handle``. Raises ``KeyError`` for a handle this store did not issue."""
        ...


class MemoryArtifactStore:
    """Artifacts in memory, for as long as the store lives (an agent's default)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    async def put(self, text: str) -> str:
        """Keep ``text``; return its handle."""
        handle = f"{_HANDLE_PREFIX}{secrets.token_hex(16)}"
        self._texts[handle] = text
        return handle

    async def get(self, handle: str) -> str:
        """The text kept under ``handle``."""
        if not isinstance(handle, str) or len(handle) > MAX_HANDLE_CHARS:
            raise KeyError(handle if isinstance(handle, str) else repr(handle))
        return self._texts[handle]


class FileArtifactStore:
    """Artifacts as files in ``directory`` (created with mode 0700; each file 0600), surviving the process.

    The store serves only the files it wrote: those its own ``put`` named, and those listed in the directory's
    manifest (``.kavalai-artifacts``, which ``put`` appends to), so another store on the same directory (the next
    process) reads them too. Any other file in the directory, whatever its name, is never served.
    """

    MANIFEST: Final = ".kavalai-artifacts"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._written: set[str] = set()

    async def put(self, text: str) -> str:
        """Write ``text`` to a new file; return its handle."""
        name = secrets.token_hex(16)
        await anyio.to_thread.run_sync(self._write, name, text)
        self._written.add(name)
        return f"{_HANDLE_PREFIX}{name}"

    async def get(self, handle: str) -> str:
        """The text of the file behind ``handle``."""
        found = _OUR_HANDLE.fullmatch(handle) if isinstance(handle, str) else None
        if found is None:  # a handle is ours or nothing: never a path the model made up
            raise KeyError(handle[:HANDLE_ECHO_CHARS] if isinstance(handle, str) else repr(handle))
        name = found.group(1)
        try:
            return await anyio.to_thread.run_sync(self._read, name)
        except (OSError, UnicodeDecodeError):
            raise KeyError(handle) from None

    def _write(self, name: str, text: str) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(self.directory / f"{name}.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8", errors=_ANY_TEXT) as file:
            file.write(text)
        manifest = os.open(self.directory / self.MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(manifest, "a", encoding="ascii") as file:
            file.write(f"{name}\n")  # one short line in one append: whole, even with other writers

    def _read(self, name: str) -> str:
        if name not in self._written and name not in self._manifest():
            raise FileNotFoundError(name)
        with os.fdopen(_open_regular(self.directory / f"{name}.txt"), encoding="utf-8", errors=_ANY_TEXT) as file:
            return file.read()

    def _manifest(self) -> set[str]:
        """The names the directory's manifest lists (another store on this directory wrote them)."""
        try:
            with os.fdopen(_open_regular(self.directory / self.MANIFEST), encoding="ascii", errors="replace") as file:
                text = file.read()
        except FileNotFoundError:
            return set()
        return {line for line in text.splitlines() if _OUR_HANDLE.fullmatch(f"{_HANDLE_PREFIX}{line}")}


def _open_regular(path: Path) -> int:
    """A descriptor of the regular file at ``path``, for reading; ``OSError`` for anything else (a link, a FIFO
    swapped in, which a plain open would wait on for ever, a device, a directory), checked on what was opened."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


@dataclass(frozen=True)
class OutputBudget:
    """How many characters of a tool result reach the model.

    Attributes:
        max_chars: the default budget (characters of the result's JSON text).
        per_tool: budgets of single tools, by URI or glob (``{"mcp://search.*": 4000}``); the first match wins.
        overflow: ``"truncate"`` cuts the result, with a notice; ``"artifact"`` keeps it whole in ``store`` and
            gives the model its start, its handle and the ``read_artifact`` tool.
        store: where artifacts are kept; a :class:`MemoryArtifactStore` by default.
        share_artifacts: ``read_artifact`` serves any handle the store wrote, whichever run it was issued to
            (by default only those issued in the model's own run, see :func:`artifact_scope`).
    """

    max_chars: int = 20_000
    per_tool: Mapping[str, int] = field(default_factory=dict)
    overflow: Literal["truncate", "artifact"] = "truncate"
    store: ArtifactStore = field(default_factory=MemoryArtifactStore)
    share_artifacts: bool = False

    def __post_init__(self) -> None:
        limits = [self.max_chars, *self.per_tool.values()]
        if any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in limits):
            raise ValueError(f"output budgets are positive numbers of characters, not {limits!r}")
        if self.overflow not in ("truncate", "artifact"):
            raise ValueError(f"overflow is 'truncate' or 'artifact', not {self.overflow!r}")

    def limit_for(self, uri: str) -> int:
        """The budget of the tool at ``uri``."""
        for pattern, limit in self.per_tool.items():
            if pattern == uri or fnmatch.fnmatchcase(uri, pattern):
                return limit
        return self.max_chars

    async def fit(self, uri: str, text: str) -> str:
        """``text`` as the model gets it: whole when within budget, else cut (and stored) with a notice."""
        limit = self.limit_for(uri)
        if len(text) <= limit:
            return text
        handle = await self.keep(text) if self.overflow == "artifact" else None
        return f"{text[:limit]}\n{self.notice(f'the result of {uri}', len(text), limit, handle)}"

    async def keep(self, text: str) -> str:
        """Keep ``text`` in the store; return its handle, issued to the current run (its artifact scope)."""
        handle = await self.store.put(text)
        scope = _scope.get()
        if scope is not None:
            scope.handles.add(handle)
        return handle

    def notice(self, what: str, total: int, shown: int, handle: str | None = None, *, readable: bool = True) -> str:
        """The note that follows a cut text: ``what`` (``"the result of python://x"``) had ``total`` characters,
        the first ``shown`` of which are shown; ``handle``, the artifact keeping it whole, if there is one.

        ``readable``: whether the model can call ``read_artifact`` (an agent can; a workflow's ``llm`` node, which
        has no tools, cannot: its note names the artifact and does not offer to read on).
        """
        cut = f"[Truncated: {what} has {total:,} characters; only the first {shown:,} are shown."
        if handle is None:
            return f"{cut} Ask for less (filters, paging) if you need the rest.]" if readable else f"{cut}]"
        if not readable:
            return f"{cut} It is kept whole as {handle}.]"
        return (
            f"[{what[:1].upper()}{what[1:]} has {total:,} characters; the first {shown:,} are shown. The whole "
            f"result is {handle}: call {READ_ARTIFACT} with handle={handle!r}, offset={shown} to read on.]"
        )

    async def read(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a ``read_artifact`` call: a page of an artifact (at most the default budget).

        Raises:
            ToolInputError: the handle is not one issued in this run (or, with ``share_artifacts``, not one the
                store wrote), is longer than :data:`MAX_HANDLE_CHARS`, or is not text; its message (for the model)
                is under 200 characters and quotes at most :data:`HANDLE_ECHO_CHARS` of the handle.
        """
        handle = arguments.get("handle")
        offset = max(0, _int(arguments.get("offset"), 0))
        size = min(max(1, _int(arguments.get("limit"), self.max_chars)), self.max_chars)
        text = await self._text(handle)
        page = text[offset : offset + size]
        following = offset + len(page)
        return {
            "handle": handle,
            "offset": offset,
            "text": page,
            "total": len(text),
            "next_offset": following if following < len(text) else None,
        }

    async def _text(self, handle: object) -> str:
        if not isinstance(handle, str) or not handle:
            raise ToolInputError(
                "Give read_artifact the handle (artifact://...) given with a result.", uri=READ_ARTIFACT
            )
        missing = f"There is no artifact {_quoted(handle)} in this run: use a handle given with a result."
        if len(handle) > MAX_HANDLE_CHARS:
            raise ToolInputError(missing, uri=READ_ARTIFACT)
        if not self.share_artifacts:
            scope = _scope.get()
            if scope is None or handle not in scope.handles:
                raise ToolInputError(missing, uri=READ_ARTIFACT)
        try:
            return await self.store.get(handle)
        except (LookupError, OSError, ValueError):  # a store's "not mine", whatever its kind
            raise ToolInputError(missing, uri=READ_ARTIFACT) from None

    def read_artifact_spec(self) -> dict[str, Any]:
        """The description of the ``read_artifact`` tool, as the kernel describes tools."""
        return {
            "name": READ_ARTIFACT,
            "description": "Read part of a tool result that was too long to show whole, by its artifact handle.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "handle": {"type": "string", "description": "The artifact://... handle given with the result."},
                    "offset": {"type": "integer", "minimum": 0, "description": "The first character to read."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many characters to read."},
                },
                "required": ["handle"],
            },
        }


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


#: The budget of what kavalai itself makes for a model (``search_tools`` results, resource reads, code-mode output,
#: errors, refusals) when no :class:`OutputBudget` is set: these are bounded whatever the setting.
DEFAULT_BUDGET: Final = OutputBudget()


def model_text(
    budget: OutputBudget | None, uri: str, text: str, *, ours: bool, limit: int | None = None, what: str | None = None
) -> str:
    """The model-facing gate: ``text`` (a tool result, an error, a search result, a resource read, a refusal) as
    the model reads it, within ``budget``'s limit for ``uri``.

    ``ours``: kavalai made the text (not a tool's result), so it is bounded by :data:`DEFAULT_BUDGET` when
    ``budget`` is ``None``; a tool's own result is whole when no budget is set (the documented opt-out). The text
    is cut, with a notice; an agent with a budget keeps a tool's successful result as an artifact instead
    (:meth:`OutputBudget.fit`). ``limit`` replaces the budget's limit (error texts have one of their own);
    ``what`` names the text in the notice (by default "the result of ``uri``"). Kavalai's own text crosses the
    secret gate first, before any cut (a search result quotes tools' descriptions, which never show a secret).
    """
    if budget is None:
        if not ours:
            return text
        budget = DEFAULT_BUDGET
    if ours:  # kavalai's own text (a search result quoting tools' descriptions): the secret gate's, masked first
        text = redact(text)
    limit = budget.limit_for(uri) if limit is None else limit
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n{budget.notice(what or f'the result of {uri}', len(text), limit)}"


#: The longest tool description a model reads (a server's text: a hostile one could fill the context with it).
MAX_DESCRIPTION_CHARS: Final = 8_000


#: The longest title or description inside a tool's input schema (a property's, a definition's), and the most
#: characters all of them together show per tool; each cut one is followed by a notice the model reads.
MAX_SCHEMA_TEXT_CHARS: Final = 8_000
MAX_SCHEMA_TEXTS_CHARS: Final = 32_000
_SCHEMA_TEXTS: Final = frozenset({"title", "description"})
#: Keys whose values are data, not schemas (a ``default`` may well hold a ``"description"`` key of its own).
_SCHEMA_DATA: Final = frozenset({"default", "examples", "example", "enum", "const"})
#: Keys whose values map names (which may be ``"title"``) to schemas.
_SCHEMA_NAMED: Final = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def model_description(description: Mapping[str, Any]) -> dict[str, Any]:
    """A tool description (an entry of ``describe_tools``) with its texts through the model-facing gate: the
    ``description`` cut at :data:`MAX_DESCRIPTION_CHARS`, each title and description inside its ``inputSchema`` at
    :data:`MAX_SCHEMA_TEXT_CHARS` and all of those at :data:`MAX_SCHEMA_TEXTS_CHARS`, each cut text with a notice.
    An unchanged schema is the same object. Every registered secret in it is masked first (the secret gate)."""
    description = redact_data(description)  # a tool description never shows a secret (docs/safety.md), masked whole
    name = str(description.get("name", "a tool"))
    bounded = dict(description)
    text = description.get("description") or ""
    if isinstance(text, str) and len(text) > MAX_DESCRIPTION_CHARS:
        what = f"the description of {name}"
        bounded["description"] = model_text(None, name, text, ours=True, limit=MAX_DESCRIPTION_CHARS, what=what)
    schema = description.get("inputSchema")
    if isinstance(schema, Mapping):
        bounded["inputSchema"] = _SchemaTexts(name).schema(schema, "its input schema")
    return bounded


class _SchemaTexts:
    """Walks one tool's input schema, cutting its titles and descriptions within the per-text and per-tool limits
    (copying only what changes)."""

    def __init__(self, tool: str) -> None:
        self._tool = tool
        self._left = MAX_SCHEMA_TEXTS_CHARS

    def schema(self, node: Any, where: str) -> Any:
        if isinstance(node, list):
            items = [self.schema(item, where) for item in node]
            return items if any(new is not old for new, old in zip(items, node, strict=True)) else node
        if not isinstance(node, Mapping):
            return node
        changed: dict[str, Any] = {}
        for key, value in node.items():
            if key in _SCHEMA_DATA:
                continue
            new: Any
            if key in _SCHEMA_TEXTS and isinstance(value, str):
                new = self._schema_text(value, f"the {key} of {where}")
            elif key in _SCHEMA_NAMED and isinstance(value, Mapping):
                new = self._named(value, where)
            else:
                new = self.schema(value, where)
            if new is not value:
                changed[key] = new
        return {**node, **changed} if changed else node

    def _named(self, schemas: Mapping[str, Any], where: str) -> Mapping[str, Any]:
        bounded = {name: self.schema(inner, f"{name!r} in {where}") for name, inner in schemas.items()}
        return bounded if any(bounded[name] is not schemas[name] for name in bounded) else schemas

    def _schema_text(self, text: str, what: str) -> str:
        limit = min(MAX_SCHEMA_TEXT_CHARS, self._left)
        self._left -= min(len(text), limit)
        if len(text) <= limit:
            return text
        return model_text(None, self._tool, text, ours=True, limit=limit, what=f"{what} of {self._tool}")


#: A model node's whole prompt may hold this many times the budget's limit (each value it prints is fitted alone).
PROMPT_FACTOR: Final = 8


def model_prompt(budget: OutputBudget | None, node: str, text: str, what: str) -> str:
    """A workflow model node's text (its prompt, system text, the run's request) through the model-facing gate:
    whole when no budget is set (as a tool's result is), else cut at :data:`PROMPT_FACTOR` times the budget's limit
    for ``node:<id>``."""
    if budget is None:
        return text
    uri = f"node:{node}"
    limit = PROMPT_FACTOR * budget.limit_for(uri)
    return model_text(budget, uri, text, ours=False, limit=limit, what=f"the {what} of node {node!r}")
