"""Cancel as a journal event, on DBOS and Temporal: ``kavalai runs cancel`` while a step is in flight lets no other step
begin, and a step still in flight is cut (through its deadline) and recorded ``cancelled``; a cancel reaches a run
waiting for an answer; the run ends ``cancelled``, running it again under its id never revives it (one clear error),
and an answer to it is refused. Counted at a local shop service: requests and effects per order."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from kavalai.durable import DbosRunner, DurableRunner, current_run
from kavalai.errors import RunCancelledError
from tests.durable.conftest import fetch
from tests.durable.fault_matrix import TOOL_TIMEOUT, Case, start, workflow_text
from tests.durable.test_journal_io import charging_engine, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)


async def test_a_cancel_mid_step_is_the_last_step_and_the_run_stays_cancelled(journal_url: str) -> None:
    from kavalai.durable.dbos import DbosClient

    url = journal_url
    runner = DbosRunner(url)
    client: list[DbosClient] = []

    def cancel_at_b(order: str) -> None:  # `kavalai runs cancel`, from another connection, while B is in flight
        if order == "B":
            client.append(DbosClient(url))
            client[0].cancel("cancel-1")

    try:
        with serve(create_app(on_charge=cancel_at_b)) as shop:
            engine = charging_engine(runner, shop)
            with pytest.raises(RunCancelledError, match=r"^Run cancel-1 is cancelled: no step of it begins"):
                await engine.run({}, run_id="cancel-1")
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # B, in flight, ended; C never began
            assert await runner.status("cancel-1") == "CANCELLED"
            # Running it again does not revive it, and runs nothing.
            with pytest.raises(RunCancelledError, match=r"^Run cancel-1 is cancelled"):
                await engine.run({}, run_id="cancel-1")
            with pytest.raises(RunCancelledError, match=r"the answer 'approval-3' is refused"):
                await runner.answer("cancel-1", "approval-3", {"action": "allow"})
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
            assert orders(fetch(f"{shop}/effects")) == ["A", "B"]
        assert client[0].describe("cancel-1").state == "cancelled"
    finally:
        for made in client:
            made.close()
        await runner.aclose()


def cancel_on_temporal(address: str, run_id: str) -> None:
    """``kavalai runs cancel --engine temporal``: ``run_id`` cancelled from another connection (and event loop)."""
    from kavalai.durable import TemporalRunner

    async def cancel() -> None:
        elsewhere = TemporalRunner(address, task_queue=f"q-{run_id}", worker=False)
        try:
            await elsewhere.cancel(run_id)
        finally:
            await elsewhere.aclose()

    asyncio.run(cancel())
    gc.collect()


@asynccontextmanager
async def cancelled_at_b(
    runner: DurableRunner, run_id: str, cancel: Callable[[], None], *, hold: float = 120
) -> AsyncIterator[str]:
    """The three charges run under ``run_id`` and ``cancel()``-ed while step B is in flight, B's answer held at the
    shop until the block ends (at most ``hold`` seconds): the run's caller has been told it is cancelled (on DBOS once
    the cut step B is recorded); yields the shop's URL."""
    held = threading.Event()

    def cancel_and_hold_b(order: str) -> None:
        if order == "B":
            cancel()
            held.wait(hold)

    try:
        with serve(create_app(on_charge=cancel_and_hold_b)) as shop:
            with pytest.raises(RunCancelledError, match=rf"^Run {run_id} is cancelled"):
                await charging_engine(runner, shop).run({}, run_id=run_id)
            yield shop
            assert not held.is_set()  # B ended (recorded) while its answer was still held: B was cut
    finally:
        held.set()


async def test_a_cancel_cuts_the_step_in_flight_which_is_recorded_cancelled(journal_url: str) -> None:
    """Step B hangs at the shop (its answer held) when the run is cancelled: B is cut, not awaited; its record says
    ``cancelled``; C never begins; ``kavalai runs show`` lists B among the steps whose outcome is unknown."""
    from kavalai.durable.dbos import DbosClient

    runner = DbosRunner(journal_url)
    client = DbosClient(journal_url)
    try:
        async with cancelled_at_b(runner, "cut-1", lambda: client.cancel("cut-1")) as shop:
            steps = await runner.recorded_steps("cut-1")  # the caller is told once the cut step is recorded
            assert len(steps) == 2, steps
            assert steps[1][2].get("cancelled") is True, steps
            assert steps[1][2]["error"]["type"] == "kavalai.errors:RunCancelledError"
            assert await runner.status("cut-1") == "CANCELLED"
            with pytest.raises(RunCancelledError):
                await charging_engine(runner, shop).run({}, run_id="cut-1")
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
        info = client.describe("cut-1")
        assert info.state == "cancelled"
        assert info.in_doubt == [{"position": 2, "name": "b#1/tool rest://shop.charge#1", "state": "cancelled"}]
    finally:
        client.close()
        await runner.aclose()


class Approver:
    """A durable target that waits for one approval, then calls nothing."""

    durable_name = "approver"
    durable_kernel = None

    async def run_journaled(self, payload: Any) -> Any:
        run = current_run()
        assert run is not None
        return await run.wait_for_answer("approval", {"charge": payload["order"]})


async def test_a_cancel_reaches_a_run_waiting_for_an_answer(journal_url: str) -> None:
    """A run waits (with no timeout) for an approval; ``kavalai runs cancel`` from another connection: the run ends
    ``cancelled`` without an answer, is not revived, and a later answer is refused with the reason."""
    from kavalai.durable.dbos import DbosClient

    runner = DbosRunner(journal_url)
    client = DbosClient(journal_url)
    try:
        done = asyncio.ensure_future(runner.run(Approver(), {"order": "A"}, run_id="wait-1"))
        for _ in range(1200):  # bounded: until the question is published
            if await runner.pending("wait-1") or done.done():
                break
            await asyncio.sleep(0.05)
        assert list(await runner.pending("wait-1")) == ["approval-1"]
        await asyncio.to_thread(client.cancel, "wait-1")
        with pytest.raises(RunCancelledError, match=r"^Run wait-1 is cancelled"):
            await asyncio.wait_for(done, 120)  # bounded: liveness only
        assert client.describe("wait-1").state == "cancelled"
        with pytest.raises(RunCancelledError, match=r"the answer 'approval-1' is refused"):
            await runner.answer("wait-1", "approval-1", {"action": "allow"})
        with pytest.raises(RunCancelledError):
            await runner.run(Approver(), {"order": "A"}, run_id="wait-1")
    finally:
        client.close()
        await runner.aclose()


async def test_a_cancelled_temporal_run_ends_cancelled_not_completed(temporal_address: str) -> None:
    from kavalai.durable import TemporalRunner

    run_id = f"cancel-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")

    def cancel_at_b(order: str) -> None:  # `kavalai runs cancel --engine temporal`, while B is in flight
        if order == "B":
            cancel_on_temporal(temporal_address, run_id)

    try:
        with serve(create_app(on_charge=cancel_at_b)) as shop:
            engine = charging_engine(runner, shop)
            with pytest.raises(RunCancelledError, match=rf"^Run {run_id} is cancelled"):
                await engine.run({}, run_id=run_id)
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
            info = await runner.describe(run_id)
            assert (info.state, info.engine_status) == ("cancelled", "CANCELED")
            with pytest.raises(RunCancelledError, match=rf"^Run {run_id} is cancelled"):
                await engine.run({}, run_id=run_id)
            with pytest.raises(RunCancelledError, match=r"the answer 'approval-3' is refused"):
                await runner.answer(run_id, "approval-3", {"action": "allow"})
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
            assert orders(fetch(f"{shop}/effects")) == ["A", "B"]
    finally:
        await runner.aclose()


@pytest.mark.parametrize("after_heartbeats", [0, 3], ids=["at_once", "after_heartbeats"])
async def test_a_temporal_cancel_cuts_the_activity_in_flight_and_records_its_end(
    temporal_address: str, after_heartbeats: int
) -> None:
    """Step B's answer is held at the shop when the run is cancelled: the cancel reaches the activity through its
    heartbeats and cuts the call; the run waits for the activity's end, recorded in its history (cancelled, not
    abandoned), and ends ``cancelled``; C never begins. ``after_heartbeats``: the cancel comes about that many
    half-second heartbeats after B began, and B's answer is held 10 s at most: a worker that passed B's later
    heartbeats on only every 30 s (Temporal's default throttle) would let B end answered, not cut."""
    from kavalai.durable import TemporalRunner

    run_id = f"cut-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")

    def cancel_now() -> None:
        threading.Event().wait(0.5 * after_heartbeats + 0.25)  # B's first heartbeats go out meanwhile
        cancel_on_temporal(temporal_address, run_id)

    try:
        async with cancelled_at_b(runner, run_id, cancel_now, hold=10 if after_heartbeats else 120) as shop:
            handle = (await runner.connect()).get_workflow_handle(run_id)
            ends = [
                kind
                async for event in handle.fetch_history_events()
                for kind in ("activity_task_completed", "activity_task_canceled")
                if event.HasField(f"{kind}_event_attributes")  # type: ignore[arg-type]
            ]
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
        assert ends == ["activity_task_completed", "activity_task_canceled"]  # A done; B cut and recorded
        assert (await runner.describe(run_id)).state == "cancelled"
    finally:
        await runner.aclose()


async def test_result_waits_for_the_step_cut_in_another_process(journal_url: str, tmp_path: Path) -> None:
    """The run executes in a worker process of its own; this process cancels it while charge C is held at the shop
    (the worker frozen with ``SIGSTOP`` meanwhile, so it cannot record the cut yet) and waits for its result:
    ``RunCancelledError`` only once C's record, cut by the cancel, is in the journal (the worker's mark that its
    execution ended), so what the caller reads next is the run's final state. Before, it was raised at once."""
    from kavalai.durable.dbos import DbosClient

    reached, held = threading.Event(), threading.Event()

    def hold_c(order: str) -> None:
        if order == "C":
            reached.set()
            held.wait(120)

    workflow = tmp_path / "five.yaml"
    text = workflow_text()
    assert f"        timeout: {TOOL_TIMEOUT}\n" in text
    workflow.write_text(text.replace(f"        timeout: {TOOL_TIMEOUT}\n", "        timeout: 120\n"), "utf-8")
    run_id = f"elsewhere-{uuid.uuid4().hex[:8]}"
    runner = DbosRunner(journal_url, stale_after=120)  # a frozen worker is not taken for gone here
    client = DbosClient(journal_url)
    try:
        with serve(create_app(on_charge=hold_c)) as shop:
            worker = start(Case("sqlite", "during", 1), journal_url, workflow, run_id, "worker", shop)
            try:
                assert await asyncio.to_thread(reached.wait, 120), (tmp_path / "worker.log").read_text()
                os.kill(worker.pid, signal.SIGSTOP)
                client.cancel(run_id)
                waiting = asyncio.ensure_future(runner.result(run_id))
                await asyncio.wait([waiting], timeout=3)
                assert not waiting.done()  # the worker holding C cannot have recorded its cut
                os.kill(worker.pid, signal.SIGCONT)
                with pytest.raises(RunCancelledError, match=rf"^Run {run_id} is cancelled"):
                    await waiting
                info = client.describe(run_id)  # read at once: C's cut is recorded by now
                assert info.state == "cancelled"
                assert info.in_doubt == [{"position": 3, "name": "c#1/tool rest://shop.charge#1", "state": "cancelled"}]
                assert not held.is_set()  # C was cut while its answer was still held
            finally:
                os.kill(worker.pid, signal.SIGCONT)
                held.set()
                await asyncio.to_thread(worker.communicate, timeout=120)
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
    finally:
        client.close()
        await runner.aclose()
