"""A run whose worker was killed (SIGKILL) while a REST step was in flight, resumed by the documented call in this
process, ``WorkflowEngine.from_yaml(f, durable=TemporalRunner(address)).run(input, run_id=...)``: the call returns
the run's output and the worker this process started shuts down cleanly afterwards (issue 27)."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from kavalai.durable import TemporalRunner
from kavalai.workflow import WorkflowEngine
from tests.durable.fault_matrix import Case, fetch, start, workflow_text
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(180)


async def test_a_run_killed_during_a_rest_step_is_resumed_by_the_documented_call_here(
    temporal_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = tmp_path / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    case = Case("temporal", "during", 1)
    with serve(create_app(kill_during="C")) as rest:
        first = start(case, temporal_address, workflow, "R1", "first", rest)
        first.communicate(timeout=120)
        assert first.returncode == -signal.SIGKILL, (tmp_path / "first.log").read_text()[-3000:]
        assert [r["order"] for r in fetch(f"{rest}/requests")] == ["A", "B", "C"]

        monkeypatch.setenv("SHOP_URL", rest)
        monkeypatch.setenv("WORKER_NAME", "here")
        monkeypatch.setenv("WORKER_PID", str(os.getpid()))
        runner = TemporalRunner(temporal_address, task_queue="q-R1", step_timeout=4)
        engine = WorkflowEngine.from_yaml(workflow, durable=runner)
        with caplog.at_level(logging.WARNING, logger="temporalio"):
            try:
                result = await engine.run({"amount": 5}, run_id="R1")
                # The worker run() started is down when it returns: nothing is left for the loop's end to cancel.
                assert not runner.serving
            finally:
                await runner.aclose()
                await engine.aclose()
        requests = fetch(f"{rest}/requests")

    assert result.ok, result.error
    assert result.output_data() == {"charges": [1, 2, 3, 4, 5]}
    assert [r["order"] for r in requests] == ["A", "B", "C", "C", "D", "E"]
    assert requests[2]["key"] == requests[3]["key"]
    assert [r["worker"] for r in requests[3:]] == ["here"] * 3
    assert not [r.getMessage() for r in caplog.records if "evict" in r.getMessage().lower()]
