"""The DBOS engine in this process, on SQLite: runs by id, the journal's steps, results by reference."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from dbos import DBOS

from kavalai import FunctionKernel, pythontool
from kavalai.durable import DbosRunner, SqlResultStore, resolve_runner
from kavalai.workflow import WorkflowBuilder, WorkflowEngine


@pytest.fixture(params=["kavalai", "dbos"])
async def runner(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[DbosRunner]:
    started = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}", inline_limit=2000, step_log=request.param)
    try:
        yield started
    finally:
        await started.aclose()


def engine_on(runner: DbosRunner, calls: list[int]) -> WorkflowEngine:
    @pythontool
    def page(n: int) -> str:
        calls.append(n)
        return "p" * n

    kernel = FunctionKernel()
    kernel.register_python_tool("page", page)
    workflow = (
        WorkflowBuilder("pages", input=dict, output=dict)
        .start(next="one")
        .function("one", tool="python://page", inputs={"n": {"expr": "3"}}, next="two")
        .function("two", tool="python://page", inputs={"n": "input.n"}, next="done")
        .end("done", outputs={"sizes": {"expr": "[len(one.result), len(two.result)]"}})
        .build()
    )
    return WorkflowEngine(workflow, kernel, durable=runner)


async def test_a_run_id_is_one_run_and_each_tool_call_one_step(runner: DbosRunner) -> None:
    calls: list[int] = []
    engine = engine_on(runner, calls)
    result = await engine.run({"n": 5}, run_id="pages-1")
    assert result.ok, result.error
    assert result.output == {"sizes": [3, 5]}
    assert result.run_id == "pages-1"
    again = await engine.run({"n": 5}, run_id="pages-1")
    assert again.output == result.output
    assert calls == [3, 5]
    assert await runner.status("pages-1") == "SUCCESS"
    assert await runner.status("no-such-run") is None

    steps = await runner.recorded_steps("pages-1")
    assert [(position, name) for position, name, _ in steps] == [
        (1, "one#1/tool python://page#1"),  # each step by its node, visit and call
        (2, "two#1/tool python://page#1"),
    ]
    assert steps[0][2] == {"ok": {"result": "ppp"}}  # the journal holds JSON
    dbos_steps = [step["function_name"] for step in await DBOS.list_workflow_steps_async("pages-1")]
    # DBOS lists the steps it recorded itself; kavalai's step log keeps them in its own table. A Python tool may not
    # repeat: with DBOS's step log its sent mark is a DBOS step before it (_dbos_journal).
    named = [
        f"{step}{mark}"
        for step in ("one#1/tool python://page#1", "two#1/tool python://page#1")
        for mark in (" (sent)", "")
    ]
    assert dbos_steps == ([] if runner.step_log == "kavalai" else named)


async def test_a_run_id_that_a_journal_cannot_hold_is_refused_before_the_run(runner: DbosRunner) -> None:
    calls: list[int] = []
    engine = engine_on(runner, calls)
    for bad in ("x" * 201, "line\nbreak", ""):
        with pytest.raises(ValueError, match="A run id is 1 to 200 printable characters"):
            await engine.run({"n": 5}, run_id=bad)
    assert calls == []
    result = await engine.run({"n": 5}, run_id="é" * 200)  # the longest, in any script
    assert result.ok, result.error
    recorded = [name for _, name, _ in await runner.recorded_steps("é" * 200)]
    assert recorded == ["one#1/tool python://page#1", "two#1/tool python://page#1"]


async def test_a_result_over_the_inline_limit_is_kept_in_the_results_table(runner: DbosRunner, tmp_path: Path) -> None:
    calls: list[int] = []
    engine = engine_on(runner, calls)
    result = await engine.run({"n": 10_000}, run_id="big")
    assert result.output == {"sizes": [3, 10_000]}
    steps = await runner.recorded_steps("big")
    reference = steps[1][2]
    assert set(reference) == {"$kavalai_result_ref", "bytes"}
    assert isinstance(runner.store, SqlResultStore)
    engine_sql = sa.create_engine(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    with engine_sql.connect() as connection:
        refs = [row[0] for row in connection.execute(sa.text("SELECT ref FROM kavalai_results"))]
    engine_sql.dispose()
    assert refs == [reference["$kavalai_result_ref"]]


async def test_one_dbos_runner_per_process(runner: DbosRunner, tmp_path: Path) -> None:
    await runner.start()
    other = DbosRunner(f"sqlite:///{tmp_path / 'other.sqlite'}")
    with pytest.raises(RuntimeError, match="one engine per process"):
        await other.start()
    assert runner.started
    assert "journal.sqlite" in runner.journal


def test_durable_takes_a_runner_a_url_or_true() -> None:
    made = resolve_runner("sqlite:///x.sqlite")
    assert isinstance(made, DbosRunner)
    assert made.db == "sqlite:///x.sqlite"
    assert isinstance(resolve_runner(True), DbosRunner)
    assert resolve_runner(None) is None
    assert resolve_runner(made) is made
    with pytest.raises(TypeError, match="durable= takes"):
        resolve_runner(3)  # type: ignore[arg-type]
    assert DbosRunner("postgresql://u:db-pw-s3cret@db:5432/k").journal == "postgresql://u:***@db:5432/k"


def test_a_run_left_by_a_gone_worker_is_claimed_by_one_taker(tmp_path: Path) -> None:
    from kavalai.durable._dbos_liveness import Liveness

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'claims.sqlite'}")
    try:
        first = Liveness(DbosRunner("sqlite://", executor_id="worker-a"), engine)
        second = Liveness(DbosRunner("sqlite://", executor_id="worker-b"), engine)
        first.register()
        second.register()
        assert first.claim("run-1", "worker-gone") is True
        assert second.claim("run-1", "worker-gone") is False  # both noticed: only the first hands it back
        assert first.claim("run-1", "worker-gone") is False
        assert second.claim("run-1", "worker-c") is True  # the same run, left again later by its next worker
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT run_id, from_executor, taken_by FROM kavalai_takeovers")).all()
        assert sorted(map(tuple, rows)) == [("run-1", "worker-c", "worker-b"), ("run-1", "worker-gone", "worker-a")]
    finally:
        engine.dispose()


def test_an_unknown_step_log_is_refused() -> None:
    with pytest.raises(ValueError, match="step_log must be 'kavalai' or 'dbos', got 'files'"):
        DbosRunner("sqlite://", step_log="files")  # type: ignore[arg-type]
