"""Round 9's faults met through ``kavalai run`` (``tests/durable/FAULTS_round9.md``): two ``kavalai run --run-id``
of one new run started at once on the default journal (fault 8); the workflow file moved with its journal between a
crash and the resume (fault 11). Counted in the Python tool's ledger, keyed by the call's idempotency key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.durable.conftest import ROOT
from tests.durable.test_cli import kavalai, ledger, workflow

pytestmark = pytest.mark.timeout(240)

__all__ = ["workflow"]  # the fixture, shared with test_cli.py


def test_two_runs_of_one_new_run_id_at_once_are_one_run(workflow: Path, tmp_path: Path) -> None:
    """Fault 8: both processes make the default journal beside the file and start the run; one run, each payment
    once, both print its output."""
    command = [sys.executable, "-m", "kavalai.cli.main", "run", str(workflow), "--durable", "--run-id", "both-1"]
    command += ["--input", '{"who": "w"}', "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEDGER": str(tmp_path / "ledger.jsonl")}
    started = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    ended = [process.communicate(timeout=180) for process in started]
    for process, (stdout, stderr) in zip(started, ended, strict=True):
        assert process.returncode == 0, stderr
        assert json.loads(stdout) == {"paid": [1, 2, 3]}
    paid = ledger(tmp_path / "ledger.jsonl")
    assert [entry["order"] for entry in paid] == ["w-A", "w-B", "w-C"]
    attempts = ledger(tmp_path / "ledger.jsonl.attempts")
    assert len(attempts) == 3, attempts  # one attempt a step: the other process did not run the steps too


def test_a_workflow_moved_with_its_journal_resumes_there(workflow: Path, tmp_path: Path) -> None:
    """Fault 11: the run dies after paying B; the file, its tools and its journal (``ledger.yaml.runs.sqlite``)
    are moved to another folder; ``kavalai run`` of the moved file resumes the run, each payment once."""
    env = {"LEDGER": str(tmp_path / "ledger.jsonl"), "CRASH_ON": "m-B"}
    args = ["--run-id", "moved-1", "--input", '{"who": "m"}', "--quiet"]
    first = kavalai("run", str(workflow), "--durable", *args, env=env, cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("ledger.yaml", "ledger_tools.py", "ledger.yaml.runs.sqlite"):
        os.replace(tmp_path / name, moved / name)
    for extra in tmp_path.glob("ledger.yaml.runs.sqlite-*"):  # the WAL, if the crash left one
        os.replace(extra, moved / extra.name)
    second = kavalai("run", str(moved / "ledger.yaml"), "--durable", *args, env={"LEDGER": env["LEDGER"]}, cwd=moved)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == {"paid": [1, 2, 3]}
    assert [entry["order"] for entry in ledger(tmp_path / "ledger.jsonl")] == ["m-A", "m-B", "m-C"]
    orders = [a["order"] for a in ledger(tmp_path / "ledger.jsonl.attempts")]
    assert orders == ["m-A", "m-B", "m-B", "m-C"]  # A replayed from the moved journal, B again with its key
