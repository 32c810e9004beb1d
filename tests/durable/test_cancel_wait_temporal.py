"""A cancel while a Temporal run waits for an answer: the run ends ``cancelled`` (Temporal's ``CANCELED``) without an
answer, is not revived, and a later answer is refused with the reason (the DBOS cells are in ``test_cancel.py``)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kavalai.durable import TemporalRunner
from kavalai.errors import RunCancelledError
from tests.durable.test_cancel import Approver, cancel_on_temporal

pytestmark = pytest.mark.timeout(240)


async def test_a_cancel_reaches_a_temporal_run_waiting_for_an_answer(temporal_address: str) -> None:
    run_id = f"wait-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")
    try:
        done = asyncio.ensure_future(runner.run(Approver(), {"order": "A"}, run_id=run_id))
        asked: dict[str, object] = {}
        for _ in range(1200):  # bounded: until the run asks
            if done.done():
                break
            try:
                asked = await runner.pending(run_id)
            except Exception:  # not started yet: the query fails until the run is there
                asked = {}
            if asked:
                break
            await asyncio.sleep(0.05)
        assert list(asked) == ["approval-1"]
        await asyncio.to_thread(cancel_on_temporal, temporal_address, run_id)
        with pytest.raises(RunCancelledError, match=rf"^Run {run_id} is cancelled"):
            await asyncio.wait_for(done, 120)  # bounded: liveness only
        info = await runner.describe(run_id)
        assert (info.state, info.engine_status) == ("cancelled", "CANCELED")
        with pytest.raises(RunCancelledError, match=r"the answer 'approval-1' is refused"):
            await runner.answer(run_id, "approval-1", {"action": "allow"})
        with pytest.raises(RunCancelledError):
            await runner.run(Approver(), {"order": "A"}, run_id=run_id)
    finally:
        await runner.aclose()
