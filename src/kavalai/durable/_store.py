"""Results too large for the journal: kept in a store, journaled as a reference (a content hash).

A journal row per step is cheap while it is small; a tool that returns a few megabytes would make every read of the
run's journal heavy. :meth:`ResultStore.keep` puts such a result in the store and returns a small reference that the
engine journals instead; :meth:`ResultStore.load` turns a reference back into the value (anything else passes
through). References are content hashes, so writing the same result twice (a step run again after a crash, before
it was recorded) stores it once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Final

from kavalai.durable._json import journal_json

__all__ = ["FileResultStore", "ResultStore", "SqlResultStore"]

REF_KEY: Final = "$kavalai_result_ref"


class ResultStore(ABC):
    """Where results over the inline limit live; subclasses implement :meth:`put` and :meth:`get`."""

    @abstractmethod
    def put(self, ref: str, data: bytes) -> None:
        """Store ``data`` under ``ref`` (a content hash: storing it again is harmless)."""

    @abstractmethod
    def get(self, ref: str) -> bytes:
        """The data stored under ``ref``; raise :class:`KeyError` when there is none."""

    async def keep(self, value: Any, limit: int) -> Any:
        """``value`` itself when its JSON is at most ``limit`` bytes, else a reference to it, stored now."""
        data = _encoded(value)
        if len(data) <= limit:
            return value
        ref = _ref(data)
        await asyncio.to_thread(self.put, ref, data)
        return {REF_KEY: ref, "bytes": len(data)}

    async def load(self, recorded: Any) -> Any:
        """The value a journaled result stands for: the result itself, or what its reference names."""
        if not is_reference(recorded):
            return recorded
        return _decoded(recorded, await asyncio.to_thread(self._get, recorded))

    def keep_now(self, value: Any, limit: int) -> Any:
        """:meth:`keep`, blocking: for code that runs where no thread can be started (Temporal's workflow loop)."""
        data = _encoded(value)
        if len(data) <= limit:
            return value
        ref = _ref(data)
        self.put(ref, data)
        return {REF_KEY: ref, "bytes": len(data)}

    def load_now(self, recorded: Any) -> Any:
        """:meth:`load`, blocking (see :meth:`keep_now`)."""
        if not is_reference(recorded):
            return recorded
        return _decoded(recorded, self._get(recorded))

    def _get(self, recorded: dict[str, Any]) -> bytes:
        ref = recorded[REF_KEY]
        try:
            return self.get(ref)
        except KeyError:
            raise LookupError(
                f"The journal refers to result {ref} ({recorded.get('bytes')} bytes), which the result store does "
                "not hold: was the store deleted or pointed elsewhere since the run began?"
            ) from None


def is_reference(recorded: Any) -> bool:
    """Whether a journaled value is a reference to a stored result."""
    return isinstance(recorded, dict) and REF_KEY in recorded


def _encoded(value: Any) -> bytes:
    return journal_json(value, compact=True).encode()


def _ref(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _decoded(recorded: dict[str, Any], data: bytes) -> Any:
    if _ref(data) != recorded[REF_KEY]:  # a store is shared by workers: a damaged or replaced entry is refused
        raise LookupError(f"The stored result {recorded[REF_KEY]} does not match its hash: the store was altered.")
    return json.loads(data)


class FileResultStore(ResultStore):
    """Results as files in ``directory`` (created on first write), one per content hash."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, ref: str) -> Path:
        algorithm, _, digest = ref.partition(":")
        if algorithm != "sha256" or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise KeyError(ref)
        return self.directory / f"{digest}.json"

    def put(self, ref: str, data: bytes) -> None:
        """Write the file atomically (a temporary file renamed into place)."""
        path = self._path(ref)
        if path.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        os.replace(partial, path)

    def get(self, ref: str) -> bytes:
        """Read the file of ``ref``."""
        try:
            return self._path(ref).read_bytes()
        except FileNotFoundError:
            raise KeyError(ref) from None

    def __repr__(self) -> str:
        return f"<FileResultStore {str(self.directory)!r}>"


class SqlResultStore(ResultStore):
    """Results in a table (``kavalai_results``) of an SQL database, the journal's own by default: SQLite or
    Postgres, through SQLAlchemy (which the ``dbos`` extra brings)."""

    def __init__(self, url: str, *, engine: Any = None) -> None:
        import sqlalchemy as sa

        from kavalai.durable._schema import RESULTS

        self.url = url
        self._engine = engine if engine is not None else sa.create_engine(url)
        self._table = RESULTS

    def _create(self) -> None:
        from kavalai.durable._schema import ensure_schema

        ensure_schema(self._engine)  # once per engine: later calls are a set look-up

    def put(self, ref: str, data: bytes) -> None:
        """Insert the row unless it is there already."""
        import sqlalchemy as sa

        self._create()
        with self._engine.begin() as connection:
            found = connection.execute(sa.select(self._table.c.ref).where(self._table.c.ref == ref)).first()
            if found is None:
                connection.execute(self._table.insert().values(ref=ref, body=data))

    def get(self, ref: str) -> bytes:
        """Read the row of ``ref``."""
        import sqlalchemy as sa

        self._create()
        with self._engine.connect() as connection:
            row = connection.execute(sa.select(self._table.c.body).where(self._table.c.ref == ref)).first()
        if row is None:
            raise KeyError(ref)
        return bytes(row[0])

    def dispose(self) -> None:
        """Close the store's connections."""
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"<SqlResultStore {self._engine.url!r}>"
