"""Steps in doubt with DBOS's own step log (``DbosRunner(step_log="dbos")``): the worker is killed (``SIGKILL``)
during charge C of five, after the shop made it and before it answered; a new worker takes the run up. C's sent mark
(a DBOS step ``<name> (sent)``) is replayed without C's own record, so C's outcome is unknown and the shop server's
doubt policy (``on_doubt`` in the workflow file) decides: ``fail`` ends the run with ``OutcomeUnknownError`` at C,
nothing sent again; ``replay`` sends C again (with its key); ``ask`` waits for ``kavalai runs resolve RUN 3 --done``
(or ``--retry``). Counted at the shop; ``kavalai runs show`` lists C while it is in doubt, as on the kavalai step log.

The operator's answer is awaited outside the tool call's time limit, on either step log: a tool's timeout bounds its
effect, not the operator (the last test answers after the tool's timeout has passed)."""

from __future__ import annotations

import json
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


def shown(url: str, run_id: str) -> list[dict[str, Any]]:
    """The steps in doubt that ``kavalai runs show RUN_ID`` prints, in a process of its own."""
    command = [sys.executable, "-m", "kavalai.cli.main", "runs", "show", run_id, "--db", url]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=True)
    found: list[dict[str, Any]] = json.loads(done.stdout)["in_doubt"]
    return found


#: How ``kavalai runs show`` lists charge C, the third step, in doubt (``state`` added).
C = {"position": 3, "name": "c#1/tool rest://shop.charge#1"}


@pytest.mark.parametrize(
    "policy",
    ["fail", *(pytest.param(policy, marks=pytest.mark.faults) for policy in ("replay", "ask-done", "ask-retry"))],
)
def test_a_dbos_step_log_step_in_doubt_follows_its_servers_policy(tmp_path: Path, policy: str) -> None:
    workflow = tmp_path / "five.yaml"
    workflow.write_text(with_policy(policy.partition("-")[0]), encoding="utf-8")
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
            assert shown(url, run_id) == [{**C, "state": "sent"}]  # asking
            how = ["--done", "--result", '{"charge": 3, "order": "C", "amount": 5}']
            settled = resolve(url, run_id, *(how if policy == "ask-done" else ["--retry"]))
            assert settled.returncode == 0, settled.stderr
        output = finish(resumer, 180, outcome)
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    assert outcome.problems == [], (tmp_path / "resumer.log").read_text()
    settled_as(policy, output, requests, effects)
    assert shown(url, run_id) == ([{**C, "state": "in_doubt"}] if policy == "fail" else [])


#: The shop tool's timeout in :func:`test_the_operator_may_answer_after_the_tools_timeout`.
SHORT = 1


@pytest.mark.parametrize("step_log", ["kavalai", "dbos"])
def test_the_operator_may_answer_after_the_tools_timeout(tmp_path: Path, step_log: str) -> None:
    """The tool's timeout bounds its effect, not the operator: charge C (a one-second tool, ``on_doubt: ask``) in
    doubt, the run asks, and the answer comes after more than that second has passed: the run goes on as answered
    (it failed "timed out" when the wait ran inside the call's deadline)."""
    workflow = tmp_path / "five.yaml"
    text = with_policy("ask")
    assert f"        timeout: {TOOL_TIMEOUT}\n" in text
    workflow.write_text(text.replace(f"        timeout: {TOOL_TIMEOUT}\n", f"        timeout: {SHORT}\n"), "utf-8")
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    run_id = f"late-{step_log}-{uuid.uuid4().hex[:8]}"
    outcome = Outcome(CASE)
    with serve(create_app(kill_during="C")) as shop:
        first = start(CASE, url, workflow, run_id, "first", shop, "--step-log", step_log)
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        resumer = start(CASE, url, workflow, run_id, "resumer", shop, "--step-log", step_log)
        assert "doubt-3" in asked(url, run_id), (tmp_path / "resumer.log").read_text()
        time.sleep(SHORT + 1.5)  # past the tool's timeout: the run must still be waiting for the answer
        assert "doubt-3" in asked(url, run_id)
        assert resumer.poll() is None, (tmp_path / "resumer.log").read_text()
        assert shown(url, run_id) == [{**C, "state": "sent"}]  # on either step log
        settled = resolve(url, run_id, "--done", "--result", '{"charge": 3, "order": "C", "amount": 5}')
        assert settled.returncode == 0, settled.stderr
        output = finish(resumer, 180, outcome)
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    assert outcome.problems == [], (tmp_path / "resumer.log").read_text()
    settled_as("ask-done", output, requests, effects)
    assert shown(url, run_id) == []  # resolved done
