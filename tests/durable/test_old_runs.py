"""Runs begun by an earlier release, which recorded steps by position (``tool rest://shop.charge``, before steps had
identities), resumed under this one: refused with :class:`DefinitionChangedError` naming the step, nothing sent
again. (The kavalai step log's case is ``test_definition.py``'s; this is DBOS's own step log, ``step_log="dbos"``.)"""

from __future__ import annotations

import signal
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from kavalai.durable import DbosRunner
from kavalai.errors import DefinitionChangedError
from kavalai.workflow import WorkflowEngine
from tests.durable.fault_matrix import Case, fetch, start, workflow_text
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(100)

CASE = Case("sqlite", "during", 1)


async def test_a_dbos_step_log_recorded_by_position_is_refused_naming_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker killed during charge C (A and B recorded as DBOS steps); A's DBOS step renamed as the earlier
    release named it; a resume in this process is refused naming it, and the shop sees nothing new."""
    workflow = tmp_path / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    path = tmp_path / "journal.sqlite"
    url = f"sqlite:///{path}"
    run_id = f"old-{uuid.uuid4().hex[:8]}"
    with serve(create_app(kill_during="C")) as shop:
        first = start(CASE, url, workflow, run_id, "first", shop, "--step-log", "dbos")
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        with closing(sqlite3.connect(path)) as connection, connection:  # A's step as the earlier release named it
            renamed = connection.execute(
                "UPDATE operation_outputs SET function_name = 'tool rest://shop.charge' "
                "WHERE workflow_uuid = ? AND function_name = 'a#1/tool rest://shop.charge#1'",
                (run_id,),
            ).rowcount
        assert renamed == 1
        for name, value in (("SHOP_URL", shop), ("WORKER_NAME", "resumer"), ("WORKER_PID", "0")):
            monkeypatch.setenv(name, value)
        runner = DbosRunner(url, step_log="dbos", queue=f"q-{run_id}", stale_after=1)  # the queue it began on
        try:
            engine = WorkflowEngine.from_yaml(workflow, durable=runner)
            with pytest.raises(DefinitionChangedError, match=r"recorded its steps by position") as refused:
                await engine.run({"amount": 5}, run_id=run_id)
            assert refused.value.step == "tool rest://shop.charge"
            assert [r["order"] for r in fetch(f"{shop}/requests")] == ["A", "B", "C"]  # nothing sent again
            assert await runner.status(run_id) == "PENDING"  # left as it stands
        finally:
            await runner.aclose()
            await engine.aclose()
