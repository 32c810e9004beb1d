"""kavalai's step log for DBOS runs (``kavalai_steps``): recorded once per position, replayed by position, the first
record of a position kept when two attempts of a run race for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from kavalai.durable._step_log import SqlStepLog, StepLogJournal


@pytest.fixture
def log(tmp_path: Path) -> Iterator[SqlStepLog]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'steps.sqlite'}")
    yield SqlStepLog(engine)
    engine.dispose()


def test_steps_are_kept_as_json_by_run_and_position(log: SqlStepLog) -> None:
    assert log.write("run-1", 2, "tool python://b", {"ok": {"result": "é ✓"}}) == (
        ("tool python://b", {"ok": {"result": "é ✓"}}),
        False,  # no status table given: never cancelled
    )
    log.write("run-1", 1, "tool python://a", [1, None, True])
    log.write("run-2", 1, "model x", "other run")
    assert log.steps("run-1") == [
        (1, "tool python://a", [1, None, True]),
        (2, "tool python://b", {"ok": {"result": "é ✓"}}),
    ]
    assert log.recorded("run-2") == {1: ("model x", "other run")}
    assert log.recorded("run-3") == {}
    # The table survives the log: a new process reads what an earlier one wrote.
    assert SqlStepLog(log.engine).steps("run-2") == [(1, "model x", "other run")]


def test_the_first_record_of_a_position_wins(log: SqlStepLog) -> None:
    # A process taken over while it still ran writes the same position after its successor: the journal keeps
    # the first result, and both attempts go on with it.
    log.write("run-1", 1, "tool python://pay", {"ok": {"result": "first"}})
    assert log.write("run-1", 1, "tool python://pay", {"ok": {"result": "second"}}) == (
        ("tool python://pay", {"ok": {"result": "first"}}),
        False,
    )
    assert log.steps("run-1") == [(1, "tool python://pay", {"ok": {"result": "first"}})]


async def test_a_journal_replays_recorded_steps_and_records_new_ones(log: SqlStepLog) -> None:
    log.write("run-1", 1, "tool python://a", "recorded")
    journal = StepLogJournal(log, "run-1", log.recorded("run-1"))
    calls: list[str] = []

    async def execute() -> str:
        calls.append("ran")
        return "fresh"

    assert await journal.record(1, "tool python://a", execute) == "recorded"
    assert calls == []
    assert await journal.record(2, "tool python://b", execute) == "fresh"
    assert calls == ["ran"]
    assert log.steps("run-1")[-1] == (2, "tool python://b", "fresh")
    # a step of another identity at a recorded step's rank is a new step, never handed that step's record
    assert await journal.record(1, "tool python://c", execute) == "fresh"
    assert log.steps("run-1")[-1] == (3, "tool python://c", "fresh")
    # another attempt that finds another step recorded where it writes (it ran meanwhile): refused, never taken
    other = StepLogJournal(log, "run-1", {})
    with pytest.raises(
        RuntimeError, match=r"Step 1 of the run was 'tool python://a' and is 'tool python://d' on replay"
    ):
        await other.record(1, "tool python://d", execute)


async def test_a_step_that_raises_is_not_recorded(log: SqlStepLog) -> None:
    journal = StepLogJournal(log, "run-1", {})

    async def fail() -> str:
        raise ConnectionError("the process is going down")

    with pytest.raises(ConnectionError):
        await journal.record(1, "tool python://a", fail)
    assert log.steps("run-1") == []  # run again on resume


async def test_a_result_that_is_not_json_is_refused_before_anything_is_written(log: SqlStepLog) -> None:
    journal = StepLogJournal(log, "run-1", {})

    async def odd() -> object:
        return {"when": object()}

    with pytest.raises(TypeError, match="not JSON serializable"):
        await journal.record(1, "tool python://a", odd)
    assert log.steps("run-1") == []
