"""A DBOS runner's heartbeat while its journal is away for now (issue 35, task 35a item 4): each failed beat is one
log line naming the executor and the database's reason, never a traceback (a read-only Postgres after a failover
printed one a beat, every ``heartbeat`` seconds, for as long as the failover lasted); a beat that fails for another
reason (a bug) keeps its traceback. Then the journal is back and the beats go on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from kavalai.durable import DbosRunner
from tests.durable.conftest import on_every_logger
from tests.durable.test_journal_io import Locker

pytestmark = pytest.mark.timeout(120)


class Beats(logging.Handler):
    """The records of failed heartbeats."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.failed: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "heartbeat" in record.getMessage():
            self.failed.append(record)


async def failed_beats(
    url: str, away: Callable[[], None], back: Callable[[], None], reason: str
) -> list[logging.LogRecord]:
    """Start a runner on ``url`` beating every 0.05 s, take the journal ``away()`` until three beats failed for
    ``reason``, bring it ``back()``; the records of the failed beats."""
    runner = DbosRunner(url, heartbeat=0.05, busy_timeout=0.1)
    with on_every_logger(Beats()) as beats:
        assert isinstance(beats, Beats)
        try:
            await runner.start()
            await asyncio.to_thread(away)
            for _ in range(600):  # bounded: 60 s
                if sum(reason in record.getMessage().lower() for record in beats.failed) >= 3:
                    break
                await asyncio.sleep(0.1)
        finally:
            await asyncio.to_thread(back)
            await runner.aclose()
    return beats.failed


def check(failed: list[logging.LogRecord], reason: str) -> None:
    assert sum(reason in record.getMessage().lower() for record in failed) >= 3, "the heartbeat never failed"
    for record in failed:
        assert record.levelno == logging.WARNING
        assert record.exc_info is None, "a traceback for a journal away for now"
        message = record.getMessage()
        assert "the journal is away for now" in message, message
        assert "\n" not in message


async def test_a_locked_sqlite_journal_fails_each_beat_in_one_line(tmp_path: Path) -> None:
    """The SQLite journal held locked by another process past the runner's busy timeout."""
    locker = Locker(tmp_path / "journal.sqlite")
    reason = "database is locked"
    check(await failed_beats(f"sqlite:///{locker.path}", locker.lock, locker.release, reason), reason)


@pytest.mark.faults
async def test_a_read_only_postgres_journal_fails_each_beat_in_one_line(postgres_server: str) -> None:
    """The Postgres journal turned read-only (a failover to a standby), the runner's sessions terminated."""
    from tests.durable.fault_matrix import new_database
    from tests.durable.test_journal_io_postgres import terminate_sessions

    url = new_database(postgres_server, "beat_readonly")

    def read_only(on: bool) -> None:
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute(
                f'ALTER DATABASE "beat_readonly" SET default_transaction_read_only = {"on" if on else "off"}'
            )
        terminate_sessions(postgres_server, "beat_readonly")

    reason = "read-only transaction"
    check(await failed_beats(url, lambda: read_only(True), lambda: read_only(False), reason), reason)
