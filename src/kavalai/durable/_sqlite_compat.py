"""SQLite's ``unixepoch('subsec')`` for SQLite libraries older than 3.42, which DBOS's journal needs.

On Python 3.12 and later DBOS fills its timestamps with ``unixepoch('subsec') * 1000``. SQLite only knows the
``subsec`` modifier from 3.42.0; an older library (3.40 is common, and what these machines' Pythons link) returns
NULL, and DBOS's first insert fails with "NOT NULL constraint failed: application_versions.version_timestamp". So,
with an older library, :func:`install` gives every SQLite connection SQLAlchemy opens (DBOS's client makes engines
of its own) its own ``unixepoch`` function (:func:`add_unixepoch`): the current time with ``subsec`` (the forms DBOS
uses), and anything else answered by SQLite's built-in one, asked on a connection of its own. Written here because
DBOS offers no switch for it; it uses only SQLAlchemy's public ``connect`` event and ``sqlite3``'s
``create_function``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from typing import Any, Final

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["add_unixepoch", "install"]

_NEEDED: Final = sqlite3.sqlite_version_info < (3, 42, 0)
_NOW: Final = frozenset({(), ("now",), ("subsec",), ("now", "subsec"), ("subsecond",), ("now", "subsecond")})


_installed = False


def install() -> None:
    """Add the function to every SQLite connection SQLAlchemy opens from now on (once; nothing needed from 3.42)."""
    global _installed
    if _NEEDED and not _installed:
        event.listen(Engine, "connect", _on_connect)
        _installed = True


def _on_connect(connection: Any, _record: Any) -> None:
    add_unixepoch(connection)


def add_unixepoch(connection: Any) -> None:
    """Give a new ``sqlite3`` connection a ``unixepoch`` that knows ``subsec`` (nothing with SQLite >= 3.42)."""
    if _NEEDED and isinstance(connection, sqlite3.Connection):
        connection.create_function("unixepoch", -1, _unixepoch, deterministic=False)


def _unixepoch(*args: Any) -> float | int | None:
    if tuple(str(a).lower() for a in args) in _NOW:
        now = time.time()
        return now if any(str(a).lower().startswith("subsec") for a in args) else int(now)
    marks = ", ".join("?" for _ in args)
    with contextlib.closing(sqlite3.connect(":memory:")) as builtin:  # rare: DBOS asks only for the time now
        row = builtin.execute(f"SELECT unixepoch({marks})", args).fetchone()
    return row[0] if row else None
