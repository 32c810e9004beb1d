"""``kavalai run FILE --durable`` / ``--run-id`` / ``--db`` / ``--submit`` and ``kavalai worker``, in processes
of their own, on a workflow whose Python tool keeps a ledger keyed by the call's idempotency key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.durable.conftest import ROOT

TOOLS = '''
import json, os
from kavalai import pythontool
from kavalai.durable import idempotency_key

@pythontool(idempotent=True)  # it pays once per idempotency key
def pay(order: str) -> dict:
    """Pay an order once per idempotency key (a ledger file), crash once on CRASH_ON."""
    ledger, key = os.environ["LEDGER"], idempotency_key()
    with open(ledger + ".attempts", "a") as log:
        log.write(json.dumps({"order": order, "key": key}) + "\\n")
    lines = open(ledger).read().splitlines() if os.path.exists(ledger) else []
    done = {json.loads(line)["key"]: json.loads(line) for line in lines}
    entry = done.get(key) if key is not None else None
    if entry is None:  # a new payment (a call without a key is always new)
        entry = {"order": order, "key": key, "n": len(lines) + 1}
        with open(ledger, "a") as out:
            out.write(json.dumps(entry) + "\\n")
    marker = ledger + ".crashed"
    if os.environ.get("CRASH_ON") == order and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)  # paid, and the run's journal does not know it
    return entry
'''

WORKFLOW = """
name: ledger
input: {type: object, properties: {who: {type: string}}}
output: object
python_functions: [ledger_tools.pay]
nodes:
  - {id: start, kind: start, next: a}
  - {id: a, kind: function, tool: python://pay, inputs: {order: {expr: "input.who + '-A'"}}, next: b}
  - {id: b, kind: function, tool: python://pay, inputs: {order: {expr: "input.who + '-B'"}}, next: c}
  - {id: c, kind: function, tool: python://pay, inputs: {order: {expr: "input.who + '-C'"}}, next: done}
  - {id: done, kind: end, outputs: {paid: {expr: "[a.result.n, b.result.n, c.result.n]"}}}
"""


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    (tmp_path / "ledger_tools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "ledger.yaml"
    path.write_text(WORKFLOW, encoding="utf-8")
    return path


def kavalai(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kavalai.cli.main", *args]
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(command, cwd=cwd, env=full, capture_output=True, text=True, timeout=90, check=False)


def ledger(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_run_durable_resumes_by_run_id_after_a_crash(workflow: Path, tmp_path: Path) -> None:
    env = {"LEDGER": str(tmp_path / "ledger.jsonl"), "CRASH_ON": "ann-B"}
    args = ["run", str(workflow), "--input", '{"who": "ann"}', "--run-id", "ann-1"]
    crashed = kavalai(*args, env=env, cwd=tmp_path)
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    assert (tmp_path / "ledger.yaml.runs.sqlite").exists()  # the journal beside the workflow file

    resumed = kavalai(*args, env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout) == {"paid": [1, 2, 3]}
    assert "ann-1" in resumed.stderr

    paid = ledger(tmp_path / "ledger.jsonl")
    attempts = ledger(tmp_path / "ledger.jsonl.attempts")
    assert [entry["order"] for entry in paid] == ["ann-A", "ann-B", "ann-C"]
    assert [entry["order"] for entry in attempts] == ["ann-A", "ann-B", "ann-B", "ann-C"]
    assert attempts[1]["key"] == attempts[2]["key"]  # the tool read the same key in both attempts
    assert all(str(entry["key"]).startswith("ann-1.") for entry in paid)

    # A finished run's id prints its result from the journal and calls nothing.
    again = kavalai(*args, env=env, cwd=tmp_path)
    assert json.loads(again.stdout) == {"paid": [1, 2, 3]}
    assert len(ledger(tmp_path / "ledger.jsonl.attempts")) == 4


@pytest.mark.timeout(240)  # four kavalai processes, one after the other
def test_run_again_on_a_cancelled_or_refused_run_says_why_in_one_line(workflow: Path, tmp_path: Path) -> None:
    """``kavalai run --run-id`` on a run that may not go on here: one line naming the reason, exit status 1, no
    traceback nor an engine's warning, and nothing called."""
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    run = ["run", str(workflow), "--db", db, "--input", '{"who": "fay"}']
    assert kavalai(*run, "--submit", "--run-id", "fay-1", env=env, cwd=tmp_path).returncode == 0
    cancelled = kavalai("runs", "cancel", "fay-1", "--db", db, env=env, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr[-2000:]
    again = kavalai(*run, "--run-id", "fay-1", env=env, cwd=tmp_path)
    assert again.returncode == 1, again.stderr[-2000:]
    assert again.stdout == ""
    assert only_line(again.stderr) == (
        "kavalai run: Run fay-1 is cancelled: no step of it begins any more, and it is not resumed."
    )
    assert ledger(tmp_path / "ledger.jsonl.attempts") == []

    crashed = kavalai(*run, "--run-id", "fay-2", env={**env, "CRASH_ON": "fay-B"}, cwd=tmp_path)
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    text = workflow.read_text(encoding="utf-8")
    workflow.write_text(text.replace("next: b}", "next: b2}").replace("id: b,", "id: b2,").replace("b.res", "b2.res"))
    refused = kavalai(*run, "--run-id", "fay-2", env=env, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert refused.stdout == ""
    assert only_line(refused.stderr).startswith(
        "kavalai run: Run fay-2 was begun under another definition: step 'b2' was added (or renamed) since."
    )
    assert [entry["order"] for entry in ledger(tmp_path / "ledger.jsonl.attempts")] == ["fay-A", "fay-B"]


def only_line(stderr: str) -> str:
    """The one line of a failed run's stderr after its progress line (``run NAME (ID), journaled in ...``)."""
    lines = [line for line in stderr.splitlines() if not line.startswith("run ledger (")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def test_run_without_a_run_id_is_not_durable_unless_asked(workflow: Path, tmp_path: Path) -> None:
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}
    plain = kavalai("run", str(workflow), "--input", '{"who": "bo"}', env=env, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert not (tmp_path / "ledger.yaml.runs.sqlite").exists()
    assert all(entry["key"] is None for entry in ledger(tmp_path / "ledger.jsonl.attempts"))  # no key outside a run

    db = tmp_path / "elsewhere.sqlite"
    durable = kavalai(
        "run", str(workflow), "--input", '{"who": "cy"}', "--db", f"sqlite:///{db}", env=env, cwd=tmp_path
    )
    assert durable.returncode == 0, durable.stderr[-2000:]
    assert db.exists()
    assert json.loads(durable.stdout) == {"paid": [4, 5, 6]}


def test_submit_puts_runs_on_the_queue_that_a_worker_serves(workflow: Path, tmp_path: Path) -> None:
    env = {"LEDGER": str(tmp_path / "ledger.jsonl")}
    db = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    for who in ("dee", "eve"):
        submitted = kavalai(
            "run",
            str(workflow),
            "--input",
            json.dumps({"who": who}),
            "--db",
            db,
            "--submit",
            "--run-id",
            who,
            env=env,
            cwd=tmp_path,
        )
        assert submitted.returncode == 0, submitted.stderr[-2000:]
        assert submitted.stdout.strip() == who
    assert not ledger(tmp_path / "ledger.jsonl")  # only queued

    command = [sys.executable, "-m", "kavalai.cli.main", "worker", str(workflow), "--db", db, "--concurrency", "1"]
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    worker = subprocess.Popen(command, cwd=tmp_path, env=full, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(ledger(tmp_path / "ledger.jsonl")) < 6:
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker did not run the queued runs"
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGINT)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 130, stderr[-2000:]
    assert "serving workflow:ledger" in stderr
    orders = sorted(str(entry["order"]) for entry in ledger(tmp_path / "ledger.jsonl"))
    assert orders == ["dee-A", "dee-B", "dee-C", "eve-A", "eve-B", "eve-C"]
    result = kavalai("run", str(workflow), "--db", db, "--run-id", "eve", env=env, cwd=tmp_path)
    assert json.loads(result.stdout)["paid"][0] in (1, 4)


def test_kavalai_answer_lists_and_answers_a_waiting_run(tmp_path: Path) -> None:
    import asyncio

    from kavalai import FunctionKernel, pythontool
    from kavalai.agent import Agent, OutsideApproval
    from kavalai.durable import DbosRunner
    from kavalai.testing import ScriptedLLM, tool_call

    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def answer(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kavalai.cli.main", "answer", *args, "--db", db]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)

    calls: list[str] = []

    @pythontool
    def note(text: str) -> str:
        calls.append(text)
        return text

    async def main() -> str:
        kernel = FunctionKernel()
        kernel.register_python_tool("note", note)
        runner = DbosRunner(db)
        llm = ScriptedLLM([tool_call("python://note", {"text": "x"}), "done"])
        agent = Agent(llm, kernel=kernel, durable=runner, approve=OutsideApproval())
        try:
            running = asyncio.create_task(agent.run("note x", run_id="cli-1"))
            listed: dict[str, object] = {}
            for _ in range(200):
                await asyncio.sleep(0.1)
                shown = await asyncio.to_thread(answer, "cli-1")
                assert shown.returncode == 0, shown.stderr
                listed = json.loads(shown.stdout)
                if listed:
                    break
            ((key, question),) = listed.items()
            assert question == {"key": key, "kind": "approval", "tool": "python://note", "arguments": {"text": "x"}}
            assert (await asyncio.to_thread(answer, "cli-1", key)).returncode == 2  # no ANSWER
            wrong = await asyncio.to_thread(answer, "cli-1", key, "yes please")
            assert wrong.returncode == 2
            assert "allow, deny or JSON" in wrong.stderr
            unknown = await asyncio.to_thread(answer, "cli-1", "approval-99", "allow")
            assert unknown.returncode == 1
            assert f"waits for {key}" in unknown.stderr
            sent = await asyncio.to_thread(answer, "cli-1", key, '{"action": "edit", "arguments": {"text": "y"}}')
            assert sent.returncode == 0, sent.stderr
            late = await asyncio.to_thread(answer, "cli-1", key, "deny")  # one answer wins; this one is told so
            assert late.returncode == 1
            assert f"{key!r} was answered already, with " in late.stderr
            return (await asyncio.wait_for(running, 30)).output
        finally:
            await runner.aclose()

    assert asyncio.run(main()) == "done"
    assert calls == ["y"]
    assert json.loads(answer("cli-1").stdout) == {}
