"""Hostile review round 9 (issue 34, tests/hostile/CASES_round9.md case 25): a durable run keeps whatever text its
tools return. A lone surrogate (``os.listdir`` gives one for a file name that is not UTF-8) failed the step's write
(``UnicodeEncodeError``, told as "Tool python://odd failed", though the tool had succeeded) and, once the step was
kept, DBOS's write of the run's outcome (``PortableWorkflowError`` raised out of ``engine.run()``). Every JSON the
durable layer writes crosses ``kavalai.durable._json.journal_json``; what DBOS writes itself, ``utf8_safe``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kavalai import pythontool
from kavalai.durable import DbosRunner
from kavalai.workflow import WorkflowEngine

pytestmark = pytest.mark.timeout(180)

NAME = "bad \udcff name"  # what os.listdir gives for the bytes b"bad \xff name"

WORKFLOW = """
name: odd
input: {type: object, properties: {n: {type: integer}}}
output: object
python_functions: [tests.durable.test_journal_text.odd]
nodes:
  - {id: start, kind: start, next: a}
  - {id: a, kind: function, tool: python://odd, inputs: {n: {expr: "input.n"}}, next: done}
  - {id: done, kind: end, outputs: {r: {expr: "a.result"}}}
"""


@pythontool
def odd(n: int) -> dict[str, str]:
    """A result holding a lone surrogate, and ``n`` characters more."""
    return {"name": NAME, "more": "x" * n}


async def test_a_tool_result_holding_a_lone_surrogate_is_kept_by_a_dbos_run(tmp_path: Path) -> None:
    workflow = tmp_path / "odd.yaml"
    workflow.write_text(WORKFLOW, encoding="utf-8")
    runner = DbosRunner(f"sqlite:///{tmp_path}/journal.sqlite")
    engine = WorkflowEngine.from_yaml(workflow, durable=runner)
    try:
        async with engine:
            small = await engine.run({"n": 3}, run_id="small")
            large = await engine.run({"n": 300_000}, run_id="large")  # past the inline limit: the store keeps it
    finally:
        await runner.aclose()  # the engine leaves a runner passed in open; DBOS runs one engine per process
    for result in (small, large):
        assert result.status == "succeeded", result.error
        # DBOS is handed the outcome as escaped JSON text (engine_value): the run returns the very same text
        assert result.output["r"]["name"] == NAME
    assert len(large.output["r"]["more"]) == 300_000


def test_every_json_the_durable_layer_writes_crosses_journal_json() -> None:
    """The enumeration: no module of ``kavalai.durable`` writes JSON but through ``journal_json``."""
    source = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "durable"
    found = []
    for path in sorted(source.glob("*.py")):
        if path.name == "_json.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("dumps", "dump") and ast.unparse(node.value) == "json":
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], "write the journal's JSON with kavalai.durable._json.journal_json"
