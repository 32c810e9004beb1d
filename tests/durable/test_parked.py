"""A run parked in a process (interrupted: its journal went away past the run's patience) does not outlive the
runner's ``aclose()``: DBOS would poll the parked run's status from a worker thread, retrying for ever while the
database is gone, and the interpreter could not exit. The run stays resumable, by another process, once the database
is back.

The fault is real: an embedded Postgres stopped (``-m immediate``) while the run's second charge is in flight at a
local shop service, in a process of its own (``tests/servers/parked_run.py``) that must then exit by itself.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from kavalai.durable import DbosRunner
from tests.durable.conftest import fetch
from tests.durable.fault_matrix import new_database
from tests.durable.test_journal_io import charging_engine, orders, resumed_once
from tests.servers.effects_app import create_app
from tests.servers.postgres_server import postgres_server
from tests.servers.uvicorn_server import serve

ROOT = Path(__file__).resolve().parents[2]
EXIT_BOUND = 300  # seconds: far above the few a clean exit takes; a process held by a retrying thread never exits


@pytest.mark.timeout(EXIT_BOUND + 120)
async def test_a_run_parked_when_postgres_went_away_for_good_lets_its_process_exit_and_resumes_later() -> None:
    with postgres_server() as server:
        url = new_database(server.url, "parked")

        stopped: list[str] = []

        def stop_at_b(order: str) -> None:  # at the first charge of B, for good (until the test starts it again)
            if order == "B" and not stopped:
                stopped.append(order)
                server.stop(immediate=True)

        with serve(create_app(on_charge=stop_at_b)) as shop:
            process = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "tests.servers.parked_run", url, shop, "parked-1"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=EXIT_BOUND,
                check=False,
            )
            assert process.returncode == 0, process.stderr
            lines = process.stdout.splitlines()
            assert lines[0].startswith("interrupted: Run parked-1 is interrupted: could not record step 2"), lines
            assert lines[-1] == "closed"
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
            # DBOS's background threads warn while the database is away, their warnings carrying tracebacks (a chained
            # one puts "Traceback" at the start of a line); nothing escapes: no thread's exception, no unraisable one,
            # no task's exception left unread (the process itself ended with 0, above)
            escaped = ("Exception in thread", "Exception ignored", "Task exception was never retrieved")
            died = [line for line in process.stderr.splitlines() if any(mark in line for mark in escaped)]
            assert died == [], process.stderr[-3000:]

            server.start()  # the database back: the run resumes in another process
            runner = DbosRunner(url)
            try:
                await resumed_once(charging_engine(runner, shop), "parked-1", shop)
                assert await runner.status("parked-1") == "SUCCESS"
            finally:
                await runner.aclose()
