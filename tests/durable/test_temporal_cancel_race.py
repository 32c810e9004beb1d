"""A cancel racing a step's completion on Temporal (issue 35): 20 rounds, each run cancelled at the moment the shop
answers charge B (the cancel sent from another thread while the answer goes out, a little later each round). Each
run ends ``cancelled`` or ``finished``, never both: what the waiting ``run()`` is told, what ``describe()`` says and
what the history records agree; each charge is made at most once, and a finished run made all three. Asserted by
counts at a local shop and by final states, never by elapsed time. Any unclosed aiohttp session or unawaited
coroutine of a cut step fails the test (``ResourceWarning`` and unraisable exceptions are errors here)."""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
import warnings
from collections import Counter
from collections.abc import Callable

import pytest

from kavalai.durable import TemporalRunner
from kavalai.errors import DurableRunError, RunCancelledError
from kavalai.workflow import WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import charging_engine, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("error::ResourceWarning"),
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]

ROUNDS = 20


def _collect_earlier_garbage() -> None:
    """What an earlier test left to the garbage collector (an unclosed kernel's session) warns when it is collected,
    in whichever test runs then: it is collected here first, its warnings ignored, so that a warning this test turns
    into an error is one of its own."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


class CancelAtB:
    """Each round's run cancelled by ``cancel(run_id)`` from another thread, ``5 ms x round`` after the shop recorded
    charge B (while its answer goes out, while B is recorded, as C begins, after the run ended)."""

    def __init__(self, cancel: Callable[[str], None]) -> None:
        self.cancel, self.run_id, self.pause, self.sent = cancel, "", 0.0, threading.Event()

    def on_charge(self, order: str) -> None:  # the shop's thread: B is recorded, its answer about to go out
        if order != "B":
            return
        run_id, pause = self.run_id, self.pause

        def later() -> None:
            threading.Event().wait(pause)
            self.cancel(run_id)
            self.sent.set()

        threading.Thread(target=later, daemon=True).start()

    def next_round(self, n: int, prefix: str) -> str:
        """Round ``n``'s run id, its cancel not sent yet."""
        self.run_id, self.pause = f"{prefix}-{n}-{uuid.uuid4().hex[:8]}", 0.005 * n
        self.sent.clear()
        return self.run_id


async def run_told(engine: WorkflowEngine, run_id: str, before: int) -> str:
    """What ``run()`` of ``run_id`` said: ``cancelled``, or ``finished`` with the next three charges' numbers."""
    try:
        result = await engine.run({}, run_id=run_id)
    except RunCancelledError:
        return "cancelled"
    assert result.ok, result.error
    assert result.output == {"n": [before + 1, before + 2, before + 3]}
    return "finished"


def charged_as_told(shop: str, before: int, told: str, n: int) -> None:
    """Round ``n``'s charges (the shop's effects after the first ``before``): each at most once, A and B made, C
    made when the run was told ``finished`` (a cancelled run's C may have been in flight when it was cut)."""
    made = Counter(orders(fetch(f"{shop}/effects")[before:]))
    assert max(made.values()) == 1, (n, made)  # each charge at most once
    assert set(made) <= {"A", "B", "C"}
    assert made["A"] == made["B"] == 1
    if told == "finished":
        assert made["C"] == 1, (n, made)


async def test_a_cancel_racing_a_steps_completion_ends_the_run_cancelled_or_finished_never_both(
    temporal_address: str,
) -> None:
    _collect_earlier_garbage()
    queue = f"q-race-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=queue)
    loop = asyncio.get_running_loop()
    sent: list[asyncio.Future[None]] = []

    def cancel(run_id: str) -> None:
        sent.append(asyncio.run_coroutine_threadsafe(runner.cancel(run_id), loop))  # type: ignore[arg-type]

    race = CancelAtB(cancel)
    ends: Counter[str] = Counter()
    try:
        with serve(create_app(on_charge=race.on_charge)) as shop:
            engine = charging_engine(runner, shop)
            await runner.start_worker()
            for n in range(ROUNDS):
                run_id = race.next_round(n, "race")
                before = len(fetch(f"{shop}/effects"))
                told = await run_told(engine, run_id, before)
                assert await asyncio.to_thread(race.sent.wait, 60)  # bounded: the cancel of this round went out
                assert len(sent) == 1
                for future in sent:  # the cancel was taken, or refused as the run had ended: nothing else
                    try:
                        await asyncio.wrap_future(future)  # type: ignore[arg-type]
                    except DurableRunError as exc:
                        assert told == "finished", exc
                        assert "has ended (finished)" in str(exc)
                sent.clear()
                info = await runner.describe(run_id)
                assert info.state == told, (n, info)
                if told == "cancelled":
                    with pytest.raises(RunCancelledError):
                        await runner.result(run_id)
                    assert info.outcome is None
                charged_as_told(shop, before, told, n)
                ends[told] += 1
    finally:
        await runner.aclose()
        await engine.aclose()
    assert sum(ends.values()) == ROUNDS
