"""Every table kavalai keeps in a journal's database, made once and versioned, whatever the number of processes
setting it up at once.

A journal's database holds DBOS's own tables (DBOS makes and migrates them, under its own lock) and these:

=====================  ======================================================================================
``kavalai_schema``      one row: the version of the tables below, so a later release can migrate them
``kavalai_steps``       the steps of DBOS runs (:mod:`kavalai.durable._step_log`)
``kavalai_answers``     answers given during a step, questions waiting for one (:mod:`._answer_log`)
``kavalai_results``     results over the inline limit (:class:`~kavalai.durable.SqlResultStore`)
``kavalai_executors``   the heartbeat of each DBOS worker
``kavalai_takeovers``   one claim per run taken over from a worker that is gone
=====================  ======================================================================================

:func:`ensure_schema` makes them in one transaction that holds a lock for its whole length: on Postgres the
transaction's advisory lock (``pg_advisory_xact_lock``), on SQLite the database's write lock (``BEGIN
IMMEDIATE``). The first process to take the lock makes the tables and writes the version row; the others wait for
it, then find the version row and make nothing. Without the lock two workers started together both issue ``CREATE
TABLE`` and Postgres refuses the second (``UniqueViolation`` on ``pg_type``): ``checkfirst`` only looks before it
creates, it does not hold anything. A database whose version row is newer than this release knows is refused
rather than written in a format it does not know.
"""

from __future__ import annotations

import threading
import weakref
from typing import Final

import sqlalchemy as sa

__all__ = [
    "ANSWERS",
    "EXECUTORS",
    "RESULTS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STEPS",
    "TAKEOVERS",
    "SchemaVersionError",
    "ensure_schema",
]

#: The version of kavalai's tables this release writes. A release that changes them raises it and migrates older
#: databases in :func:`_migrate`.
SCHEMA_VERSION: Final = 1

#: The key of the Postgres advisory lock under which the tables are made: an arbitrary constant (a signed 64-bit
#: integer) that every release keeps, so processes of different releases still wait for each other.
_LOCK_KEY: Final = 0x2F5A_91C3_6B0E_44D7

METADATA: Final = sa.MetaData()

SCHEMA: Final = sa.Table(
    "kavalai_schema",
    METADATA,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

STEPS: Final = sa.Table(
    "kavalai_steps",
    METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("result", sa.Text, nullable=False),
)

ANSWERS: Final = sa.Table(
    "kavalai_answers",
    METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("answered", sa.Boolean, nullable=False),
    sa.Column("answer", sa.Text, nullable=True),
)

RESULTS: Final = sa.Table(
    "kavalai_results",
    METADATA,
    sa.Column("ref", sa.String(80), primary_key=True),
    sa.Column("body", sa.LargeBinary, nullable=False),
)

EXECUTORS: Final = sa.Table(
    "kavalai_executors",
    METADATA,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("beat", sa.Float, nullable=False),
)

TAKEOVERS: Final = sa.Table(
    "kavalai_takeovers",
    METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("from_executor", sa.String(200), primary_key=True),
    sa.Column("taken_by", sa.String(200), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
)

_ready: weakref.WeakSet[sa.Engine] = weakref.WeakSet()  # engines whose database is set up, in this process
_ready_lock = threading.Lock()


class SchemaVersionError(RuntimeError):
    """The journal's tables are of a version this release of kavalai does not know (a newer one)."""


def ensure_schema(engine: sa.Engine) -> None:
    """Make kavalai's tables in ``engine``'s database, once (see the module docstring); blocking. Cheap after the
    first call for an engine.

    Raises:
        SchemaVersionError: the database's tables are newer than this release.
    """
    if engine in _ready:
        return
    with _ready_lock:
        if engine in _ready:
            return
        _set_up(engine)
        _ready.add(engine)


def _set_up(engine: sa.Engine) -> None:
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # The write lock now, before anything is read: SQLite's default begins a read and fails when two
            # connections both try to turn it into a write (SQLITE_BUSY, which the busy timeout does not wait out).
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif connection.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_LOCK_KEY)))
        found = _version(connection)
        if found is None or found < SCHEMA_VERSION:
            METADATA.create_all(connection, checkfirst=True)
            _migrate(connection, found or 0)
            if found is None:
                connection.execute(SCHEMA.insert().values(name="kavalai", version=SCHEMA_VERSION))
            else:
                connection.execute(SCHEMA.update().values(version=SCHEMA_VERSION))
        elif found > SCHEMA_VERSION:
            connection.rollback()
            raise SchemaVersionError(
                f"The journal's kavalai tables are at version {found}, newer than this release of kavalai knows "
                f"({SCHEMA_VERSION}): upgrade kavalai in this process (every worker of a journal runs the same "
                "release or a newer one)."
            )
        connection.commit()


def _version(connection: sa.Connection) -> int | None:
    if not sa.inspect(connection).has_table(SCHEMA.name):
        return None
    row = connection.execute(sa.select(SCHEMA.c.version).where(SCHEMA.c.name == "kavalai")).first()
    return None if row is None else int(row.version)


def _migrate(connection: sa.Connection, found: int) -> None:
    """Bring tables of version ``found`` (0: made before the version row existed, the same as version 1) to
    :data:`SCHEMA_VERSION`. Version 1 is the first: nothing to do yet."""
