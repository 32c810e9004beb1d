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

__all__ = ["FileResultStore", "ResultStore", "SqlResultStore", "engine_outcome", "journal_json", "outcome_read"]

REF_KEY: Final = "$kavalai_result_ref"
#: The key under which a run's outcome no UTF-8 can hold is handed to DBOS, as escaped JSON text (engine_outcome).
ESCAPED_KEY: Final = "$kavalai_escaped_json"


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


def journal_json(value: Any) -> str:
    """``value`` as the journal's JSON text: compact, non-ASCII written as is, unless a string holds what no UTF-8 can
    (a lone surrogate, which a Python string may carry): then the text is written with ``\\u`` escapes, which every
    database takes and which read back as the same value (as Temporal's JSON converter does). Without this the
    journal's encoding error became the tool's (round 9's fault 5)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if _utf8(text) else json.dumps(value, separators=(",", ":"))


def engine_outcome(value: Any) -> Any:
    """A run's outcome as DBOS can write it (its JSON serializer writes non-ASCII as is, and a lone surrogate then
    fails the write, after every step was made): the value itself, or its escaped JSON text under
    :data:`ESCAPED_KEY`, which :func:`outcome_read` turns back into the value. (An outcome carries its steps'
    results.)"""
    try:
        if _utf8(json.dumps(value, ensure_ascii=False)):
            return value
        return {ESCAPED_KEY: json.dumps(value, separators=(",", ":"))}
    except (TypeError, ValueError):
        return value  # not JSON: DBOS's own error says so


def outcome_read(value: Any) -> Any:
    """The outcome :func:`engine_outcome` handed to DBOS, as the run returned it."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(ESCAPED_KEY), str):
        return json.loads(value[ESCAPED_KEY])
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _encoded(value: Any) -> bytes:
    return journal_json(value).encode()


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
