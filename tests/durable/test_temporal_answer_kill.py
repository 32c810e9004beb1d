"""A Temporal worker SIGKILLed while an answer to the run's approval is being delivered (issue 35). The run waits for
an approval on a worker in another process; ``answer()`` is sent and the worker is killed a moment later (``pause``
seconds); a second worker starts. The answer is applied exactly once (told ``won``), or refused saying so (then
answered again: won, or told it lost naming the answer that won); the run finishes on the second worker with the
answer it took; A and B are charged once each (counted at a local shop); a later answer is told it lost or that
the run waits for nothing. Asserted by counts and final states, never by elapsed time."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from typing import Any

import pytest

from kavalai.durable import TemporalRunner
from kavalai.errors import AlreadyAnsweredError, FunctionKernelException
from tests.durable.conftest import ROOT, fetch
from tests.durable.test_journal_io import orders
from tests.servers.approval_worker import ApproveThenCharge
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(300)


async def start_worker(address: str, queue: str, shop: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.servers.approval_worker", address, queue, shop]
    process = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 120)  # bounded: liveness only
    assert line.strip() == b"serving", line
    return process


async def ended(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
    await process.wait()


@pytest.mark.parametrize(
    "pause",
    [0.0, pytest.param(0.05, marks=pytest.mark.faults), pytest.param(0.3, marks=pytest.mark.faults)],
    ids=["at_once", "soon", "later"],
)
async def test_a_worker_killed_while_an_answer_is_delivered_applies_it_once_or_says_it_did_not(
    temporal_address: str, pause: float
) -> None:
    run_id = f"answer-kill-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    runner = TemporalRunner(temporal_address, task_queue=queue, worker=False)
    workers: list[asyncio.subprocess.Process] = []
    try:
        with serve(create_app()) as shop:
            workers.append(await start_worker(temporal_address, queue, shop))
            target = ApproveThenCharge(shop)
            await runner.submit(target, {}, run_id=run_id)
            for _ in range(2400):  # bounded: until the question is published
                if await runner.pending(run_id):
                    break
                await asyncio.sleep(0.05)
            assert list(await runner.pending(run_id)) == ["approval-2"]

            async def kill_first() -> None:
                await asyncio.sleep(pause)
                os.kill(workers[0].pid, signal.SIGKILL)
                workers.append(await start_worker(temporal_address, queue, shop))

            answered = asyncio.ensure_future(runner.answer(run_id, "approval-2", {"action": "allow"}))
            await kill_first()
            told: Any = None
            try:
                await asyncio.wait_for(answered, 120)  # bounded: liveness only
                told = "won"
            except AlreadyAnsweredError as exc:  # cannot be: nobody else answered
                raise AssertionError(exc) from exc
            except (FunctionKernelException, LookupError) as exc:  # refused, saying so (never a raw engine error)
                told = f"refused: {exc}"
                assert str(exc), exc
            if told != "won":  # answered again: applied now, or told that the first one won after all
                try:
                    await asyncio.wait_for(runner.answer(run_id, "approval-2", {"action": "allow"}), 120)
                except AlreadyAnsweredError as exc:
                    assert exc.answer == {"action": "allow"}, exc
            outcome = await asyncio.wait_for(runner.result(run_id), 120)  # bounded: liveness only
            assert outcome == {"answer": {"action": "allow"}}
            assert (await runner.describe(run_id)).state == "finished"
            made = orders(fetch(f"{shop}/effects"))
            assert sorted(made) == ["A", "B"], (told, made)  # each charge once
            with pytest.raises((AlreadyAnsweredError, LookupError)):  # late: lost, or nothing waits any more
                await runner.answer(run_id, "approval-2", {"action": "deny"})
    finally:
        for process in workers:
            await ended(process)
        await runner.aclose()
