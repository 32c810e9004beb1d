"""Round 10's fault 16 on Temporal (``tests/durable/FAULTS_round10.md``): a run terminated by an operator mid-step.
Counted at a local shop."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kavalai.durable import TemporalRunner
from kavalai.errors import DurableRunError
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import charging_engine, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(300)


async def test_a_run_terminated_mid_step_is_an_end_named_so_and_never_run_again(temporal_address: str) -> None:
    """Fault 16: ``terminate`` while B's charge is in flight. ``run()`` raised temporalio's bare
    ``WorkflowFailureError: Workflow execution failed``, the first time and on every run of the id; now a
    ``DurableRunError`` says the run was terminated and why; ``runs show`` has it failed with B sent; nothing is
    charged again."""
    from temporalio.client import Client

    run_id = f"term-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address)

    def terminate(order: str) -> None:
        if order == "B":
            asyncio.run(client.get_workflow_handle(run_id).terminate("an operator"))

    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")
    try:
        with serve(create_app(on_charge=terminate)) as shop:
            for _ in range(2):
                with pytest.raises(DurableRunError, match=rf"^Run {run_id} was terminated \("):
                    await charging_engine(runner, shop).run({}, run_id=run_id)
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]
        shown = await runner.describe(run_id)
        assert (shown.state, shown.engine_status) == ("failed", "TERMINATED")
        assert [step["state"] for step in shown.in_doubt] == ["sent"]
    finally:
        await runner.aclose()


async def test_a_run_going_on_another_task_queue_is_refused_naming_it(temporal_address: str) -> None:
    """Fault 11: a run started on queue ``q1`` (no worker of it up), then ``run()`` of its id by a runner serving
    ``q2``: it waited for ever; now refused naming the run's queue, nothing charged."""
    run_id = f"queue-{uuid.uuid4().hex[:8]}"
    with serve(create_app()) as shop:
        old = TemporalRunner(temporal_address, task_queue=f"q1-{run_id}", worker=False)
        new = TemporalRunner(temporal_address, task_queue=f"q2-{run_id}")
        try:
            await old.submit(charging_engine(old, shop), {"input": {}}, run_id=run_id)
            with pytest.raises(DurableRunError, match=rf"runs on the task queue 'q1-{run_id}', not on 'q2-{run_id}'"):
                await asyncio.wait_for(charging_engine(new, shop).run({}, run_id=run_id), 120)
            assert fetch(f"{shop}/requests") == []
        finally:
            await old.aclose()
            await new.aclose()
