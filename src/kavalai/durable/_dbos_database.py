"""The journal's database for DBOS: its URL forms, the SQLAlchemy engines a runner and a client open on it, DBOS's
table of runs as far as kavalai reads it, and the names every process of one journal shares."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, Literal

import sqlalchemy as sa

__all__ = [
    "JOURNAL_VERSION",
    "WORKFLOW",
    "checked_step_log",
    "default_journal_url",
    "make_engine",
    "redacted",
    "sqlalchemy_url",
    "status_table",
    "with_lock_timeout",
]

#: The DBOS application version of every kavalai run: the journal's format, not kavalai's release, so a run begun
#: before an upgrade is still recovered after it.
JOURNAL_VERSION: Final = "kavalai-journal-1"
#: The DBOS workflow of every kavalai run.
WORKFLOW: Final = "kavalai.run"


def default_journal_url(beside: str | os.PathLike[str] | None = None) -> str:
    """The SQLite journal of a workflow file: ``<file>.runs.sqlite`` beside it, or ``kavalai-runs.sqlite`` in the
    current directory."""
    if beside is None:
        return "sqlite:///kavalai-runs.sqlite"
    path = Path(beside).resolve()
    return f"sqlite:///{path.with_name(path.name + '.runs.sqlite')}"


def status_table(url: str) -> sa.Table:
    """DBOS's table of runs (its ``dbos`` schema on Postgres), as much of it as the cancel check reads."""
    schema = None if url.startswith("sqlite") else "dbos"
    return sa.Table(
        "workflow_status",
        sa.MetaData(schema=schema),
        sa.Column("workflow_uuid", sa.Text, primary_key=True),
        sa.Column("status", sa.Text),
    )


def sqlalchemy_url(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if not url.startswith(("sqlite:", "postgresql+")):
        raise ValueError(f"The journal database must be sqlite:///PATH or postgresql://..., not {redacted(url)!r}")
    return url


def make_engine(url: str, busy_timeout: float = 30.0) -> sa.Engine:
    """The journal's engine. ``busy_timeout`` bounds how long one statement waits for a lock another session holds:
    SQLite's busy timeout, Postgres's ``lock_timeout``. Past it the statement fails (a passing failure the journal
    gate tries again while the run may wait), so no statement blocks a worker thread past the run's patience and its
    runner's ``aclose()`` (an operator's ``LOCK TABLE`` held for an hour would otherwise hold a write that long)."""
    if not url.startswith("sqlite"):
        return sa.create_engine(with_lock_timeout(url, busy_timeout), pool_pre_ping=True)
    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def configure(connection: Any, record: Any) -> None:
        # As DBOS configures SQLite (IMMEDIATE transactions, a long busy timeout), plus write-ahead logging with
        # synchronous=NORMAL: a committed step survives the process being killed at any point (a power cut may lose
        # the last ones), at a tenth of the cost of a full sync per step.
        connection.isolation_level = "IMMEDIATE"
        connection.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        connection.execute("PRAGMA foreign_keys=ON")
        _wal(connection)
        connection.execute("PRAGMA synchronous=NORMAL")

    return engine


def with_lock_timeout(url: str, seconds: float) -> sa.URL:
    """A Postgres ``url`` whose sessions give up waiting for a lock after ``seconds`` (``lock_timeout``, added to the
    URL's own ``options``); an engine made from its ``engine.url`` keeps it."""
    parsed = sa.make_url(url)
    given = parsed.query.get("options")
    mine = f"-c lock_timeout={max(1, int(seconds * 1000))}"
    options = mine if not given else f"{given if isinstance(given, str) else ' '.join(given)} {mine}"
    return parsed.update_query_dict({"options": options})


def _wal(connection: Any) -> None:
    """Switch a SQLite connection to write-ahead logging. Workers opening a new journal at once race for that
    switch, and SQLite answers "database is locked" at once, without its busy timeout: so it is tried again, for at
    most about 10 s."""
    import sqlite3
    import time

    for attempt in range(100):
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 99:
                raise
            time.sleep(0.1)


def redacted(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"


def checked_step_log(step_log: Literal["kavalai", "dbos"]) -> Literal["kavalai", "dbos"]:
    if step_log not in ("kavalai", "dbos"):
        raise ValueError(f"step_log must be 'kavalai' or 'dbos', got {step_log!r}")
    return step_log
