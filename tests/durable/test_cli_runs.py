"""``kavalai run --engine temporal --address ... [--submit]``, ``kavalai worker --engine temporal`` and ``kavalai
runs show|list|cancel`` on both engines, as real ``kavalai`` processes (issue 27)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.durable.conftest import ROOT
from tests.durable.test_cli import TOOLS, WORKFLOW, kavalai, ledger

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    (tmp_path / "ledger_tools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "ledger.yaml"
    path.write_text(WORKFLOW, encoding="utf-8")
    return path


def until(found: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := found()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def start_worker(workflow: Path, *options: str, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "kavalai.cli.main", "worker", str(workflow), *options]
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.Popen(command, cwd=workflow.parent, env=full, stderr=subprocess.PIPE, text=True)


def stop(worker: subprocess.Popen[str]) -> str:
    worker.send_signal(signal.SIGINT)
    _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 130, stderr[-3000:]
    return stderr


def test_temporal_from_the_command_line(workflow: Path, tmp_path: Path, temporal_address: str) -> None:
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}
    engine = ["--engine", "temporal", "--address", temporal_address, "--queue", f"cli-{uuid.uuid4().hex[:8]}"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return kavalai(*args, env=env, cwd=tmp_path)

    def show(run_id: str) -> dict[str, Any]:
        shown = run("runs", "show", run_id, *engine)
        assert shown.returncode == 0, shown.stderr[-2000:]
        found: dict[str, Any] = json.loads(shown.stdout)
        return found

    for who in ("ann", "bob"):
        submitted = run("run", str(workflow), "--input", json.dumps({"who": who}), "--run-id", who, "--submit", *engine)
        assert submitted.returncode == 0, submitted.stderr[-2000:]
        assert submitted.stdout.strip() == who
    assert show("ann")["state"] == "running"  # started, no worker yet
    cancelled = run("runs", "cancel", "bob", *engine)
    assert cancelled.returncode == 0, cancelled.stderr[-2000:]
    assert "cancelled bob" in cancelled.stderr

    worker = start_worker(workflow, *engine, env=env)
    try:
        finished = until(lambda: (found := show("ann"))["state"] == "finished" and found, "ann to finish")
        assert until(lambda: show("bob")["state"] == "cancelled", "bob's cancellation")
        # Without --submit: a worker in this process too, the output printed when the run ends.
        here = run("run", str(workflow), "--input", '{"who": "cy"}', "--run-id", "cy", *engine)
    finally:
        stderr = stop(worker)
    assert "serving workflow:ledger" in stderr
    assert finished["engine_status"] == "COMPLETED"
    assert finished["outcome"]["output"] == {"paid": [1, 2, 3]}
    assert here.returncode == 0, here.stderr[-2000:]
    assert json.loads(here.stdout) == {"paid": [4, 5, 6]}
    assert [entry["order"] for entry in ledger(tmp_path / "ledger.jsonl")] == [
        "ann-A", "ann-B", "ann-C", "cy-A", "cy-B", "cy-C"
    ]  # fmt: skip

    listed = run("runs", "list", *engine)
    assert listed.returncode == 0, listed.stderr[-2000:]
    states = {line.split("\t")[0]: line.split("\t")[1] for line in listed.stdout.splitlines()}
    assert states == {"ann": "finished", "bob": "cancelled", "cy": "finished"}

    unknown = run("runs", "show", "nobody", *engine)
    assert unknown.returncode == 1
    assert "no run 'nobody'" in unknown.stderr
    blank = run("runs", "show", " ", *engine)
    assert blank.returncode == 2
    assert "A run id is 1 to 200 printable characters" in blank.stderr
    bad = run("run", str(workflow), "--run-id", " ", "--submit", *engine)
    assert bad.returncode == 2
    assert "A run id is 1 to 200 printable characters" in bad.stderr
    mixed = run("worker", str(workflow), "--db", "sqlite:///x.sqlite", *engine)
    assert mixed.returncode == 2
    assert "--db and --concurrency are DBOS's" in mixed.stderr


def test_runs_on_a_dbos_journal(workflow: Path, tmp_path: Path) -> None:
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}
    db = ["--db", f"sqlite:///{tmp_path / 'journal.sqlite'}"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return kavalai(*args, env=env, cwd=tmp_path)

    for who in ("dee", "eve"):
        submitted = run("run", str(workflow), "--input", json.dumps({"who": who}), "--run-id", who, "--submit", *db)
        assert submitted.returncode == 0, submitted.stderr[-2000:]
    listed = run("runs", "list", "--json", *db)
    assert listed.returncode == 0, listed.stderr[-2000:]
    runs = {run["run_id"]: run for run in json.loads(listed.stdout)}
    assert {name: (r["state"], r["engine_status"], r["target"]) for name, r in runs.items()} == {
        "dee": ("queued", "ENQUEUED", "workflow:ledger"),
        "eve": ("queued", "ENQUEUED", "workflow:ledger"),
    }
    assert run("runs", "cancel", "eve", *db).returncode == 0

    worker = start_worker(workflow, *db, env=env)
    try:
        until(lambda: len(ledger(tmp_path / "ledger.jsonl")) == 3, "dee's three payments")
        shown = until(
            lambda: (found := json.loads(run("runs", "show", "dee", *db).stdout))["state"] == "finished" and found,
            "dee to finish",
        )
    finally:
        stop(worker)
    assert shown["outcome"]["output"] == {"paid": [1, 2, 3]}
    assert json.loads(run("runs", "show", "eve", *db).stdout)["state"] == "cancelled"
    again = run("run", str(workflow), "--input", '{"who": "eve"}', "--run-id", "eve", *db)
    assert again.returncode == 1
    # One line (after the progress line), no traceback; the run is not revived.
    assert again.stderr.strip().splitlines()[-1:] == [
        "kavalai run: Run eve is cancelled: no step of it begins any more, and it is not resumed."
    ]
    assert "Traceback" not in again.stderr
    assert json.loads(run("runs", "show", "eve", *db).stdout)["state"] == "cancelled"
    assert [entry["order"] for entry in ledger(tmp_path / "ledger.jsonl")] == ["dee-A", "dee-B", "dee-C"]
    unknown = run("runs", "cancel", "nobody", *db)
    assert unknown.returncode == 1
    assert "no run 'nobody'" in unknown.stderr
    assert "`kavalai run WORKFLOW --run-id nobody`" in unknown.stderr  # suggested as a command, not a Python call
    assert "run_id=" not in unknown.stderr
    assert run("runs", "list").returncode == 2  # which journal?


def test_runs_finds_the_journal_kavalai_run_keeps_by_default(workflow: Path, tmp_path: Path) -> None:
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return kavalai(*args, env=env, cwd=tmp_path)

    done = run("run", str(workflow), "--input", '{"who": "fay"}', "--run-id", "fay", "--durable")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "ledger.yaml.runs.sqlite").exists()
    shown = run("runs", "show", "fay", "--workflow", str(workflow))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert json.loads(shown.stdout)["state"] == "finished"
    listed = run("runs", "list")  # the one journal of this directory
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert [line.split("\t")[:2] for line in listed.stdout.splitlines()] == [["fay", "finished"]]


def test_an_operators_slips_on_a_finished_dbos_run_change_nothing(workflow: Path, tmp_path: Path) -> None:
    """A cancel of a run that has ended is refused as on Temporal (on base: `cancelled fay`, exit 0, while the run
    stayed finished); ``--result`` with ``--retry`` and a ``--limit`` below 1 are usage errors (on base the result
    was dropped without a word, and ``--limit 0`` / ``-1`` listed runs anyway)."""
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}
    db = ["--db", f"sqlite:///{tmp_path / 'ledger.yaml.runs.sqlite'}"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return kavalai(*args, env=env, cwd=tmp_path)

    assert run("run", str(workflow), "--input", '{"who": "gus"}', "--run-id", "gus", "--durable").returncode == 0
    for _ in range(2):
        cancelled = run("runs", "cancel", "gus", *db)
        assert cancelled.returncode == 1, cancelled.stderr
        assert cancelled.stderr.splitlines() == [
            "kavalai runs: Run gus has ended (finished): there is nothing to cancel."
        ]
    shown = json.loads(run("runs", "show", "gus", *db).stdout)
    assert (shown["state"], shown["outcome"]["output"]) == ("finished", {"paid": [1, 2, 3]})
    retry = run("runs", "resolve", "gus", "2", "--retry", "--result", '{"n": 2}', *db)
    assert retry.returncode == 2
    assert "--result goes with --done" in retry.stderr
    for limit in ("0", "-1", "many"):
        listed = run("runs", "list", "--limit", limit, *db)
        assert listed.returncode == 2
        assert "is not a number of runs: give 1 or more" in listed.stderr
        assert listed.stdout == ""
    assert [entry["order"] for entry in ledger(tmp_path / "ledger.jsonl")] == ["gus-A", "gus-B", "gus-C"]
