"""Runs begun by an earlier release, which recorded steps by position (``tool rest://shop.charge``, before steps had
identities), resumed under this one: refused with :class:`DefinitionChangedError` naming the step, nothing sent
again. (The kavalai step log's case is ``test_definition.py``'s; this is DBOS's own step log, ``step_log="dbos"``.)"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import uuid
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow

from kavalai.durable import DbosRunner
from kavalai.errors import DefinitionChangedError
from kavalai.workflow import WorkflowEngine
from tests.durable.fault_matrix import Case, fetch, start, workflow_text
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

CASE = Case("sqlite", "during", 1)


@workflow.defn(name="kavalai.run", sandboxed=False)
class EarlierRelease:
    """kavalai's Temporal workflow as a release before step identities began a run: one step's activity."""

    @workflow.run
    async def run(self, target: str, payload: Any) -> Any:
        task = {"target": target, "run_id": workflow.info().workflow_id, "position": 1, "request": {}}
        timeout = timedelta(seconds=600)
        return await workflow.execute_activity(
            "kavalai.step", task, start_to_close_timeout=timeout, summary="tool rest://shop.charge"
        )


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


async def test_a_temporal_history_keyed_by_position_is_refused_naming_its_step(temporal_address: str) -> None:
    """A run as an earlier release began it (no definition among its arguments; its step's activity scheduled with
    Temporal's own id ``1`` and the step's name as its summary), taken up by this release: ``submit`` (and so
    ``run``) refuses it with :class:`DefinitionChangedError` naming the step, rather than handing it to a worker
    whose replay would fail its workflow task again and again."""
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from kavalai.durable import TemporalRunner
    from tests.durable.test_journal_io import charging_engine

    run_id = f"old-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    client = await Client.connect(temporal_address)
    async with Worker(
        client, task_queue=queue, workflows=[EarlierRelease], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow("kavalai.run", args=["workflow:charges", {}], id=run_id, task_queue=queue)
        scheduled = False
        for _ in range(1200):  # bounded: until its first workflow task scheduled the step's activity
            events = [e async for e in handle.fetch_history_events()]
            scheduled = any(e.HasField("activity_task_scheduled_event_attributes") for e in events)
            if scheduled:
                break
            await asyncio.sleep(0.1)
        assert scheduled, [e.event_type for e in events]
    runner = TemporalRunner(temporal_address, task_queue=queue, worker=False)
    try:
        with serve(create_app()) as shop:
            with pytest.raises(DefinitionChangedError, match=r"recorded its steps by position") as refused:
                await asyncio.wait_for(runner.run(charging_engine(runner, shop), {}, run_id=run_id), 120)
            assert refused.value.step == "tool rest://shop.charge"
            assert fetch(f"{shop}/requests") == []  # nothing sent
        history = [e async for e in handle.fetch_history_events()]
        assert not [e for e in history if e.HasField("workflow_task_failed_event_attributes")]
    finally:
        await handle.terminate("test over")
        await runner.aclose()
