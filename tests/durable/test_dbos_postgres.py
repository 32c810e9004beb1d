"""Two worker processes on a real Postgres share one queue of 20 runs; one is killed in the middle of a run and
the other takes its runs over (issue 14)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kavalai.durable.dbos import DbosClient
from tests.durable.conftest import ROOT, fetch
from tests.servers.effects_app import create_app
from tests.servers.postgres_server import postgres
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

RUNS = 20


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres() as url:
        yield url


def start_worker(db: str, rest: str, name: str, logs: Path) -> subprocess.Popen[str]:
    """A worker process serving the queue; returns once it serves (its stderr goes to ``logs/NAME.log``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.servers.durable_worker", "serve", db, rest, name]
    command += ["--concurrency", "3", "--stale-after", "3"]
    with (logs / f"{name}.log").open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line == "serving", (logs / f"{name}.log").read_text()[-3000:]
    return process


def stop(process: subprocess.Popen[str] | None) -> None:
    if process is None:
        return
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


def wait_for(predicate: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_two_workers_share_a_queue_and_one_takes_over_the_runs_of_the_other(postgres_url: str, tmp_path: Path) -> None:
    # The first worker's charges answer slowly: when it has sent 4, a run of its is still in flight (not all 60
    # charges done however fast the machine), so the second worker has work to take over after the kill.
    with serve(create_app(delay=0.3, worker_delay={"first": 2.0})) as rest:
        first = start_worker(postgres_url, rest, "first", tmp_path)
        second: subprocess.Popen[str] | None = None
        client = DbosClient(postgres_url)
        try:
            run_ids = [
                client.submit("workflow:charges", {"input": {"amount": n}}, run_id=f"run-{n}") for n in range(RUNS)
            ]
            # Submitting a run id again is the same run: the queue holds 20, not 21.
            assert client.submit("workflow:charges", {"input": {"amount": 0}}, run_id="run-0") == "run-0"
            second = start_worker(postgres_url, rest, "second", tmp_path)
            # Kill the first worker while it waits for the answer to one of its charges.
            wait_for(lambda: sum(r["worker"] == "first" for r in fetch(f"{rest}/requests")) >= 4, "the first worker")
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            killed_at = len(fetch(f"{rest}/requests"))

            results = {run_id: client.result(run_id) for run_id in run_ids}
        finally:
            client.close()
            stop(first)
            stop(second)

        assert all(result["status"] == "succeeded" for result in results.values()), results
        for n in range(RUNS):
            assert results[f"run-{n}"]["output"]["charges"] is not None

        requests = fetch(f"{rest}/requests")
        effects = fetch(f"{rest}/effects")
        assert killed_at < len(requests)  # the work went on after the kill
        # One effect per logical call: 3 charges per run, each once, whoever sent it and however often.
        assert len(effects) == 3 * RUNS
        keys = [effect["key"] for effect in effects]
        assert len(set(keys)) == 3 * RUNS
        for n in range(RUNS):
            assert sum(key.startswith(f"run-{n}.") for key in keys) == 3
        # The second worker finished runs the first had begun: a run with requests from both.
        by_run: dict[str, set[str]] = {}
        for request in requests:
            by_run.setdefault(request["key"].split(".")[0], set()).add(request["worker"])
        assert any(workers == {"first", "second"} for workers in by_run.values()), by_run
        assert {"first", "second"} <= {request["worker"] for request in requests}
