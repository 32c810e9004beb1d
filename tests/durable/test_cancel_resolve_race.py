"""Round 9's fault 6 (``tests/durable/FAULTS_round9.md``): ``kavalai runs cancel`` racing ``kavalai runs resolve
--retry`` on a step in doubt whose tool says ``ask``, each in a process of its own, started together. Each round
the run ends cancelled or finished, never both; a cancelled run sends nothing after the cancel (C never, B at most
twice); a resolve that lost to the cancel, or a cancel that came after the run finished, says so (exit 1, one
line, no traceback)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kavalai.durable import DbosRunner
from kavalai.durable.dbos import DbosClient
from kavalai.errors import RunCancelledError, RunInterruptedError
from tests.durable.conftest import ROOT, fetch
from tests.durable.test_doubt import asked, journal, unkeyed_engine
from tests.durable.test_journal_io import orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(400)

ROUNDS = 3


def cli(url: str, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "kavalai.cli.main", "runs", *args, "--db", url]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def one_round(tmp_path: Path) -> str:
    await asyncio.to_thread(tmp_path.mkdir)
    with journal("sqlite", tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                with pytest.raises(RunInterruptedError):
                    await unkeyed_engine(runner, shop, on_doubt="ask").run({}, run_id="race-1")
                await asyncio.to_thread(store.release)
                done = asyncio.ensure_future(unkeyed_engine(runner, shop, on_doubt="ask").run({}, run_id="race-1"))
                await asked(runner, "race-1", "doubt-2", done)
                racing = [cli(store.url, "resolve", "race-1", "2", "--retry"), cli(store.url, "cancel", "race-1")]
                (_, resolve_err), (_, cancel_err) = [
                    await asyncio.to_thread(p.communicate, timeout=120) for p in racing
                ]
                try:
                    result = await asyncio.wait_for(done, 120)
                    ended = "finished" if result.ok else f"failed: {result.error}"
                except RunCancelledError:
                    ended = "cancelled"
                sent = orders(fetch(f"{shop}/requests"))
            client = DbosClient(store.url)
            try:
                state = client.describe("race-1").state
            finally:
                client.close()
        finally:
            await runner.aclose()
    assert "Traceback" not in resolve_err + cancel_err, resolve_err + cancel_err
    if racing[0].returncode != 0:
        assert resolve_err.startswith("kavalai runs: "), resolve_err
        assert resolve_err.count("\n") == 1, resolve_err
    if ended == "cancelled":
        assert state == "cancelled"
        assert racing[1].returncode == 0, cancel_err
        assert sent in (["A", "B"], ["A", "B", "B"])  # C never; B again only if the retry won the race
        if racing[0].returncode != 0:
            assert sent == ["A", "B"]
    else:
        assert ended == "finished"  # the retry won and C ran before the cancel landed
        assert state == "finished"
        assert racing[0].returncode == 0
        assert sent == ["A", "B", "B", "C"]
        # the cancel landed on the finished run, or before it ended and too late to stop C: never both outcomes
        assert racing[1].returncode == 0 or "has ended (finished): there is nothing to cancel" in cancel_err
    return f"{ended}, resolve exit {racing[0].returncode}"


async def test_a_cancel_racing_a_retry_of_a_step_in_doubt(tmp_path: Path) -> None:
    outcomes = [await one_round(tmp_path / f"round{n}") for n in range(ROUNDS)]
    print(outcomes)
