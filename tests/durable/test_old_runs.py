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


async def begun_by_an_earlier_release(address: str, release: type, run_id: str, queue: str) -> Any:
    """Begin run ``run_id`` with the earlier release's workflow ``release`` on a worker of its own, which stops once
    the run's first workflow task scheduled its step's activity (bounded wait); the run's handle."""
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    client = await Client.connect(address)
    async with Worker(client, task_queue=queue, workflows=[release], workflow_runner=UnsandboxedWorkflowRunner()):
        handle = await client.start_workflow("kavalai.run", args=["workflow:charges", {}], id=run_id, task_queue=queue)
        scheduled = False
        for _ in range(1200):
            events = [e async for e in handle.fetch_history_events()]
            scheduled = any(e.HasField("activity_task_scheduled_event_attributes") for e in events)
            if scheduled:
                break
            await asyncio.sleep(0.1)
        assert scheduled, [e.event_type for e in events]
    return handle


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

    from kavalai.durable import TemporalRunner
    from tests.durable.test_journal_io import charging_engine

    run_id = f"old-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    handle = await begun_by_an_earlier_release(temporal_address, EarlierRelease, run_id, queue)
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


@workflow.defn(name="kavalai.run", sandboxed=False)
class EarlierReleaseCharging:
    """An earlier release's run of one real step: charge order A (its activity keyed by position, ``1``)."""

    @workflow.run
    async def run(self, target: str, payload: Any) -> Any:
        request = {"kind": "tool", "uri": "rest://shop.charge", "arguments": {"order": "A", "amount": 1}, "key": "k-a"}
        task = {"target": target, "run_id": workflow.info().workflow_id, "position": 1, "request": request}
        timeout = timedelta(seconds=600)
        return await workflow.execute_activity(
            "kavalai.step", task, start_to_close_timeout=timeout, summary="tool rest://shop.charge"
        )


async def ended(handle: Any) -> Any:
    """The run's description once it is no longer running (bounded: 120 s)."""
    from temporalio.client import WorkflowExecutionStatus

    for _ in range(1200):
        found = await handle.describe()
        if found.status != WorkflowExecutionStatus.RUNNING:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {handle.id} still running")


async def test_a_worker_already_running_ends_an_earlier_releases_run_with_the_refusal_recorded(
    temporal_address: str,
) -> None:
    """A run begun by an earlier release (its step's activity keyed by position) is taken up by a worker that was
    serving before the run came back to it: the step it had scheduled runs (charge A, once), and the run's next
    workflow task, which this worker cannot replay, ends the run: ``failed`` (terminated by the worker) with
    :class:`DefinitionChangedError` naming the step recorded, for ``result()`` and ``kavalai runs show``; never a
    workflow task failing for ever with the run shown running (before: still running after 120 s)."""
    from temporalio.client import WorkflowExecutionStatus

    from kavalai.durable import TemporalRunner
    from tests.durable.test_journal_io import charging_engine

    run_id = f"old-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    handle = await begun_by_an_earlier_release(temporal_address, EarlierReleaseCharging, run_id, queue)
    runner = TemporalRunner(temporal_address, task_queue=queue)
    try:
        with serve(create_app()) as shop:
            runner.register(charging_engine(runner, shop))
            await runner.start_worker()  # serving before the old run's activity and next task reach it
            found = await ended(handle)
            assert found.status == WorkflowExecutionStatus.TERMINATED
            assert [(r["order"], r["key"]) for r in fetch(f"{shop}/requests")] == [("A", "k-a")]
            with pytest.raises(DefinitionChangedError, match=r"recorded its steps by position") as refused:
                await runner.result(run_id)
            assert refused.value.step == "tool rest://shop.charge"
            info = await runner.describe(run_id)
            assert info.state == "failed"
            assert info.error is not None
            assert info.error.startswith("DefinitionChangedError: ")
            assert "'tool rest://shop.charge'" in info.error
    finally:
        await runner.aclose()


async def test_a_worker_of_another_definition_already_running_ends_the_run_it_cannot_take_up(
    tmp_path: Path, temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's worker is SIGKILLed during charge C; a worker whose workflow has a node ``x`` added is serving the
    task queue before anything resumes the run: the run comes to it (C's activity retried with its key, then the
    run's workflow task) and it ends the run, recorded: ``failed`` with :class:`DefinitionChangedError` naming
    ``x``, each charge made once, D and E never sent (before: the run shown running, its task failing for ever)."""
    from temporalio.client import Client, WorkflowExecutionStatus

    from kavalai.durable import TemporalRunner
    from tests.durable.fault_matrix import CHANGES

    workflow_file = tmp_path / "five.yaml"
    workflow_file.write_text(workflow_text(), encoding="utf-8")
    changed_file = tmp_path / "changed.yaml"
    changed_file.write_text(workflow_text("added"), encoding="utf-8")
    run_id = f"changed-{uuid.uuid4().hex[:8]}"
    case = Case("temporal", "during", 1)
    with serve(create_app(kill_during="C")) as shop:
        for name, value in (("SHOP_URL", shop), ("WORKER_NAME", "changed"), ("WORKER_PID", "")):
            monkeypatch.setenv(name, value)
        runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}", step_timeout=4, heartbeat_timeout=2)
        engine = WorkflowEngine.from_yaml(changed_file, durable=runner)
        runner.register(engine)
        try:
            first = start(case, temporal_address, workflow_file, run_id, "first", shop)
            await asyncio.to_thread(first.communicate, timeout=180)
            assert first.returncode == -signal.SIGKILL
            await runner.start_worker()  # before anything resumes the run
            handle = (await Client.connect(temporal_address)).get_workflow_handle(run_id)
            found = await ended(handle)
            assert found.status == WorkflowExecutionStatus.TERMINATED
            with pytest.raises(DefinitionChangedError, match=r"step 'x' was added") as refused:
                await runner.result(run_id)
            assert refused.value.step == CHANGES["added"][1]
            assert (await runner.describe(run_id)).state == "failed"
            assert [e["order"] for e in fetch(f"{shop}/effects")] == ["A", "B", "C"]
            assert {r["order"] for r in fetch(f"{shop}/requests")} == {"A", "B", "C"}
        finally:
            await runner.aclose()
            await engine.aclose()
