"""Cancel as a journal event, on DBOS and Temporal: ``kavalai runs cancel`` while a step is in flight lets that step end
and no other begin; the run ends ``cancelled``, running it again under its id never revives it (one clear error), and
an answer to it is refused. Counted at a local shop service: requests and effects per order."""

from __future__ import annotations

import asyncio
import gc
import uuid

import pytest

from kavalai.durable import DbosRunner
from kavalai.errors import RunCancelledError
from tests.durable.conftest import fetch
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


async def test_a_cancelled_temporal_run_ends_cancelled_not_completed(temporal_address: str) -> None:
    from kavalai.durable import TemporalRunner

    run_id = f"cancel-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")

    async def cancel() -> None:
        elsewhere = TemporalRunner(temporal_address, task_queue=f"q-{run_id}", worker=False)
        try:
            await elsewhere.cancel(run_id)
        finally:
            await elsewhere.aclose()

    def cancel_at_b(order: str) -> None:  # `kavalai runs cancel --engine temporal`, while B is in flight
        if order == "B":
            asyncio.run(cancel())
            gc.collect()

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
