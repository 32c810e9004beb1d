"""A durable run on Temporal keeps whatever text its tools return and its input holds (issue 34, 34l part 2), as a
DBOS run does (``tests/durable/test_journal_text.py``): a lone surrogate (``os.listdir`` gives one for a file name
that is not UTF-8; a JSON input may spell ``"\\ud800"``) crosses Temporal's payloads (temporalio's JSON converter
writes it as its escape), the result store (``journal_json``) and a failure's message, and comes back as the same
text; the worker never fails on it. Checked against the real dev server, one run for every path."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.durable import FileResultStore, TemporalRunner
from kavalai.workflow import WorkflowBuilder, WorkflowEngine

pytestmark = pytest.mark.timeout(180)

NAME = "bad \udcff name \ud800"  # what os.listdir gives for b"bad \xff name", and a high surrogate alone


@pythontool
def odd(given: str) -> dict[str, str]:
    """A result holding lone surrogates, what it was given among them, and enough to go to the store."""
    return {"name": NAME, "given": given, "more": "x" * 200}


@pythontool
def fails(path: str) -> str:
    """Fails naming the file it was given (a name that is not UTF-8)."""
    raise FileNotFoundError(f"no such file: {path}")


async def test_lone_surrogates_round_trip_through_a_temporal_run(temporal_address: str, tmp_path: Path) -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("odd", odd)
    kernel.register_python_tool("fails", fails)
    workflow = (
        WorkflowBuilder("odd-text", input=dict, output=dict)
        .start(next="a")
        .function("a", tool="python://odd", inputs={"given": "input.s"}, next="b")
        .function("b", tool="python://fails", inputs={"path": "a.result.name"}, next="done")
        .end("done", outputs={"r": "b.result"})
        .build()
    )
    queue = f"q-text-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=queue, store=FileResultStore(tmp_path), inline_limit=100)
    engine = WorkflowEngine(workflow, kernel, durable=runner)
    try:
        result = await engine.run({"s": "in \udc80"}, run_id=f"{queue}-1")
    finally:
        await runner.aclose()
    assert result.status == "failed", result.error
    assert f"no such file: {NAME}" in str(result.error)  # the failure's message, whole
    kept = {record.node: record.output for record in result.trace}
    assert kept["a"] == {"result": {"name": NAME, "given": "in \udc80", "more": "x" * 200}}  # via the store
    assert os.listdir(tmp_path)  # the store was used: the 200 characters are past the inline limit
