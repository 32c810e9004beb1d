"""One rule for run ids on every runner (in memory, DBOS on SQLite and on Postgres, Temporal), checked by kavalai
before any engine sees the id; and one error for waiting on a run id that names no run (issue 27)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.durable import RUN_ID_RULE, DurableRunner, MemoryRunner, UnknownRunError
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.fault_matrix import new_database

pytestmark = pytest.mark.timeout(120)

BAD = [" ", "", "   ", " R1", "R1 ", "R1\n", "line\nbreak", "x" * 201, "tab\there", "x" * 5000, "nul\x00byte"]
#: An id an engine's SQL or query language could trip on (round 8's fault 12): run and read back under itself.
HOSTILE = "q'; DROP TABLE kavalai_steps; -- \"/\\ é"


@pytest.fixture(params=["memory", "dbos-sqlite", "dbos-postgres", "temporal"])
async def runner(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DurableRunner]:
    made: DurableRunner
    if request.param == "memory":
        made = MemoryRunner()
    elif request.param == "temporal":
        from kavalai.durable import TemporalRunner

        address = request.getfixturevalue("temporal_address")
        made = TemporalRunner(address, task_queue=f"ids-{uuid.uuid4().hex[:8]}")
    else:
        from kavalai.durable import DbosRunner

        if request.param == "dbos-sqlite":
            db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
        else:
            db = new_database(request.getfixturevalue("postgres_server"), f"ids_{uuid.uuid4().hex[:8]}")
        made = DbosRunner(db)
    try:
        yield made
    finally:
        await made.aclose()


def engine_on(runner: DurableRunner, calls: list[int]) -> WorkflowEngine:
    @pythontool
    def note(n: int) -> int:
        calls.append(n)
        return n

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    workflow = (
        WorkflowBuilder("ids", input=dict, output=dict)
        .start(next="one")
        .function("one", tool="python://note", inputs={"n": "input.n"}, next="done")
        .end("done", outputs={"n": "one.result"})
        .build()
    )
    return WorkflowEngine(workflow, kernel, durable=runner)


async def engine_runs(runner: DurableRunner) -> int:
    """How many runs the engine behind ``runner`` holds (it must have seen none of the refused ids)."""
    if runner.engine == "dbos":
        from dbos import DBOS

        return len(await DBOS.list_workflows_async())
    if runner.engine == "temporal":
        from kavalai.durable import TemporalRunner

        assert isinstance(runner, TemporalRunner)
        client = await runner.connect()
        query = f"TaskQueue = '{runner.task_queue}'"
        return len([run async for run in client.list_workflows(query)])
    assert isinstance(runner, MemoryRunner)
    return len(runner.journals)


async def test_every_runner_refuses_the_same_run_ids_with_the_rule_before_its_engine_sees_them(
    runner: DurableRunner,
) -> None:
    calls: list[int] = []
    engine = engine_on(runner, calls)
    for bad in BAD:
        with pytest.raises(ValueError) as refused:
            await engine.run({"n": 1}, run_id=bad)
        assert str(refused.value).startswith(RUN_ID_RULE), refused.value
        assert type(refused.value) is ValueError  # kavalai's check, not the engine's own error
        with pytest.raises(ValueError, match="A run id is 1 to 200 printable characters"):
            await runner.result(bad)
    assert calls == []
    if runner.engine == "dbos":
        from kavalai.durable import DbosRunner

        assert isinstance(runner, DbosRunner)
        await runner.start()
    assert await engine_runs(runner) == 0

    result = await engine.run({"n": 7}, run_id="é-ok " + "x" * 195)  # spaces inside, any script, 200 long
    assert result.ok, result.error
    assert calls == [7]
    for _ in range(2):  # the second time read back under the same id, not run again
        result = await engine.run({"n": 8}, run_id=HOSTILE)
        assert result.ok, result.error
        assert result.output == {"n": 8}
    assert calls == [7, 8]


async def test_waiting_for_a_run_id_that_names_no_run_is_the_same_error_on_every_runner(
    runner: DurableRunner,
) -> None:
    engine_on(runner, [])
    with pytest.raises(UnknownRunError, match="No run 'never-started' on the") as unknown:
        await runner.result("never-started")
    assert isinstance(unknown.value, LookupError)
    assert isinstance(unknown.value, ValueError)
    assert unknown.value.run_id == "never-started"
