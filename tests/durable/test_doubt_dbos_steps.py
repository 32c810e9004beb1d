"""Steps in doubt with DBOS's own step log (``DbosRunner(step_log="dbos")``): the worker is killed (``SIGKILL``)
during charge C of five, after the shop made it and before it answered; a new worker takes the run up. C's sent mark
(a DBOS step ``<name> (sent)``) is replayed without C's own record, so C's outcome is unknown and the shop server's
doubt policy (``on_doubt`` in the workflow file) decides: ``fail`` ends the run with ``OutcomeUnknownError`` at C,
nothing sent again; ``replay`` sends C again (with its key); ``ask`` waits for ``kavalai runs resolve RUN 3 --done``
(or ``--retry``). Counted at the shop.

The operator's answer is awaited inside the tool call, within its time limit (as with the kavalai step log): the ask
cases give the shop's tool two minutes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kavalai.durable.dbos import DbosClient
from tests.durable.fault_matrix import ROOT, TOOL_TIMEOUT, Case, Outcome, fetch, finish, start
from tests.durable.test_doubt_temporal import settled_as, with_policy
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(300)

CASE = Case("sqlite", "during", 1)


def asked(url: str, run_id: str) -> dict[str, Any]:
    """The run's questions, once it asks about step 3 (bounded wait)."""
    client = DbosClient(url)
    try:
        for _ in range(1200):
            found = client.pending(run_id)
            if "doubt-3" in found:
                return found
            time.sleep(0.1)
        return {}
    finally:
        client.close()


def resolve(url: str, run_id: str, *how: str) -> subprocess.CompletedProcess[str]:
    """``kavalai runs resolve RUN_ID 3 ...`` in a process of its own."""
    command = [sys.executable, "-m", "kavalai.cli.main", "runs", "resolve", run_id, "3", *how, "--db", url]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    "policy",
    ["fail", *(pytest.param(policy, marks=pytest.mark.faults) for policy in ("replay", "ask-done", "ask-retry"))],
)
def test_a_dbos_step_log_step_in_doubt_follows_its_servers_policy(tmp_path: Path, policy: str) -> None:
    workflow = tmp_path / "five.yaml"
    text = with_policy(policy.partition("-")[0])
    if policy.startswith("ask"):  # the wait for the operator is inside the tool call's own time limit (see below)
        assert f"        timeout: {TOOL_TIMEOUT}\n" in text
        text = text.replace(f"        timeout: {TOOL_TIMEOUT}\n", "        timeout: 120\n")
    workflow.write_text(text, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    run_id = f"doubt-{policy}-{uuid.uuid4().hex[:8]}"
    outcome = Outcome(CASE)
    with serve(create_app(kill_during="C", honour_keys=policy == "replay")) as shop:
        first = start(CASE, url, workflow, run_id, "first", shop, "--step-log", "dbos")
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        resumer = start(CASE, url, workflow, run_id, "resumer", shop, "--step-log", "dbos")
        if policy.startswith("ask"):
            question = asked(url, run_id).get("doubt-3")
            assert question is not None, (tmp_path / "resumer.log").read_text()
            assert (question["kind"], question["uri"]) == ("doubt", "rest://shop.charge")
            assert [r["order"] for r in fetch(f"{shop}/requests")] == ["A", "B", "C"]  # nothing sent while it asks
            how = ["--done", "--result", '{"charge": 3, "order": "C", "amount": 5}']
            settled = resolve(url, run_id, *(how if policy == "ask-done" else ["--retry"]))
            assert settled.returncode == 0, settled.stderr
        output = finish(resumer, 180, outcome)
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    assert outcome.problems == [], (tmp_path / "resumer.log").read_text()
    settled_as(policy, output, requests, effects)
