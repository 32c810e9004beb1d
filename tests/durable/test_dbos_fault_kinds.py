"""The fault kinds first built for Temporal, on DBOS (issue 35): a cancel racing a step's completion (20 rounds), and
the journal's database going away twice within one step. On SQLite (default suite) and Postgres (``-m faults``;
the restart case stops and starts the embedded Postgres twice). Asserted by counts at a local shop (each charge
once, or at most once for a cancelled run) and by final states that agree with what ``run()`` said, never by
elapsed time."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kavalai.durable import DbosRunner
from kavalai.errors import DurableRunError, RunCancelledError
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import Attempts, Locker, attempts, charging_engine, orders, outage_then_back
from tests.durable.test_temporal_cancel_race import CancelAtB, charged_as_told, run_told
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

__all__ = ["attempts"]  # the fixture, used here

pytestmark = pytest.mark.timeout(900)

ROUNDS = 20


async def test_a_cancel_racing_a_steps_completion_on_dbos_ends_the_run_cancelled_or_finished_never_both(
    journal_url: str,
) -> None:
    """Each round's run is cancelled, from another connection (``kavalai runs cancel``), a little later each round
    after the shop has recorded charge B: while B's answer goes out, while B is recorded, as C begins, after the
    run ended. The run ends ``cancelled`` or ``finished``; ``run()``, the journal's state and the outcome agree."""
    from kavalai.durable.dbos import DbosClient

    runner = DbosRunner(journal_url)
    client = DbosClient(journal_url)
    sent: list[BaseException | None] = []

    def cancel(run_id: str) -> None:  # `kavalai runs cancel`, from another connection
        try:
            client.cancel(run_id)
            sent.append(None)
        except DurableRunError as exc:  # refused: the run had ended
            sent.append(exc)

    race = CancelAtB(cancel)
    ends: Counter[str] = Counter()
    try:
        with serve(create_app(on_charge=race.on_charge)) as shop:
            engine = charging_engine(runner, shop)
            for n in range(ROUNDS):
                run_id = race.next_round(n, "dbos-race")
                before = len(fetch(f"{shop}/effects"))
                told = await run_told(engine, run_id, before)
                assert await asyncio.to_thread(race.sent.wait, 120)  # bounded: this round's cancel went out
                [refused] = sent
                sent.clear()
                if refused is not None:  # a cancel is refused only when the run had finished
                    assert told == "finished", refused
                    assert "has ended (finished)" in str(refused)
                info = await asyncio.to_thread(client.describe, run_id)
                assert info.state == told, (n, told, info)
                if told == "cancelled":
                    assert info.outcome is None, info
                    with pytest.raises(RunCancelledError):  # run again: not revived, nothing runs
                        await engine.run({}, run_id=run_id)
                charged_as_told(shop, before, told, n)
                ends[told] += 1
    finally:
        client.close()
        await runner.aclose()
    assert sum(ends.values()) == ROUNDS, ends


async def charged_once_through(
    runner: DbosRunner, on_charge: Callable[[str], None], back: Callable[[], None], run_id: str, attempts: Attempts
) -> None:
    """A run of three charges whose journal goes away at B (``on_charge``), brought ``back`` once B's record failed
    twice: it goes on, each charge once, each step recorded once."""
    with serve(create_app(on_charge=on_charge)) as shop:
        result = await outage_then_back(charging_engine(runner, shop), run_id, attempts, shop, back)
        assert result.ok, result.error
        assert result.output == {"n": [1, 2, 3]}
        assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
        assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
    assert attempts.count >= 2
    assert await runner.status(run_id) == "SUCCESS"
    recorded = [name for _, name, _ in await runner.recorded_steps(run_id)]
    assert recorded == [f"{node}#1/tool rest://shop.charge#1" for node in "abc"]


async def test_the_sqlite_journal_away_twice_within_one_step_loses_nothing_and_charges_once(
    tmp_path: Path, attempts: Attempts
) -> None:
    """While charge B is in flight the journal is locked by another process and let go (the first outage), then
    locked again (the second): B's record fails at least twice, is tried again, and is written once the lock is
    let go; the run goes on, each charge once, B recorded once."""
    path = tmp_path / "journal.sqlite"
    first, second = Locker(path), Locker(path)
    runner = DbosRunner(f"sqlite:///{path}", busy_timeout=0.05, journal_outage=600)

    def twice_at_b(order: str) -> None:
        if order == "B" and first.process is None:
            first.lock()
            first.release()
            second.lock()

    try:
        await charged_once_through(runner, twice_at_b, second.release, "twice-1", attempts)
    finally:
        first.release()
        second.release()
        await runner.aclose()


@pytest.mark.faults
async def test_postgres_restarted_twice_within_one_step_loses_nothing_and_charges_once(attempts: Attempts) -> None:
    """While charge B is in flight Postgres is stopped (``-m immediate``) and started, then stopped again; it is
    started once B's record has failed twice. Every pooled connection died twice: the run goes on, each charge once."""
    from tests.durable.fault_matrix import new_database
    from tests.servers.postgres_server import postgres_server

    with postgres_server() as server:
        url = new_database(server.url, "twice")
        runner = DbosRunner(url, journal_outage=600)
        restarts: list[str] = []

        def twice_at_b(order: str) -> None:
            if order == "B" and not restarts:
                restarts.append(order)
                server.stop(immediate=True)
                server.start()
                server.stop(immediate=True)

        try:
            await charged_once_through(runner, twice_at_b, server.start, "pg-twice-1", attempts)
        finally:
            if server.process is None or server.process.poll() is not None:  # back up, for aclose()
                server.start()
            await runner.aclose()
