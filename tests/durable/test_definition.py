"""A run records its definition's fingerprint; a resume under a changed definition (a node added with the same tool,
removed, renamed) is refused, naming the first step that differs, and runs nothing; under its own definition it
finishes, each effect once (counted at a local shop service)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kavalai.durable import DbosRunner
from kavalai.durable._definition import changed, definition_of
from kavalai.errors import DefinitionChangedError, RunInterruptedError
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import Locker, charging_engine, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)


def test_the_first_step_that_differs_is_named() -> None:
    def of(*nodes: str) -> dict[str, object] | None:
        return definition_of(charging_engine(DbosRunner("sqlite:///unused.sqlite"), "http://127.0.0.1:1", nodes))

    before = of("a", "b", "c")
    assert changed("r", before, of("a", "b", "c")) is None
    cases = {
        ("a", "x", "b", "c"): ("x", "was added"),  # the same tool as its neighbours
        ("a", "c"): ("b", "was removed"),
        ("a", "b"): ("c", "was removed"),
        ("a", "bee", "c"): ("bee", "was added (or renamed)"),
        ("a", "c", "b"): ("a", "was changed"),  # its next node is another
    }
    for nodes, (step, how) in cases.items():
        error = changed("r", before, of(*nodes))
        assert error is not None, nodes
        assert (error.step, error.run_id) == (step, "r")
        assert how in str(error)
    assert changed("r", None, before) is None  # a run submitted without one (DbosClient): not checked


async def test_a_resume_under_a_changed_workflow_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    locker = Locker(path)
    runner = DbosRunner(f"sqlite:///{path}", busy_timeout=0.05, journal_outage=0.3)
    try:
        with serve(create_app(on_charge=locker.at_first("B"))) as shop:
            # The run stops after B's effect, before B is recorded (its journal is locked): it stays resumable.
            with pytest.raises(RunInterruptedError):
                await charging_engine(runner, shop).run({}, run_id="changed-1")
            locker.release()
            for nodes, step in ((("a", "x", "b", "c"), "x"), (("a", "c"), "b"), (("a", "bee", "c"), "bee")):
                with pytest.raises(DefinitionChangedError, match=rf"step '{step}' was") as refused:
                    await charging_engine(runner, shop, nodes).run({}, run_id="changed-1")
                assert refused.value.step == step
                assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # nothing ran under it
                assert await runner.status("changed-1") == "PENDING"
            result = await charging_engine(runner, shop).run({}, run_id="changed-1")
            assert result.ok, result.error
            assert result.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "B", "C"]  # B again, under its key
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
    finally:
        locker.release()
        await runner.aclose()


async def test_temporal_refuses_to_take_up_a_run_under_a_changed_workflow(temporal_address: str) -> None:
    import asyncio
    import threading
    import uuid

    from kavalai.durable import TemporalRunner

    run_id = f"changed-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    runner = TemporalRunner(temporal_address, task_queue=queue)
    other = TemporalRunner(temporal_address, task_queue=queue, worker=False)
    at_b, go_on = threading.Event(), threading.Event()

    def hold_b(order: str) -> None:
        if order == "B":
            at_b.set()
            assert go_on.wait(120)

    try:
        with serve(create_app(on_charge=hold_b)) as shop:
            running = asyncio.ensure_future(charging_engine(runner, shop).run({}, run_id=run_id))
            try:
                assert await asyncio.to_thread(at_b.wait, 120)
                for nodes, step in ((("a", "x", "b", "c"), "x"), (("a", "c"), "b")):
                    with pytest.raises(DefinitionChangedError, match=rf"step '{step}' was"):
                        await other.submit(charging_engine(other, shop, nodes), {}, run_id=run_id)
                assert await other.submit(charging_engine(other, shop), {}, run_id=run_id) == run_id  # the same
            finally:
                go_on.set()
            result = await running
            assert result.ok, result.error
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
    finally:
        go_on.set()
        await other.aclose()
        await runner.aclose()
