"""Output budgets: how much of a tool's result reaches the model, and what happens to the rest.

A result over its budget is either cut, with a notice saying so (``overflow="truncate"``), or kept whole as an
*artifact* (``overflow="artifact"``): the model gets the start of it, the artifact's handle and the
``read_artifact`` tool, with which it pages through the rest. Budgets count characters of the JSON text the model
reads. One :class:`OutputBudget` sets the default and, by URI or glob, the budget of single tools; an agent takes
its own (``Agent(output_budget=...)``) or, failing that, its kernel's (``kernel.output_budget``).
"""

from __future__ import annotations

import fnmatch
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import anyio

__all__ = [
    "READ_ARTIFACT",
    "ArtifactStore",
    "FileArtifactStore",
    "MemoryArtifactStore",
    "OutputBudget",
]

#: The name the model calls to read an artifact (it is handled by the agent, not the kernel).
READ_ARTIFACT: Final = "read_artifact"
_HANDLE_PREFIX: Final = "artifact://"


class ArtifactStore(Protocol):
    """Where results over their budget are kept whole."""

    async def put(self, text: str) -> str:
        """Keep ``text``; return its handle (``artifact://...``)."""
        ...

    async def get(self, handle: str) -> str:
        """The text kept under ``handle``. Raises ``KeyError`` for an unknown handle."""
        ...


class MemoryArtifactStore:
    """Artifacts in memory, for as long as the store lives (an agent's default)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    async def put(self, text: str) -> str:
        """Keep ``text``; return its handle."""
        handle = f"{_HANDLE_PREFIX}{secrets.token_hex(8)}"
        self._texts[handle] = text
        return handle

    async def get(self, handle: str) -> str:
        """The text kept under ``handle``."""
        return self._texts[handle]


class FileArtifactStore:
    """Artifacts as files in ``directory`` (created with mode 0700; each file 0600), surviving the process."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    async def put(self, text: str) -> str:
        """Write ``text`` to a new file; return its handle."""
        name = secrets.token_hex(8)
        await anyio.to_thread.run_sync(self._write, name, text)
        return f"{_HANDLE_PREFIX}{name}"

    async def get(self, handle: str) -> str:
        """The text of the file behind ``handle``."""
        name = handle.removeprefix(_HANDLE_PREFIX)
        if not name.isalnum():  # a handle is ours or nothing: never a path the model made up
            raise KeyError(handle)
        try:
            return await anyio.to_thread.run_sync(self._read, name)
        except FileNotFoundError:
            raise KeyError(handle) from None

    def _write(self, name: str, text: str) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(self.directory / f"{name}.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)

    def _read(self, name: str) -> str:
        return (self.directory / f"{name}.txt").read_text(encoding="utf-8")


@dataclass(frozen=True)
class OutputBudget:
    """How many characters of a tool result reach the model.

    Attributes:
        max_chars: the default budget (characters of the result's JSON text).
        per_tool: budgets of single tools, by URI or glob (``{"mcp://search.*": 4000}``); the first match wins.
        overflow: ``"truncate"`` cuts the result, with a notice; ``"artifact"`` keeps it whole in ``store`` and
            gives the model its start, its handle and the ``read_artifact`` tool.
        store: where artifacts are kept; a :class:`MemoryArtifactStore` by default.
    """

    max_chars: int = 20_000
    per_tool: Mapping[str, int] = field(default_factory=dict)
    overflow: Literal["truncate", "artifact"] = "truncate"
    store: ArtifactStore = field(default_factory=MemoryArtifactStore)

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
        handle = await self.store.put(text) if self.overflow == "artifact" else None
        return f"{text[:limit]}\n{self.notice(f'the result of {uri}', len(text), limit, handle)}"

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
        """Answer a ``read_artifact`` call: a page of an artifact (at most the default budget)."""
        handle = str(arguments.get("handle", ""))
        offset = max(0, _int(arguments.get("offset"), 0))
        size = min(max(1, _int(arguments.get("limit"), self.max_chars)), self.max_chars)
        text = await self.store.get(handle)
        page = text[offset : offset + size]
        following = offset + len(page)
        return {
            "handle": handle,
            "offset": offset,
            "text": page,
            "total": len(text),
            "next_offset": following if following < len(text) else None,
        }

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
