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
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    StartWorkflowUpdateInput,
)

from kavalai.durable import TemporalRunner
from kavalai.errors import AlreadyAnsweredError, DurableRunError, FunctionKernelException, RunCancelledError
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


async def applied_once(answered: Awaitable[None], again: Callable[[], Awaitable[None]]) -> str:
    """``won`` when the answer ``answered`` was applied, else ``refused: <why>`` (a kavalai error or a
    ``LookupError``, never a raw engine error) after answering ``again``: applied then, or told that the first one won
    after all."""
    try:
        await asyncio.wait_for(answered, 120)  # bounded: liveness only
        return "won"
    except AlreadyAnsweredError as exc:  # cannot be: nobody else answered
        raise AssertionError(exc) from exc
    except (FunctionKernelException, LookupError) as exc:  # refused, saying so
        told = f"refused: {exc}"
        assert str(exc), exc
    try:
        await asyncio.wait_for(again(), 120)
    except AlreadyAnsweredError as exc:
        assert exc.answer == {"action": "allow"}, exc
    return told


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
            told = await applied_once(answered, lambda: runner.answer(run_id, "approval-2", {"action": "allow"}))
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


class Watch(Interceptor):
    """Sees the client's queries and updates of runs: ``before(name)`` is awaited as one begins, and ``failed`` is
    set when one fails (no worker answered it). A query no worker answers fails within about 30 s (``no poller
    seen``); an update waits on the server for a worker to take it."""

    def __init__(self, before: Callable[[str], Awaitable[None]]) -> None:
        self.before, self.failed, self.failures = before, asyncio.Event(), list[str]()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        watch = self

        class Watched(OutboundInterceptor):
            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                return await watch.seen("query", super().query_workflow(input))

            async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> Any:
                return await watch.seen("update", super().start_workflow_update(input))

        return Watched(next)

    async def seen(self, name: str, call: Awaitable[Any]) -> Any:
        await self.before(name)
        try:
            return await call
        except Exception as exc:  # RPCError; an update's WorkflowUpdateRPCTimeoutOrCancelledError
            self.failures.append(f"{name}: {type(exc).__name__} {getattr(exc, 'status', '')}")
            self.failed.set()
            raise


@pytest.mark.parametrize("killed_before", ["query", "update"])
async def test_an_answer_no_worker_takes_is_delivered_again_to_the_next_worker(
    temporal_address: str, killed_before: str
) -> None:
    """The worker dies just as the answer's query (or its update) is sent. The query: no worker polls until it has
    failed (``no poller seen``, ``context canceled``), then it is sent again; the update: the next worker starts
    while it is in flight. The answer is applied once, by the next worker, never a raw ``RPCError``."""
    run_id = f"answer-gone-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    workers: list[asyncio.subprocess.Process] = []
    armed = False

    async def before(name: str) -> None:
        if armed and name == killed_before and workers[0].returncode is None:  # the worker dies as the call is made
            await ended(workers[0])

    watch = Watch(before)
    client = await Client.connect(temporal_address, interceptors=[watch])
    runner = TemporalRunner(temporal_address, task_queue=queue, worker=False, client=client, journal_outage=600)
    try:
        with serve(create_app()) as shop:
            workers.append(await start_worker(temporal_address, queue, shop))
            await runner.submit(ApproveThenCharge(shop), {}, run_id=run_id)
            for _ in range(2400):  # bounded: until the question is published
                if await runner.pending(run_id):
                    break
                await asyncio.sleep(0.05)
            armed = True
            answered = asyncio.ensure_future(runner.answer(run_id, "approval-2", {"action": "allow"}))
            for _ in range(6000):  # bounded: until the call is made and the worker it was for is dead
                if workers[0].returncode is not None or answered.done():
                    break
                await asyncio.sleep(0.05)
            assert workers[0].returncode is not None, answered
            if killed_before == "query":
                await asyncio.wait_for(watch.failed.wait(), 300)  # bounded: the query no worker answered failed
                assert not answered.done(), answered  # still delivering: never a raw RPCError
                assert watch.failures[0].startswith("query"), watch.failures
            workers.append(await start_worker(temporal_address, queue, shop))
            await asyncio.wait_for(answered, 300)  # bounded: liveness only; applied, told it won
            outcome = await asyncio.wait_for(runner.result(run_id), 120)  # bounded: liveness only
            assert outcome == {"answer": {"action": "allow"}}
            assert sorted(orders(fetch(f"{shop}/effects"))) == ["A", "B"]  # each charge once
            with pytest.raises(AlreadyAnsweredError):
                await runner.answer(run_id, "approval-2", {"action": "deny"})
    finally:
        for process in workers:
            await ended(process)
        await runner.aclose()


@pytest.mark.faults
async def test_an_answer_no_worker_takes_within_the_runs_patience_is_refused_saying_it_was_not_applied(
    temporal_address: str,
) -> None:
    run_id = f"answer-none-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    runner = TemporalRunner(temporal_address, task_queue=queue, worker=False, journal_outage=0.5)
    worker: asyncio.subprocess.Process | None = None
    try:
        with serve(create_app()) as shop:
            worker = await start_worker(temporal_address, queue, shop)
            await runner.submit(ApproveThenCharge(shop), {}, run_id=run_id)
            for _ in range(2400):  # bounded: until the question is published
                if await runner.pending(run_id):
                    break
                await asyncio.sleep(0.05)
            await ended(worker)
            with pytest.raises(DurableRunError, match="no worker of task queue .* nothing was applied") as told:
                await runner.answer(run_id, "approval-2", {"action": "allow"})
            assert not isinstance(told.value, (AlreadyAnsweredError, RunCancelledError)), told.value
            assert orders(fetch(f"{shop}/effects")) == ["A"]  # B was never charged
            assert (await runner.describe(run_id)).state == "running"  # waits still, resumable by an answer
    finally:
        if worker is not None:
            await ended(worker)
        await runner.aclose()
