"""A Temporal server away longer than the run's patience (``TemporalRunner(journal_outage=...)``): the dev server
keeps its state in a file (``--db-filename``), is killed while charge B is in flight and stays down; the waiting
``run()`` raises :class:`RunInterruptedError` (the run, kept in the server's file, stays resumable), and once the
server is back, running it again under its id finishes it, each charge made once (counted at a local shop)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from kavalai.durable import TemporalRunner
from kavalai.errors import RunInterruptedError
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import charging_engine, orders
from tests.servers.effects_app import create_app
from tests.servers.temporal_server import temporal_server_with_db
from tests.servers.uvicorn_server import serve

pytestmark = [pytest.mark.timeout(300), pytest.mark.faults]


async def test_a_temporal_server_away_past_the_runs_patience_interrupts_it_and_the_run_resumes_later(
    tmp_path: Path,
) -> None:
    run_id = f"outage-{uuid.uuid4().hex[:8]}"
    with temporal_server_with_db(tmp_path / "temporal.db") as server:
        killed = threading.Event()

        def kill_at_b(order: str) -> None:
            if order == "B" and not killed.is_set():
                killed.set()
                server.kill()

        runner = TemporalRunner(
            server.address,
            task_queue=f"q-{run_id}",
            journal_outage=1,
            heartbeat_timeout=2,
            step_timeout=4,
            shutdown_timeout=5,
        )
        with serve(create_app(on_charge=kill_at_b)) as shop:
            engine = charging_engine(runner, shop)
            try:
                with pytest.raises(RunInterruptedError, match=rf"Run {run_id} is interrupted: could not read its"):
                    await engine.run({}, run_id=run_id)
                assert killed.is_set()
                assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # no step began while the server was away
                server.start()  # the same file: the run is there
                assert (await runner.describe(run_id)).state == "running"  # resumable, not failed
                result = await engine.run({}, run_id=run_id)
                assert result.ok, result.error
                assert result.output == {"n": [1, 2, 3]}
                requests = fetch(f"{shop}/requests")
                assert orders(requests)[:2] == ["A", "B"]
                assert orders(requests)[-1] == "C"
                assert {r["key"] for r in requests if r["order"] == "B"} == {requests[1]["key"]}  # B again: its key
                assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
                assert (await runner.describe(run_id)).state == "finished"
            finally:
                await runner.aclose()
                await engine.aclose()


async def test_a_temporal_server_restarted_twice_within_one_step_loses_nothing_and_charges_once(
    tmp_path: Path,
) -> None:
    """The dev server (state in a file) is killed while charge B is in flight, started, killed again before B has
    answered, and started again; then B answers. The run, waited for patiently, finishes: effects ``[A, B, C]``,
    each once (B, if tried again, with its key), final state ``finished``."""
    run_id = f"twice-{uuid.uuid4().hex[:8]}"
    with temporal_server_with_db(tmp_path / "temporal.db") as server:
        restarts: list[str] = []

        def restart_twice_at_b(order: str) -> None:  # the shop's thread: B is charged, its answer not yet sent
            if order == "B" and not restarts:
                for _ in range(2):
                    server.kill()
                    restarts.append("killed")
                    server.start()  # the same port and file
                    restarts.append("started")

        runner = TemporalRunner(server.address, task_queue=f"q-{run_id}", journal_outage=120, shutdown_timeout=5)
        with serve(create_app(on_charge=restart_twice_at_b)) as shop:
            engine = charging_engine(runner, shop)
            try:
                result = await engine.run({}, run_id=run_id)
                assert restarts == ["killed", "started", "killed", "started"]
                assert result.ok, result.error
                assert result.output == {"n": [1, 2, 3]}
                requests = fetch(f"{shop}/requests")
                assert orders(requests)[:2] == ["A", "B"]
                assert {r["key"] for r in requests if r["order"] == "B"} == {requests[1]["key"]}  # B again: its key
                assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
                assert (await runner.describe(run_id)).state == "finished"
            finally:
                await runner.aclose()
                await engine.aclose()
