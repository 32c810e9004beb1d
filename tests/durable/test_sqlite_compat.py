"""SQLite's unixepoch('subsec') for libraries older than 3.42 (DBOS's journal timestamps on Python >= 3.12)."""

from __future__ import annotations

import contextlib
import sqlite3
import time

from kavalai.durable._sqlite_compat import add_unixepoch


def test_subsecond_time_and_the_builtin_forms() -> None:
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        add_unixepoch(connection)
        before = time.time()
        subsec, whole, fixed = connection.execute(
            "SELECT unixepoch('subsec') * 1000, unixepoch(), unixepoch('2020-01-01')"
        ).fetchone()
    assert before * 1000 - 1 <= subsec <= time.time() * 1000 + 1  # never NULL, and in milliseconds
    assert abs(whole - before) <= 2
    assert fixed == 1577836800  # answered by SQLite's own function


def test_a_table_default_as_dbos_declares_it_is_filled() -> None:
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        add_unixepoch(connection)
        connection.execute("CREATE TABLE t (stamp INTEGER NOT NULL DEFAULT (unixepoch('subsec') * 1000), x INTEGER)")
        connection.execute("INSERT INTO t (x) VALUES (1)")
        [(stamp,)] = connection.execute("SELECT stamp FROM t").fetchall()
    assert stamp > 1_700_000_000_000
