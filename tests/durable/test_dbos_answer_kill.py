"""A DBOS worker SIGKILLed while an answer to the run's approval is being delivered (issue 35), on SQLite (default
suite) and Postgres (``-m faults``). The run waits for an approval on a worker in another process; the answer is
sent from a process that runs nothing (``DbosClient``, as ``kavalai answer``) and the worker is killed a moment later
(``pause`` seconds); a second worker starts and recovers the run. The answer is applied exactly once (told ``won``),
or refused saying so (then answered again: won, or told it lost naming the answer that won); the run finishes on
the second worker with the answer it took; A and B are charged once each (counted at a local shop); a later answer
is told it lost or that the run waits for nothing. Asserted by counts and final states, never by elapsed time."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kavalai.errors import AlreadyAnsweredError
from tests.durable.conftest import ROOT, fetch
from tests.durable.test_journal_io import orders
from tests.durable.test_temporal_answer_kill import applied_once, ended
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(600)


async def start_worker(db: str, shop: str) -> tuple[asyncio.subprocess.Process, str]:
    """A DBOS worker process serving the approval run's target; it and the target's name."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.servers.approval_worker", "dbos", db, shop]
    process = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 120)).decode()  # bounded: liveness only
    assert line.startswith("serving "), line
    return process, line.split(" ", 1)[1].strip()


PAUSES = pytest.mark.parametrize(
    "pause",
    [0.0, pytest.param(0.05, marks=pytest.mark.faults), pytest.param(0.3, marks=pytest.mark.faults)],
    ids=["at_once", "soon", "later"],
)


@PAUSES
async def test_a_dbos_worker_killed_while_an_answer_is_delivered_applies_it_once_on_sqlite(
    tmp_path: Path, pause: float
) -> None:
    await killed_while_answered(f"sqlite:///{tmp_path / 'journal.sqlite'}", pause)


@pytest.mark.faults
@PAUSES
async def test_a_dbos_worker_killed_while_an_answer_is_delivered_applies_it_once_on_postgres(
    postgres_server: str, pause: float
) -> None:
    from tests.durable.fault_matrix import new_database

    await killed_while_answered(new_database(postgres_server, "answer_kill_" + uuid.uuid4().hex[:8]), pause)


async def killed_while_answered(journal_url: str, pause: float) -> None:
    """The case, on the journal ``journal_url``."""
    from kavalai.durable.dbos import DbosClient

    run_id = f"dbos-answer-kill-{uuid.uuid4().hex[:8]}"
    workers: list[asyncio.subprocess.Process] = []
    client = DbosClient(journal_url)
    try:
        with serve(create_app()) as shop:
            first, name = await start_worker(journal_url, shop)
            workers.append(first)
            await asyncio.to_thread(client.submit, name, {}, run_id=run_id)
            for _ in range(2400):  # bounded: until the question is published
                if await asyncio.to_thread(client.pending, run_id):
                    break
                await asyncio.sleep(0.05)
            assert list(await asyncio.to_thread(client.pending, run_id)) == ["approval-2"]

            answered = asyncio.ensure_future(
                asyncio.to_thread(client.answer, run_id, "approval-2", {"action": "allow"})
            )
            await asyncio.sleep(pause)
            os.kill(first.pid, signal.SIGKILL)
            await first.wait()
            workers.append((await start_worker(journal_url, shop))[0])
            again = lambda: asyncio.to_thread(client.answer, run_id, "approval-2", {"action": "allow"})  # noqa: E731
            told = await applied_once(answered, again)
            outcome = await asyncio.wait_for(asyncio.to_thread(client.result, run_id), 180)  # bounded: liveness
            assert outcome == {"answer": {"action": "allow"}}, told
            info = await asyncio.to_thread(client.describe, run_id)
            assert info.state == "finished", info
            made = orders(fetch(f"{shop}/effects"))
            assert sorted(made) == ["A", "B"], (told, made)  # each charge once
            with pytest.raises((AlreadyAnsweredError, LookupError)):  # late: lost, or nothing waits any more
                await asyncio.to_thread(client.answer, run_id, "approval-2", {"action": "deny"})
    finally:
        client.close()
        for process in workers:
            await ended(process)


async def test_an_answer_the_journal_cannot_keep_as_json_is_refused_before_anything_is_kept(tmp_path: Path) -> None:
    """An approval with a NaN in it reached the run as sent, while the journal kept another form of it (the run's
    outcome held a ``NaN`` no JSON reader takes: ``kavalai runs show``, jq): the run takes the answer as kept (in
    its kind's form, checked JSON); one JSON cannot hold is refused before anything is kept; a valid answer after it
    is taken, and each charge is made once."""
    from kavalai.durable import DbosRunner
    from tests.servers.approval_worker import ApproveThenCharge

    runner = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        with serve(create_app()) as shop:
            await runner.submit(ApproveThenCharge(shop), {}, run_id="nan-1")
            for _ in range(2400):  # bounded: until the question is published
                if await runner.pending("nan-1"):
                    break
                await asyncio.sleep(0.05)
            bad: list[Any] = [
                {"action": "edit", "arguments": {"amount": float("inf")}},
                {"action": "deny", "reason": {"a set"}},
            ]
            for answer in bad:
                with pytest.raises(ValueError, match="must be JSON|An approval is"):
                    await runner.answer("nan-1", "approval-2", answer)
            await runner.answer("nan-1", "approval-2", {"action": "allow", "note": float("nan")})
            outcome = await asyncio.wait_for(runner.result("nan-1"), 120)  # bounded: liveness only
            assert outcome == {"answer": {"action": "allow"}}  # as kept: its kind's form
            assert sorted(orders(fetch(f"{shop}/effects"))) == ["A", "B"]
    finally:
        await runner.aclose()
