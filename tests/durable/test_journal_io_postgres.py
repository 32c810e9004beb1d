"""The journal gate (:mod:`kavalai.durable._journal_io`) on Postgres, under an operator's faults (round 8's list,
``FAULTS_round8.md``, 1-3): the journal's database turned read-only (a failover to a standby), its step table
locked by an operator's transaction, the runner's sessions terminated, each while charge B is in flight. Never a
tool error; the run goes on or is interrupted and resumes; each charge made once (counted at a local shop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from kavalai.durable import DbosRunner
from kavalai.errors import RunInterruptedError
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import charging_engine, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]


def terminate_sessions(admin: str, database: str) -> None:
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )


async def interrupted_then_resumed(
    url: str, fault: Callable[[], None], heal: Callable[[], None], run_id: str, **settings: Any
) -> list[str]:
    """Run the charges under ``run_id``; ``fault()`` as B is charged: the run is interrupted (not failed); after
    ``heal()`` it resumes and finishes, each charge made once. The orders the shop was asked for, in order."""
    runner = DbosRunner(url, journal_outage=1.0, **settings)
    done: list[str] = []

    def at_b(order: str) -> None:
        if order == "B" and not done:
            done.append(order)
            fault()

    try:
        with serve(create_app(on_charge=at_b)) as shop:
            engine = charging_engine(runner, shop)
            with pytest.raises(RunInterruptedError, match=rf"Run {run_id} is interrupted: could not record step 2 "):
                await asyncio.wait_for(engine.run({}, run_id=run_id), 120)
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # no step began after the failed record
            await asyncio.to_thread(heal)
            result = await engine.run({}, run_id=run_id)
            assert result.ok, result.error
            assert result.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
            requests = fetch(f"{shop}/requests")
            assert len({row["key"] for row in requests if row["order"] == "B"}) == 1  # B sent again with its key
            return orders(requests)
    finally:
        await asyncio.to_thread(heal)
        await runner.aclose()


async def test_postgres_turned_read_only_mid_step(postgres_server: str) -> None:
    """A failover leaves the journal on a read-only standby (``cannot execute INSERT in a read-only transaction``)
    while B's charge is in flight. Found in round 8: the failed record of B became the tool's error, the run ended
    failed for good with B charged (the gate knew lost connections, not a read-only database)."""
    from tests.durable.fault_matrix import new_database

    url = new_database(postgres_server, "r8_readonly")

    def fault() -> None:
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute('ALTER DATABASE "r8_readonly" SET default_transaction_read_only = on')
        terminate_sessions(postgres_server, "r8_readonly")

    def heal() -> None:
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute('ALTER DATABASE "r8_readonly" SET default_transaction_read_only = off')
        terminate_sessions(postgres_server, "r8_readonly")

    await interrupted_then_resumed(url, fault, heal, "ro-1")


async def test_the_step_table_locked_by_an_operator_mid_step(postgres_server: str) -> None:
    """An operator's ``LOCK TABLE kavalai_steps`` held while B's charge is in flight: each attempt to record B waits
    at most the runner's ``busy_timeout`` (Postgres's ``lock_timeout``), the gate tries again, and past the run's
    patience the run is interrupted and resumes once the lock is let go. Found in round 8: the INSERT waited on the
    lock for as long as it was held (no lock timeout): the run was interrupted only by its step's cut, the blocked
    INSERT kept a worker thread past ``aclose()`` (the process's exit waited for it), and committed B's row whenever
    the operator let go."""
    from tests.durable.fault_matrix import new_database

    url = new_database(postgres_server, "r8_locked")
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as connection:
            connection.execute("LOCK TABLE kavalai_steps IN ACCESS EXCLUSIVE MODE")
            held.set()
            release.wait(120)

    def fault() -> None:
        threading.Thread(target=hold, daemon=True).start()
        assert held.wait(30)

    asked = await interrupted_then_resumed(url, fault, release.set, "locked-1", busy_timeout=0.2)
    assert asked == ["A", "B", "B", "C"]  # B's record never landed late: resumed, B was sent again with its key


async def test_the_runners_sessions_terminated_mid_step(postgres_server: str) -> None:
    """``pg_terminate_backend`` of every session of the journal's database while B's charge is in flight, the server
    up: the record is written again on a new session and the run goes on."""
    from tests.durable.fault_matrix import new_database

    url = new_database(postgres_server, "r8_killed")
    runner = DbosRunner(url, journal_outage=60)
    killed: list[str] = []

    def at_b(order: str) -> None:
        if order == "B" and not killed:
            killed.append(order)
            terminate_sessions(postgres_server, "r8_killed")

    try:
        with serve(create_app(on_charge=at_b)) as shop:
            result = await asyncio.wait_for(charging_engine(runner, shop).run({}, run_id="killed-1"), 120)
            assert result.ok, result.error
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
            assert killed == ["B"]
    finally:
        await runner.aclose()
