"""A tool that makes its effect and then returns a result that fails its output model (round 8's fault 6): the step
fails naming the tool's URI, is recorded failed, and the run's id run again reads that failure back; the charge is
never made again (counted at a local shop). On DBOS (SQLite; Postgres under ``-m faults``) and Temporal."""

from __future__ import annotations

import uuid
from typing import Any

import pydantic
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.durable import DbosRunner, DurableRunner
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import orders
from tests.servers.effects_app import create_app, post_charge
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)


class Receipt(pydantic.BaseModel):
    charge: int
    receipt_id: str


def receipt_engine(runner: DurableRunner, shop: str) -> WorkflowEngine:
    """Charge Q through a tool whose answer lacks the ``receipt_id`` its output model requires."""

    @pythontool
    def charge(order: str) -> Receipt:
        return post_charge(shop, order)  # type: ignore[return-value]  # the shop's answer, not a Receipt

    kernel = FunctionKernel()
    kernel.register_python_tool("charge", charge)
    builder = WorkflowBuilder("receipts", input=dict, output=dict).start(next="a")
    builder = builder.function("a", tool="python://charge", inputs={"order": {"expr": "'Q'"}}, next="done")
    return WorkflowEngine(builder.end("done", outputs={"r": {"expr": "a.result"}}).build(), kernel, durable=runner)


async def failed_once(runner: DurableRunner, run_id: str) -> None:
    with serve(create_app()) as shop:
        outcomes: list[Any] = [await receipt_engine(runner, shop).run({}, run_id=run_id) for _ in range(2)]
        for outcome in outcomes:
            assert not outcome.ok
            assert "python://charge returned" in str(outcome.error)
            assert "does not fit its output model Receipt" in str(outcome.error)
        assert orders(fetch(f"{shop}/effects")) == ["Q"]


async def test_a_result_failing_its_output_model_is_a_failed_step_never_sent_again(journal_url: str) -> None:
    runner = DbosRunner(journal_url)
    try:
        await failed_once(runner, "receipt-1")
        [(position, name, record)] = await runner.recorded_steps("receipt-1")
        assert (position, name) == (1, "a#1/tool python://charge#1")
        assert record["error"]["type"] == "kavalai.errors:ToolOutputError"
    finally:
        await runner.aclose()


async def test_on_temporal_a_result_failing_its_output_model_is_a_failed_step_never_sent_again(
    temporal_address: str,
) -> None:
    from kavalai.durable import TemporalRunner

    run_id = f"receipt-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")
    try:
        await failed_once(runner, run_id)
    finally:
        await runner.aclose()
