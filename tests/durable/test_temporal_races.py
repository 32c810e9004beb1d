"""Temporal fault cases beyond the matrix's rows (issue 35): two workers of different definitions serving one task
queue unversioned. Asserted by the runs' final states and by counts at a local shop, never by elapsed time."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from kavalai.durable import TemporalRunner
from kavalai.errors import DefinitionChangedError
from kavalai.workflow import WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.fault_matrix import ROOT, workflow_text
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = [pytest.mark.timeout(300), pytest.mark.faults]


async def test_two_workers_of_different_definitions_on_one_queue_end_or_finish_each_run_never_stall(
    temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker of a changed definition (node ``x`` added) serves the task queue; a process of the original one
    starts runs there, its own worker beside it. Each run is taken by one of them: finished (its output), or ended
    by the other worker with :class:`DefinitionChangedError` naming ``x`` recorded (the process told so, exit 1),
    never left with a workflow task failing for ever; each charge made at most once."""
    workflow_file, changed_file = tmp_path / "five.yaml", tmp_path / "changed.yaml"
    workflow_file.write_text(workflow_text(), encoding="utf-8")
    changed_file.write_text(workflow_text("added"), encoding="utf-8")
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with serve(create_app()) as shop:
        for name, value in (("SHOP_URL", shop), ("WORKER_NAME", "changed"), ("WORKER_PID", "")):
            monkeypatch.setenv(name, value)
        runner = TemporalRunner(temporal_address, task_queue=queue)
        engine = WorkflowEngine.from_yaml(changed_file, durable=runner)
        runner.register(engine)
        try:
            await runner.start_worker()
            states = []
            for n in range(3):
                run_id = f"two-{n}-{uuid.uuid4().hex[:8]}"
                command = [sys.executable, "-m", "tests.servers.fault_worker", "temporal", temporal_address]
                command += [str(workflow_file), run_id, "original", "--task-queue", queue]
                env = {**os.environ, "PYTHONPATH": str(ROOT)}
                process = await asyncio.create_subprocess_exec(
                    *command, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
                )
                stdout, stderr = await asyncio.wait_for(process.communicate(), 180)
                info = await runner.describe(run_id)
                if process.returncode == 0:
                    assert json.loads(stdout.decode().splitlines()[-1])["status"] == "succeeded"
                    assert info.state == "finished"
                else:
                    assert process.returncode == 1, stderr.decode()[-2000:]
                    assert "DefinitionChangedError" in stderr.decode()
                    assert info.state == "failed"
                    assert info.error is not None
                    assert "step 'x' was added" in info.error
                    with pytest.raises(DefinitionChangedError):
                        await runner.result(run_id)
                states.append(info.state)
            effects = fetch(f"{shop}/effects")
            assert len({e["key"] for e in effects}) == len(effects)  # no charge made twice
            assert len(states) == 3
        finally:
            await runner.aclose()
            await engine.aclose()
