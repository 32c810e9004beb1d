"""Steps in doubt on Temporal: the worker is killed (``SIGKILL``) during charge C of five, after the shop made it and
before it answered; a new worker takes the run up, and C's activity, started and never finished, times out. The
shop server was given a doubt policy (``on_doubt`` in the workflow file: it is not trusted with the idempotency key),
so what happens next is the policy's: ``fail`` ends the run with ``OutcomeUnknownError`` at C, nothing sent again;
``replay`` lets Temporal send C again (with its key: the shop makes it once); ``ask`` waits for ``kavalai runs resolve
RUN 3 --done`` (or ``--retry``). Counted at the shop.

A killed worker's step is found by its missing heartbeats (``TemporalRunner(heartbeat_timeout=)``), not after the
step's whole time limit: with a limit of an hour, the run still ends in doubt, the history saying why."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kavalai.durable import TemporalRunner
from tests.durable.fault_matrix import ROOT, TOOL_TIMEOUT, Case, Outcome, fetch, finish, start, workflow_text
from tests.durable.test_doubt import refused_resolve
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(300)

CASE = Case("temporal", "during", 1)


def with_policy(policy: str) -> str:
    """The fault matrix's five-charge workflow, its shop server given ``on_doubt: policy``."""
    text = workflow_text()
    assert "    url_env: SHOP_URL\n" in text
    return text.replace("    url_env: SHOP_URL\n", f"    url_env: SHOP_URL\n    on_doubt: {policy}\n")


def resolve(address: str, queue: str, run_id: str, *how: str, step: int = 3) -> subprocess.CompletedProcess[str]:
    """``kavalai runs resolve RUN_ID STEP ...`` on Temporal (step 3 by default), in a process of its own."""
    command = [sys.executable, "-m", "kavalai.cli.main", "runs", "resolve", run_id, str(step), *how]
    command += ["--engine", "temporal", "--address", address, "--queue", queue]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


async def asked(address: str, queue: str, run_id: str) -> dict[str, Any]:
    """The run's questions, once it asks about step 3 (bounded wait)."""
    runner = TemporalRunner(address, task_queue=queue, worker=False)
    try:
        for _ in range(1200):
            try:
                found = await runner.pending(run_id)
            except Exception:  # no worker holds the run yet: the query fails until one does
                found = {}
            if "doubt-3" in found:
                return found
            await asyncio.sleep(0.1)
        return {}
    finally:
        await runner.aclose()


def in_doubt_shown(address: str, queue: str, run_id: str) -> list[dict[str, Any]]:
    """``kavalai runs show``'s ``in_doubt`` of the run (from its history: no worker needed)."""

    async def show() -> list[dict[str, Any]]:
        runner = TemporalRunner(address, task_queue=queue, worker=False)
        try:
            return (await runner.describe(run_id)).in_doubt
        finally:
            await runner.aclose()

    return asyncio.run(show())


STEP_C = {"position": 3, "name": "c#1/tool rest://shop.charge#1", "state": "in_doubt"}


@pytest.mark.parametrize("policy", ["fail", "replay"])
def test_a_temporal_step_in_doubt_fails_or_is_replayed_as_its_server_says(
    temporal_address: str, tmp_path: Path, policy: str
) -> None:
    in_doubt(temporal_address, tmp_path, policy)


@pytest.mark.parametrize("policy", ["ask-done", "ask-retry"])
def test_a_temporal_step_in_doubt_of_a_server_that_says_ask_waits_for_kavalai_runs_resolve(
    temporal_address: str, tmp_path: Path, policy: str
) -> None:
    in_doubt(temporal_address, tmp_path, policy)


def test_a_killed_workers_step_is_in_doubt_by_its_missing_heartbeats_not_its_time_limit(
    temporal_address: str, tmp_path: Path
) -> None:
    """The tool's timeout and the step's limit are an hour (the test's own bound is 300 s): only the heartbeat
    timeout can end C's activity, whose worker was SIGKILLed; the run ends in doubt at C, C sent once."""
    in_doubt(temporal_address, tmp_path, "fail", limit=3600)
    run_id = (tmp_path / "run_id").read_text()
    assert asyncio.run(timeouts(temporal_address, run_id)) == ["TIMEOUT_TYPE_HEARTBEAT"]


async def timeouts(address: str, run_id: str) -> list[str]:
    """The timeout type of each activity of the run that timed out, from its history."""
    from temporalio.api.enums.v1 import TimeoutType
    from temporalio.client import Client

    client = await Client.connect(address)
    found = []
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        if event.HasField("activity_task_timed_out_event_attributes"):
            failure = event.activity_task_timed_out_event_attributes.failure
            found.append(TimeoutType.Name(failure.timeout_failure_info.timeout_type))
    return found


def in_doubt(temporal_address: str, tmp_path: Path, policy: str, *, limit: int | None = None) -> None:
    """One case: the worker killed during C, a new one takes the run up, the policy decides (the module's doc).
    ``limit``: the tool's timeout and the step's limit, in seconds, instead of the matrix's."""
    workflow = tmp_path / "five.yaml"
    text = with_policy(policy.partition("-")[0])
    if limit is not None:
        assert f"        timeout: {TOOL_TIMEOUT}\n" in text
        text = text.replace(f"        timeout: {TOOL_TIMEOUT}\n", f"        timeout: {limit}\n")
    workflow.write_text(text, encoding="utf-8")
    run_id = f"doubt-{policy}-{uuid.uuid4().hex[:8]}"
    (tmp_path / "run_id").write_text(run_id)
    queue = f"q-{run_id}"
    outcome = Outcome(CASE)
    extra = [] if limit is None else ["--step-timeout", str(limit)]
    with serve(create_app(kill_during="C", honour_keys=policy == "replay")) as shop:
        first = start(CASE, temporal_address, workflow, run_id, "first", shop, *extra)
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        resumer = start(CASE, temporal_address, workflow, run_id, "resumer", shop, *extra)
        if policy.startswith("ask"):
            questions = asyncio.run(asked(temporal_address, queue, run_id))
            question = questions.get("doubt-3")
            assert question is not None, (tmp_path / "resumer.log").read_text()
            assert (question["kind"], question["uri"]) == ("doubt", "rest://shop.charge")
            assert [r["order"] for r in fetch(f"{shop}/requests")] == ["A", "B", "C"]  # nothing sent while it asks
            assert in_doubt_shown(temporal_address, queue, run_id) == [STEP_C]
            for wrong in (2, 9):  # round 8's fault 8: a step that is done, a step the run lacks
                refused_resolve(resolve(temporal_address, queue, run_id, "--retry", step=wrong), run_id, wrong)
            assert [r["order"] for r in fetch(f"{shop}/requests")] == ["A", "B", "C"]  # nothing sent for them
            how = ["--done", "--result", '{"charge": 3, "order": "C", "amount": 5}']
            settled = resolve(temporal_address, queue, run_id, *(how if policy == "ask-done" else ["--retry"]))
            assert settled.returncode == 0, settled.stderr
        output = finish(resumer, 180, outcome)
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    assert outcome.problems == [], (tmp_path / "resumer.log").read_text()
    settled_as(policy, output, requests, effects)
    # in doubt at the end only when failed; resolved, or sent again and done, otherwise
    assert in_doubt_shown(temporal_address, queue, run_id) == ([STEP_C] if policy == "fail" else [])


def settled_as(policy: str, output: Any, requests: list[dict[str, Any]], effects: list[dict[str, Any]]) -> None:
    """What the resumed run returned and what the shop received, charge C in doubt under ``policy``."""
    orders = [r["order"] for r in requests]
    if policy == "fail":
        assert output["status"] == "failed"
        assert output["output"].startswith("Node 'c': Outcome unknown: check before retrying. Step 3 of run ")
        assert orders == [e["order"] for e in effects] == ["A", "B", "C"]  # C once, nothing after it
        return
    charges = [1, 2, 4, 5, 6] if policy == "ask-retry" else [1, 2, 3, 4, 5]  # the shop charged C again
    assert output == {"status": "succeeded", "output": {"charges": charges}}
    if policy == "ask-done":
        assert orders == ["A", "B", "C", "D", "E"]  # the operator said C happened: not sent again
    else:
        assert orders == ["A", "B", "C", "C", "D", "E"]  # sent again with its key
        assert len({r["key"] for r in requests if r["order"] == "C"}) == 1
    # The shop honours the key only in the replay case: there C is made once; a retry the operator asked for twice.
    made = ["A", "B", "C", "C", "D", "E"] if policy == "ask-retry" else ["A", "B", "C", "D", "E"]
    assert [e["order"] for e in effects] == made


def resolves_racing(address: str, directory: Path, round_: int) -> str:
    """One round of round 8's fault 7 on Temporal: the worker killed during C (its server says ``ask``), a new one
    takes the run up and asks; two ``kavalai runs resolve`` processes at once, ``--done`` and ``--retry``. Exactly
    one wins, the other is refused naming the answer that won; C is made once (done won) or twice (retry won: the
    shop here makes each request an effect), never more. Which one won."""
    from concurrent.futures import ThreadPoolExecutor

    directory.mkdir(parents=True, exist_ok=True)
    workflow = directory / "five.yaml"
    workflow.write_text(with_policy("ask"), encoding="utf-8")
    run_id = f"race-{round_}-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    outcome = Outcome(CASE)
    done_with = ["--done", "--result", '{"charge": 3, "order": "C", "amount": 5}']
    with serve(create_app(kill_during="C", honour_keys=False)) as shop:  # each request an effect
        first = start(CASE, address, workflow, run_id, "first", shop)
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        resumer = start(CASE, address, workflow, run_id, "resumer", shop)
        assert "doubt-3" in asyncio.run(asked(address, queue, run_id)), (directory / "resumer.log").read_text()
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda how: resolve(address, queue, run_id, *how), [done_with, ["--retry"]]))
        output = finish(resumer, 180, outcome)
        effects = [e["order"] for e in fetch(f"{shop}/effects")]
    won = [how for how, process in zip(("done", "retry"), both, strict=True) if process.returncode == 0]
    assert len(won) == 1, [(process.returncode, process.stderr) for process in both]
    lost = both[1] if won == ["done"] else both[0]
    assert lost.returncode == 1, lost.stderr
    assert lost.stderr.startswith(f"kavalai runs: Run {run_id}: 'doubt-3' was answered already, with "), lost.stderr
    assert "Traceback" not in lost.stderr
    assert outcome.problems == [], (directory / "resumer.log").read_text()
    assert output["status"] == "succeeded", output
    assert effects == (["A", "B", "C", "D", "E"] if won == ["done"] else ["A", "B", "C", "C", "D", "E"])
    return won[0]


@pytest.mark.faults
@pytest.mark.timeout(2400)
def test_two_resolves_of_one_temporal_step_in_doubt_racing_ten_rounds(temporal_address: str, tmp_path: Path) -> None:
    """Round 8's fault 7 on Temporal, 10 rounds: ``--done`` racing ``--retry`` on one step in doubt."""
    winners = [resolves_racing(temporal_address, tmp_path / f"round{n}", n) for n in range(10)]
    assert set(winners) <= {"done", "retry"}
