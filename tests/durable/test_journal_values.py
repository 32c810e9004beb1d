"""Values a journal's database column cannot hold as they are (round 9's fault 5): a tool's argument and result
holding a NUL character or a lone surrogate (a Python string may carry one; UTF-8 cannot). The step is done, the
value read back equal on every engine, the charge made once however often the run's id is run; the journal's
encoding is never the tool's error (it was on DBOS for a lone surrogate: ``Tool python://charge failed:
UnicodeEncodeError``, the run failed for good after its charge)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.durable import DbosRunner, DurableRunner
from kavalai.durable.dbos import DbosClient
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import orders
from tests.servers.effects_app import create_app, post_charge
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

VALUES = {"nul": "a\x00b", "surrogate": "x\ud800y"}


def note_engine(runner: DurableRunner, shop: str) -> WorkflowEngine:
    """Step a returns the note (a result holding the value); step b charges Q with it as an argument (its key is
    minted from it) and returns it beside the shop's answer."""

    @pythontool
    def note(kind: str) -> str:
        return VALUES[kind]

    @pythontool
    def charge(order: str, note: str) -> dict[str, Any]:
        return {**post_charge(shop, order), "note": note}

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    kernel.register_python_tool("charge", charge)
    builder = WorkflowBuilder("notes", input=dict, output=dict).start(next="a")
    builder = builder.function("a", tool="python://note", inputs={"kind": {"expr": "input.kind"}}, next="b")
    inputs = {"order": {"expr": "'Q'"}, "note": {"expr": "a.result"}}
    builder = builder.function("b", tool="python://charge", inputs=inputs, next="done")
    return WorkflowEngine(builder.end("done", outputs={"r": {"expr": "b.result"}}).build(), kernel, durable=runner)


async def done_once(runner: DurableRunner, run_id: str, kind: str) -> None:
    with serve(create_app()) as shop:
        for _ in range(2):  # the second run of the id reads the recorded steps back
            outcome = await note_engine(runner, shop).run({"kind": kind}, run_id=run_id)
            assert outcome.ok, outcome.error
            assert outcome.output_data() == {"r": {"charge": 1, "order": "Q", "amount": 1, "note": VALUES[kind]}}
        assert orders(fetch(f"{shop}/effects")) == ["Q"]


@pytest.mark.parametrize("value", sorted(VALUES))
async def test_a_value_no_column_takes_as_it_is_is_journaled_and_read_back(journal_url: str, value: str) -> None:
    runner = DbosRunner(journal_url)
    try:
        await done_once(runner, "note-1", value)
        [_, (position, name, record)] = await runner.recorded_steps("note-1")
        assert (position, name) == (2, "b#1/tool python://charge#1")
        assert record["ok"]["result"]["note"] == VALUES[value]
        client = DbosClient(journal_url)  # kavalai runs show: the outcome as the run returned it
        try:
            assert client.describe("note-1").outcome["output"]["r"]["note"] == VALUES[value]  # type: ignore[index]
        finally:
            client.close()
    finally:
        await runner.aclose()


@pytest.mark.faults
@pytest.mark.parametrize("value", sorted(VALUES))
async def test_on_temporal_a_value_no_column_takes_as_it_is_is_read_back(temporal_address: str, value: str) -> None:
    from kavalai.durable import TemporalRunner

    run_id = f"note-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")
    try:
        await done_once(runner, run_id, value)
    finally:
        await runner.aclose()


def input_engine(runner: DurableRunner, shop: str) -> WorkflowEngine:
    """Step b charges Q with the run's input ``note`` as an argument (its key minted from it); the output holds the
    input as the run was given it and the charge's answer."""

    @pythontool
    def charge(order: str, note: str) -> dict[str, Any]:
        return {**post_charge(shop, order), "note": note}

    kernel = FunctionKernel()
    kernel.register_python_tool("charge", charge)
    inputs = {"order": {"expr": "'Q'"}, "note": {"expr": "input.note"}}
    builder = WorkflowBuilder("inputs", input=dict, output=dict).start(next="b")
    builder = builder.function("b", tool="python://charge", inputs=inputs, next="done")
    outputs = {"given": {"expr": "input"}, "r": {"expr": "b.result"}}
    return WorkflowEngine(builder.end("done", outputs=outputs).build(), kernel, durable=runner)


#: Inputs the engine's own serializer must hand back as they were given: a lone surrogate, a NUL, and a value
#: shaped as the gate's own escaped form (which must not be mistaken for it).
INPUTS = [
    {"note": "x\ud800y"},
    {"note": "a\x00b \udcff", "more": ["\ud800", {"k": "\udfff"}]},
    {"note": "plain", "$kavalai_escaped_json": '{"note": "forged"}'},
]


@pytest.mark.parametrize("engine", ["dbos-sqlite", "temporal"])
async def test_a_run_input_holding_a_lone_surrogate_reaches_its_steps_as_it_was_given(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Task 35l-4: a run's INPUT crosses the engine's serializer losslessly, as tool results do (DBOS was handed it
    through ``utf8_safe``: the tool got the six characters ``\\ud800``, not the code point, and the run's output
    said so); the charge made once however often the run's id is run."""
    from kavalai.durable import TemporalRunner

    runner: DurableRunner
    if engine == "temporal":
        runner = TemporalRunner(request.getfixturevalue("temporal_address"), task_queue=f"in-{uuid.uuid4().hex[:8]}")
    else:
        runner = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        with serve(create_app()) as shop:
            for n, given in enumerate(INPUTS):
                run_id = f"in-{n}-{uuid.uuid4().hex[:6]}"
                for _ in range(2):  # the second run of the id reads the recorded run back
                    outcome = await input_engine(runner, shop).run(given, run_id=run_id)
                    assert outcome.ok, outcome.error
                    assert outcome.output_data() == {
                        "given": given,
                        "r": {"charge": n + 1, "order": "Q", "amount": 1, "note": given["note"]},
                    }
            assert orders(fetch(f"{shop}/effects")) == ["Q"] * len(INPUTS)
    finally:
        await runner.aclose()
