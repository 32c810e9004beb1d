"""Steps whose outcome nobody knows: a tool that is neither read-only nor idempotent nor keyed, sent, and its result
not recorded (the journal went away right after the shop made the charge). A resume does not send it again: the step
is in doubt, the workflow receives ``OutcomeUnknownError``, ``kavalai runs show`` lists it; with the tool's
``on_doubt="replay"`` it is sent again; with ``on_doubt="ask"`` (on the tool's own definition) the run asks and waits
until ``kavalai runs resolve RUN STEP --done | --retry`` settles it. Counted at a local shop service.

Each case runs on SQLite (the journal held locked by another process) in the default suite and on Postgres (the server
stopped with ``-m immediate`` while the charge is in flight, started again before the resume) under ``-m faults``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.durable import DbosRunner
from kavalai.durable.dbos import DbosClient
from kavalai.errors import RunInterruptedError
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import ROOT, fetch
from tests.durable.test_journal_io import Locker, orders
from tests.servers.effects_app import create_app, post_charge
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)


def unkeyed_engine(runner: DbosRunner, shop: str, *, idempotent: bool = False, on_doubt: Any = None) -> WorkflowEngine:
    """Three charges through a Python tool that sends no idempotency key (so nothing may repeat it safely, unless it
    says it is ``idempotent``)."""

    @pythontool(idempotent=idempotent, on_doubt=on_doubt)
    def charge(order: str) -> dict[str, Any]:
        return post_charge(shop, order)

    kernel = FunctionKernel()
    kernel.register_python_tool("charge", charge)
    builder = WorkflowBuilder("unkeyed", input=dict, output=dict).start(next="a")
    for node, after in (("a", "b"), ("b", "c"), ("c", "done")):
        builder = builder.function(
            node, tool="python://charge", inputs={"order": {"expr": f"'{node.upper()}'"}}, next=after
        )
    workflow = builder.end("done", outputs={"n": {"expr": "[a.result.charge, b.result.charge, c.result.charge]"}})
    return WorkflowEngine(workflow.build(), kernel, durable=runner)


@dataclass
class Journal:
    """A DBOS journal that goes away while charge ``B`` is in flight (:meth:`at_first`) until :meth:`release`, and
    the runner's settings that make the run interrupted (not failed) meanwhile."""

    url: str
    at_first: Callable[[str], Callable[[str], None]]
    release: Callable[[], None]
    settings: dict[str, Any]


@contextlib.contextmanager
def journal(kind: str, tmp_path: Path) -> Iterator[Journal]:
    """SQLite held locked past its busy timeout, or Postgres stopped with ``-m immediate`` and started again."""
    if kind == "sqlite":
        path = tmp_path / "journal.sqlite"
        locker = Locker(path)
        try:
            yield Journal(f"sqlite:///{path}", locker.at_first, locker.release, {"busy_timeout": 0.05})
        finally:
            locker.release()
        return
    from tests.durable.fault_matrix import new_database
    from tests.servers.postgres_server import postgres_server

    with postgres_server() as server:
        stopped: list[str] = []

        def at_first(order: str) -> Callable[[str], None]:
            def stop(charged: str) -> None:
                if charged == order and not stopped:
                    stopped.append(charged)
                    server.stop(immediate=True)

            return stop

        def release() -> None:
            if server.process is None or server.process.poll() is not None:
                server.start()

        try:
            yield Journal(new_database(server.url, "doubt"), at_first, release, {})
        finally:
            release()  # back up, for the runner's aclose()


async def in_doubt_unless_replayed(kind: str, tmp_path: Path, policy: str) -> None:
    """Charge B's effect made, its record lost with the journal: the run interrupted; the journal back, a resume
    follows the tool's policy (``fail``: in doubt; ``replay`` or an idempotent tool: sent again)."""
    on_doubt: Any = {} if policy == "fail" else {"python://charge": "replay"}
    with journal(kind, tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, on_doubt=on_doubt, **store.settings)
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                idempotent = policy == "idempotent"
                with pytest.raises(RunInterruptedError):
                    await unkeyed_engine(runner, shop, idempotent=idempotent).run({}, run_id="doubt-1")
                await asyncio.to_thread(store.release)
                sent = await asyncio.to_thread(described, store.url, "doubt-1")
                # An idempotent tool is not marked: it is safe to send again.
                assert sent == (
                    [] if idempotent else [{"position": 2, "name": "b#1/tool python://charge#1", "state": "sent"}]
                )
                result = await unkeyed_engine(runner, shop, idempotent=idempotent).run({}, run_id="doubt-1")
                requests, effects = orders(fetch(f"{shop}/requests")), orders(fetch(f"{shop}/effects"))
            if policy != "fail":
                assert result.ok, result.error
                assert requests == effects == ["A", "B", "B", "C"]  # the user accepted the repeat (or the tool did)
                return
            assert not result.ok
            # The workflow receives OutcomeUnknownError at node b (as it would any tool error: NodeError names it).
            assert str(result.error).startswith(
                "Node 'b': Outcome unknown: check before retrying. Step 2 of run doubt-1"
            )
            assert requests == effects == ["A", "B"]  # B happened once; nothing after it ran
            shown = await asyncio.to_thread(described, store.url, "doubt-1")
            assert shown == [{"position": 2, "name": "b#1/tool python://charge#1", "state": "in_doubt"}]
        finally:
            await runner.aclose()


def described(url: str, run_id: str) -> list[dict[str, Any]]:
    """The steps in doubt of ``run_id``, as ``kavalai runs show`` reads them."""
    client = DbosClient(url)
    try:
        return client.describe(run_id).in_doubt
    finally:
        client.close()


@pytest.mark.parametrize("policy", ["fail", "replay", "idempotent"])
async def test_a_step_sent_without_a_result_is_in_doubt_unless_its_tool_says_replay(
    tmp_path: Path, policy: str
) -> None:
    await in_doubt_unless_replayed("sqlite", tmp_path, policy)


@pytest.mark.faults
@pytest.mark.parametrize("policy", ["fail", "replay", "idempotent"])
async def test_on_postgres_a_step_sent_without_a_result_is_in_doubt_unless_its_tool_says_replay(
    tmp_path: Path, policy: str
) -> None:
    await in_doubt_unless_replayed("postgres", tmp_path, policy)


def resolve(url: str, run_id: str, step: int, *how: str) -> subprocess.CompletedProcess[str]:
    """``kavalai runs resolve`` in a process of its own."""
    command = [sys.executable, "-m", "kavalai.cli.main", "runs", "resolve", run_id, str(step), *how, "--db", url]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def refused_resolve(refused: subprocess.CompletedProcess[str], run_id: str, step: int) -> None:
    """``kavalai runs resolve`` of a step that is not the one in doubt (done, or one the run lacks) while the run
    asks about its step in doubt: refused, exit 1, one line naming the question it waits for (round 8's fault 8)."""
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"kavalai runs: Run {run_id} waits for no answer 'doubt-{step}'"), refused.stderr
    assert "Traceback" not in refused.stderr


async def asked(runner: DbosRunner, run_id: str, key: str, done: asyncio.Future[Any]) -> Any:
    """The question ``key`` of ``run_id``, once the run (``done`` when it ends) asks it (a bounded wait)."""
    for _ in range(2400):
        if key in await runner.pending(run_id) or done.done():
            break
        await asyncio.sleep(0.05)
    return (await runner.pending(run_id))[key]


async def asked_and_resolved(kind: str, tmp_path: Path, how: str) -> None:
    """Charge B in doubt, its tool says ``ask``: the resumed run asks and waits, sending nothing, until ``kavalai runs
    resolve`` (another process) says it was ``done`` or should be ``retry``-ed; a second answer is refused."""
    with journal(kind, tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)  # the policy is the tool's own
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                with pytest.raises(RunInterruptedError):
                    await unkeyed_engine(runner, shop, on_doubt="ask").run({}, run_id="ask-1")
                await asyncio.to_thread(store.release)
                done = asyncio.ensure_future(unkeyed_engine(runner, shop, on_doubt="ask").run({}, run_id="ask-1"))
                question = await asked(runner, "ask-1", "doubt-2", done)
                assert (question["kind"], question["step"], question["uri"]) == ("doubt", 2, "python://charge")
                assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # nothing sent while it asks
                for wrong in (1, 7):  # round 8's fault 8: a step that is done, a step the run lacks
                    refused_resolve(
                        await asyncio.to_thread(resolve, store.url, "ask-1", wrong, "--retry"), "ask-1", wrong
                    )
                assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # nothing sent for them
                done_with = ["--done", "--result", '{"charge": 2, "order": "B", "amount": 1}']
                settled = await asyncio.to_thread(
                    resolve, store.url, "ask-1", 2, *(done_with if how == "done" else ["--retry"])
                )
                assert settled.returncode == 0, settled.stderr
                assert settled.stderr.strip() == f"kavalai runs: resolved step 2 of ask-1 ({how})"
                result = await asyncio.wait_for(done, 120)  # bounded: liveness only
                assert result.ok, result.error
                requests, effects = orders(fetch(f"{shop}/requests")), orders(fetch(f"{shop}/effects"))
                again = await asyncio.to_thread(resolve, store.url, "ask-1", 2, "--retry")
            if how == "done":
                assert result.output == {"n": [1, 2, 3]}
                assert requests == effects == ["A", "B", "C"]  # B once: the operator said it happened
            else:
                assert result.output == {"n": [1, 3, 4]}
                assert requests == effects == ["A", "B", "B", "C"]  # the operator said it did not: sent again
            assert again.returncode == 1  # answered already: one line, naming the answer that won
            assert again.stderr.startswith("kavalai runs: Run ask-1: 'doubt-2' was answered already, with ")
            assert "Traceback" not in again.stderr
        finally:
            await runner.aclose()


@pytest.mark.parametrize("how", ["done", "retry"])
async def test_a_step_in_doubt_of_a_tool_that_says_ask_waits_for_the_operator(tmp_path: Path, how: str) -> None:
    await asked_and_resolved("sqlite", tmp_path, how)


@pytest.mark.faults
@pytest.mark.parametrize("how", ["done", "retry"])
async def test_on_postgres_a_step_in_doubt_of_a_tool_that_says_ask_waits_for_the_operator(
    tmp_path: Path, how: str
) -> None:
    await asked_and_resolved("postgres", tmp_path, how)


async def resolves_racing(tmp_path: Path, round_: int) -> str:
    """One round of round 8's fault 7: charge B in doubt (its tool says ``ask``), the resumed run asks; two
    ``kavalai runs resolve`` processes at once, ``--done`` and ``--retry``. Exactly one wins, the other is refused
    naming the answer that won; B is charged once (done won) or twice (retry won), never more. Which one won."""
    await anyio.Path(tmp_path).mkdir(parents=True, exist_ok=True)
    with journal("sqlite", tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        run_id = f"race-{round_}"
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                with pytest.raises(RunInterruptedError):
                    await unkeyed_engine(runner, shop, on_doubt="ask").run({}, run_id=run_id)
                await asyncio.to_thread(store.release)
                done = asyncio.ensure_future(unkeyed_engine(runner, shop, on_doubt="ask").run({}, run_id=run_id))
                await asked(runner, run_id, "doubt-2", done)
                done_with = ["--done", "--result", '{"charge": 2, "order": "B", "amount": 1}']
                both = await asyncio.gather(
                    asyncio.to_thread(resolve, store.url, run_id, 2, *done_with),
                    asyncio.to_thread(resolve, store.url, run_id, 2, "--retry"),
                )
                result = await asyncio.wait_for(done, 120)  # bounded: liveness only
                effects = orders(fetch(f"{shop}/effects"))
        finally:
            await runner.aclose()
    won = [how for how, process in zip(("done", "retry"), both, strict=True) if process.returncode == 0]
    assert len(won) == 1, [(process.returncode, process.stderr) for process in both]
    lost = both[1] if won == ["done"] else both[0]
    assert lost.returncode == 1, lost.stderr
    assert lost.stderr.startswith(f"kavalai runs: Run {run_id}: 'doubt-2' was answered already, with "), lost.stderr
    assert "Traceback" not in lost.stderr
    assert result.ok, result.error
    assert effects == (["A", "B", "C"] if won == ["done"] else ["A", "B", "B", "C"])
    return won[0]


@pytest.mark.faults
@pytest.mark.timeout(1200)
async def test_two_resolves_of_one_step_in_doubt_racing_ten_rounds(tmp_path: Path) -> None:
    """Round 8's fault 7 on DBOS (SQLite), 10 rounds: ``--done`` racing ``--retry`` on one step in doubt."""
    winners = [await resolves_racing(tmp_path / f"round{n}", n) for n in range(10)]
    assert set(winners) <= {"done", "retry"}
