"""The one way a durable run reads and writes its journal: a database outage pauses the run, it is never a result.

A step's effect has happened by the time its result is written; if that write fails because the database went away
(Postgres stopped, SQLite held locked past its busy timeout, the journal's disk full), handing the failure to the
workflow as the tool's error would record a failed step for an effect that was made, and end the run for good.
:func:`journal_io` runs a blocking journal operation in a worker thread and, when it fails for a reason that passes
(a lost connection, a locked database, a pool that timed out, a full disk, a database read-only after a failover,
a password rotated under a running worker), tries it again with a growing pause, for
as long as the run may wait: :data:`DEFAULT_OUTAGE` seconds (the runner's ``journal_outage``) or, nearer, the
deadline of the call or block around it. When the database is back in time the run goes on as if nothing
happened; past that time the operation raises :class:`~kavalai.errors.RunInterruptedError`, the run stops before
its next step and stays resumable.

Every journal operation made while a run executes crosses this function (``tests/durable/test_journal_io.py``
finds them in the source); what is not a passing database failure (a bug, a constraint) is raised as it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, TypeVar

from kavalai.errors import RunInterruptedError
from kavalai.kernel import current_deadline
from kavalai.secrets import get_logger

__all__ = ["DEFAULT_OUTAGE", "first_line", "interrupted_error", "journal_io", "passing_failure"]

T = TypeVar("T")

logger = get_logger("kavalai.durable")

#: How long, in seconds, a run waits by default for its journal's database to come back.
DEFAULT_OUTAGE: Final = 60.0
_FIRST_PAUSE: Final = 0.05
_LONGEST_PAUSE: Final = 2.0

#: Words of a DB-API error that mean the database is away or busy for now, not that the statement is wrong.
_PASSING: Final = (
    "database is locked",
    "database is busy",
    "connection",
    "server closed",
    "terminating",
    "shutting down",
    "starting up",
    "could not connect",
    "timeout",
    "timed out",
    "disk i/o",
    "disk is full",  # SQLite's SQLITE_FULL: the journal's disk (or its size limit) is full until space is freed
    "no space left",  # Postgres's disk_full (53100): "could not extend file ...: No space left on device"
    # Postgres out of room by a file size limit (EFBIG; SQLSTATE XX000, an InternalError): "could not extend file
    # ...: File too large". A table that cannot grow until an operator makes room, not a bug of the statement.
    "could not extend file",
    "file too large",
    "ssl",
    "read-only transaction",  # Postgres's read_only_sql_transaction: a failover left us on a standby for now
    "readonly database",  # SQLite's SQLITE_READONLY: the journal file made read-only until an operator fixes it
    "no such table",  # SQLite: the journal's table dropped or the file replaced by an operator, until restored
)

#: SQLSTATE classes and codes (Postgres) that mean the database is away, full or read-only for now, whatever the
#: driver's exception class: connection exceptions (08), insufficient resources (53: disk full, too many
#: connections), operator intervention (57P: shutting down, starting up), invalid authorization (28: a password
#: rotated under a running worker), a read-only transaction (25006: a failover to a standby) and an undefined table
#: (42P01: the journal's table dropped, or the database restored without it, until an operator puts it back).
_PASSING_STATES: Final = ("08", "53", "57P", "28", "25006", "42P01")


def passing_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a database failure that may pass (an outage, a lock): worth trying again."""
    import sqlalchemy as sa

    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, sa.exc.TimeoutError | sa.exc.DisconnectionError):
        return True
    if isinstance(exc, sa.exc.DBAPIError) and str(getattr(exc.orig, "sqlstate", None) or "").startswith(
        _PASSING_STATES
    ):
        return True
    if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError | sa.exc.InternalError):
        text = str(exc.orig if exc.orig is not None else exc).lower()
        return any(word in text for word in _PASSING)
    return False


async def journal_io(
    run_id: str, what: str, operation: Callable[..., T], *args: object, outage: float = DEFAULT_OUTAGE
) -> T:
    """``operation(*args)`` in a worker thread, tried again after a passing database failure while the run may wait.

    Args:
        run_id: the run the operation is for (named in the error).
        what: the operation in words (``"record step 3"``), for the log and the error.
        operation: the blocking journal operation.
        outage: the longest the run waits for the database, in seconds; a nearer deadline around the call wins.

    Raises:
        RunInterruptedError: the database did not come back in time; the run stays resumable.
    """
    give_up = time.monotonic() + outage
    around = current_deadline()
    if around is not None:
        give_up = min(give_up, around)
    pause, attempts = _FIRST_PAUSE, 0
    while True:
        attempts += 1
        try:
            return await asyncio.to_thread(operation, *args)
        except Exception as exc:
            if not passing_failure(exc):
                raise
            left = give_up - time.monotonic()
            if left <= 0:
                raise interrupted_error(
                    run_id, what, f"after {attempts} attempts ({type(exc).__name__}: {first_line(exc)})"
                ) from exc
            logger.warning(
                "Run %s: could not %s (%s: %s); trying again in %.2f s",
                run_id,
                what,
                type(exc).__name__,
                first_line(exc),
                min(pause, left),
            )
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _LONGEST_PAUSE)


def interrupted_error(run_id: str, what: str, why: str) -> RunInterruptedError:
    """The error of a run that could not ``what`` in its journal, for the reason ``why``."""
    return RunInterruptedError(
        f"Run {run_id} is interrupted: could not {what} in its journal {why}. It stays resumable: run it again "
        "under the same id once the database is back.",
        run_id=run_id,
    )


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (the driver's own, under SQLAlchemy's wrapping), at most 200 characters."""
    import sqlalchemy as sa

    shown = exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc
    return (str(shown).strip().splitlines() or [type(shown).__name__])[0][:200]
