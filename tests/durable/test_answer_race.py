"""One answer wins, atomically, on every engine: two answers to the same question sent at once, 20 rounds; exactly one
is taken (the one the run gets), the other is told it lost and which answer won; an answer after that is refused the
same way."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kavalai.durable import DurableRunner, current_run
from kavalai.errors import AlreadyAnsweredError
from tests.durable.conftest import ROOT

pytestmark = pytest.mark.timeout(300)

ROUNDS = 20


async def cli_late(key: str, run_id: str, *engine: str) -> None:
    """``kavalai answer`` after the race: refused in one line, naming the answer that won."""
    command = [sys.executable, "-m", "kavalai.cli.main", "answer", run_id, key, "allow", *engine]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().startswith(f"kavalai answer: Run {run_id}: {key!r} was answered already, with ")
    assert "Traceback" not in done.stderr


class Asker:
    """A durable target that asks ``rounds`` questions, one after another, and returns the answers it got."""

    durable_name = "asker"
    durable_kernel = None

    async def run_journaled(self, payload: Any) -> Any:
        run = current_run()
        assert run is not None
        return [await run.wait_for_answer("approval", {"round": n}) for n in range(int(payload["rounds"]))]


async def asked(runner: DurableRunner, run_id: str, done: asyncio.Future[Any], seen: set[str]) -> str:
    """The key of the run's next question, once it is published (a bounded wait: the run is in another task or
    worker)."""
    for _ in range(1200):
        fresh = set(await runner.pending(run_id)) - seen
        assert not done.done(), done
        if fresh:
            [key] = fresh
            seen.add(key)
            return key
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} asked nothing")


async def race(runner: DurableRunner, run_id: str, late: Callable[[str], Awaitable[None]]) -> None:
    asker = Asker()
    await runner.submit(asker, {"rounds": ROUNDS}, run_id=run_id)  # type: ignore[attr-defined]
    done = asyncio.ensure_future(runner.run(asker, {"rounds": ROUNDS}, run_id=run_id))
    winners: list[Any] = []
    seen: set[str] = set()
    try:
        for n in range(ROUNDS):
            key = await asked(runner, run_id, done, seen)
            answers = [{"action": "allow"}, {"action": "deny", "reason": "bob says no"}]
            told = await asyncio.gather(*(runner.answer(run_id, key, a) for a in answers), return_exceptions=True)
            won = [answers[i] for i, outcome in enumerate(told) if outcome is None]
            lost = [outcome for outcome in told if isinstance(outcome, AlreadyAnsweredError)]
            assert len(won) == 1, (n, told)
            assert len(lost) == 1, (n, told)
            assert lost[0].answer == won[0]  # the loser is told what won
            assert lost[0].key == key
            winners.append(won[0])
            with pytest.raises(AlreadyAnsweredError, match=rf"{key!r} was answered already"):
                await runner.answer(run_id, key, {"action": "allow"})
            if n == 0:
                await late(key)
        outcome = await done
    finally:
        done.cancel()
    assert outcome == winners  # the run took exactly the answers that won


async def test_one_answer_wins_on_dbos(journal_url: str) -> None:
    from kavalai.durable import DbosRunner

    runner = DbosRunner(journal_url)
    try:
        await race(runner, "race-1", lambda key: cli_late(key, "race-1", "--db", runner.db))
    finally:
        await runner.aclose()


async def test_one_answer_wins_on_temporal(temporal_address: str) -> None:
    from kavalai.durable import TemporalRunner

    run_id = f"race-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")
    try:
        engine = ["--engine", "temporal", "--address", temporal_address, "--queue", f"q-{run_id}"]
        await race(runner, run_id, lambda key: cli_late(key, run_id, *engine))
    finally:
        await runner.aclose()
