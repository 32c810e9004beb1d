"""Round 9's fault 1 (``tests/durable/FAULTS_round9.md``): a DBOS worker frozen (``SIGSTOP``) while charge C is in
flight, for longer than its lease (``stale_after``): another worker takes the run over and finishes it, then the
first is let go (``SIGCONT``). Two workers believed they owned step C: each charge is made once (one key a step),
the run completed once, and the woken worker's caller gets the run's outcome. (It was told ``RunInterruptedError
... It stays resumable``: its own step, cut on waking, parked the run here though another worker had finished it.)"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from pathlib import Path

import pytest

from tests.durable.fault_matrix import Case, Outcome, completed, fetch, finish, start, workflow_text
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(420)


def test_a_worker_frozen_past_its_lease_while_another_finishes_its_run(journal_url: str, tmp_path: Path) -> None:
    reached, held = threading.Event(), threading.Event()
    seen: list[str] = []

    def hold_first_c(order: str) -> None:
        seen.append(order)
        if seen.count("C") == 1 and order == "C":
            reached.set()
            held.wait(150)

    workflow = tmp_path / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    case = Case("postgres" if journal_url.startswith("postgresql") else "sqlite", "during", 1)
    run_id = f"frozen-{uuid.uuid4().hex[:8]}"
    outcome = Outcome(case)
    with serve(create_app(on_charge=hold_first_c)) as shop:
        first = start(case, journal_url, workflow, run_id, "first", shop)
        try:
            assert reached.wait(150), (tmp_path / "first.log").read_text()
            os.kill(first.pid, signal.SIGSTOP)  # frozen with C in flight: its heartbeat stops
            second = start(case, journal_url, workflow, run_id, "second", shop)
            took_over = finish(second, 200, outcome)
            os.kill(first.pid, signal.SIGCONT)
            held.set()  # C's first answer reaches the woken worker
            woke = finish(first, 200, outcome)
        finally:
            held.set()
            if first.poll() is None:  # a failed check: not left frozen
                first.kill()
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    logs = (tmp_path / "first.log").read_text(errors="replace")[-2000:]
    expected = {"status": "succeeded", "output": {"charges": [1, 2, 3, 4, 5]}}
    assert took_over == expected, outcome.problems
    assert woke == expected, f"{outcome.problems}\n{logs}"
    assert [e["order"] for e in effects] == ["A", "B", "C", "D", "E"]
    for order in "ABCDE":
        assert len({r["key"] for r in requests if r["order"] == order}) == 1
    assert [r["order"] for r in requests if r["order"] != "C"] == ["A", "B", "D", "E"]
    assert completed(case, journal_url, run_id, outcome), outcome.problems
