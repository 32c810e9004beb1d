"""A run records its definition's fingerprint; a resume under a changed definition (a node added with the same tool,
removed, renamed) is refused, naming the first step that differs, and runs nothing; under its own definition it
finishes, each effect once (counted at a local shop service)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.durable import DbosRunner, MemoryRunner, definition_version, step_key
from kavalai.durable._definition import changed, definition_of
from kavalai.errors import DefinitionChangedError, RunInterruptedError
from kavalai.testing import ScriptedLLM
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.test_journal_io import Locker, charging_engine, interrupted_at_b, orders
from tests.durable.test_steps import Crash
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


def watching_runner() -> type:
    """A Temporal runner that counts the workers it starts (the public ``start_worker``)."""
    from kavalai.durable import TemporalRunner

    class Watching(TemporalRunner):
        workers_started = 0

        async def start_worker(self, *, keep: bool = True) -> None:
            self.workers_started += 1
            await super().start_worker(keep=keep)

    return Watching


async def test_temporal_refuses_to_take_up_a_run_under_a_changed_workflow(temporal_address: str) -> None:
    import asyncio
    import threading
    import uuid

    from kavalai.durable import TemporalRunner

    run_id = f"changed-{uuid.uuid4().hex[:8]}"
    queue = f"q-{run_id}"
    Watching = watching_runner()
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
                # A process running the changed workflow (its worker on by default) is refused before its worker
                # polls the queue: it takes no activity of the run (the matrix's temporal-after-1-renamed saw one
                # taken and dropped at the refusal, the cut step sent a third time).
                changed = Watching(temporal_address, task_queue=queue)
                try:
                    with pytest.raises(DefinitionChangedError, match=r"step 'x' was"):
                        await charging_engine(changed, shop, ("a", "x", "b", "c")).run({}, run_id=run_id)
                finally:
                    await changed.aclose()
                assert changed.workers_started == 0
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


def paying_engine(
    runner: MemoryRunner, calls: list[tuple[str, str | None]], nodes: tuple[str, ...], crash: bool = False
) -> WorkflowEngine:
    """A workflow whose nodes each pay their own order with one Python tool; with ``crash``, paying ``C`` crashes."""
    from kavalai.durable import idempotency_key

    @pythontool
    def pay(order: str) -> str:
        calls.append((order, idempotency_key()))
        if order == "C" and crash:
            raise Crash
        return order

    kernel = FunctionKernel()
    kernel.register_python_tool("pay", pay)
    builder = WorkflowBuilder("paying", input=dict, output=dict).start(next=nodes[0])
    for node, after in zip(nodes, (*nodes[1:], "done"), strict=True):
        builder = builder.function(
            node, tool="python://pay", inputs={"order": {"expr": f"'{node.upper()}'"}}, next=after
        )
    paid = ", ".join(f"{node}.result" for node in nodes)
    return WorkflowEngine(builder.end("done", outputs={"paid": {"expr": f"[{paid}]"}}).build(), kernel, durable=runner)


@pytest.mark.parametrize(
    ("nodes", "ran_again"),
    [
        (("a", "x", "b", "c"), ["X", "C"]),  # added with the same tool as its neighbours: only it is new
        (("a", "c"), ["C"]),  # b removed: its record is nobody's
        (("a", "bee", "c"), ["BEE", "C"]),  # b renamed: a new step, under a key of its own
    ],
)
async def test_a_step_is_found_by_its_node_and_visit_never_by_its_position(
    nodes: tuple[str, ...], ran_again: list[str]
) -> None:
    """The in-memory engine checks no definition: what the journal hands a resumed run under a changed workflow
    shows the identity alone. No step is handed another step's record, and each recorded step keeps its key."""
    calls: list[tuple[str, str | None]] = []
    runner = MemoryRunner()
    with pytest.raises(Crash):
        await paying_engine(runner, calls, ("a", "b", "c"), crash=True).run({}, run_id="moved")
    first = dict(calls)
    del calls[:]
    result = await paying_engine(runner, calls, nodes).run({}, run_id="moved")
    assert result.ok, result.error
    assert [order for order, _ in calls] == ran_again  # a replayed, b never paid again
    assert result.output == {"paid": [node.upper() for node in nodes]}  # each node its own result
    assert dict(calls)["C"] == first["C"]  # c again, under the key it had: the server can tell the repeat
    for node in nodes:
        payload = {"tool": "python://pay", "arguments": {"order": node.upper()}}
        expected = step_key("moved", f"{node}#1/tool python://pay#1", payload)
        assert dict(calls).get(node.upper(), first.get(node.upper())) == expected


def test_an_agent_records_its_model_instructions_tools_and_output() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    def agent(**changes: object) -> Agent[object]:
        options: dict[str, object] = {"instructions": "Be brief.", "allowed_tools": ["python://pay"]}
        return Agent(ScriptedLLM([]), kernel=FunctionKernel(), **{**options, **changes})  # type: ignore[arg-type]

    before = definition_of(agent())
    assert before is not None
    assert changed("r", before, definition_of(agent())) is None
    cases = {
        "instructions": agent(instructions="Be thorough."),
        "tools": agent(allowed_tools=["python://pay", "python://refund"]),
        "output_type": agent(output_type=Answer),
        "max_steps": agent(max_steps=3),
        "model": Agent(
            ScriptedLLM([], model="other"),
            kernel=FunctionKernel(),
            instructions="Be brief.",
            allowed_tools=["python://pay"],
        ),
    }
    for part, changed_agent in cases.items():
        error = changed("r", before, definition_of(changed_agent))
        assert error is not None, part
        assert error.step == part
        assert f"step {part!r} was changed" in str(error)


def of_run(rows: list[dict[str, Any]], run_id: str) -> list[str]:
    """The orders of the requests (or effects) made by run ``run_id`` (its keys begin with its id)."""
    return [row["order"] for row in rows if str(row["key"]).startswith(f"{run_id}.")]


async def test_versioned_runners_finish_an_old_run_on_the_old_definition_and_new_runs_on_the_new(
    tmp_path: Path,
) -> None:
    """``DbosRunner(versioned=True)``: the application version is the definition's fingerprint. A run interrupted
    under the old definition is refused by a process of the new one (naming the step added) and not taken by it,
    while new runs run there; a process of the old definition then finishes it, each effect once."""
    path = tmp_path / "journal.sqlite"
    url = f"sqlite:///{path}"
    locker = Locker(path)
    with serve(create_app(on_charge=locker.at_first("B"))) as shop:
        old = DbosRunner(url, busy_timeout=0.05, journal_outage=0.3, versioned=True)
        try:
            with pytest.raises(RunInterruptedError):  # B's effect made, its record not written
                await charging_engine(old, shop).run({}, run_id="v-1")
        finally:
            locker.release()
            await old.aclose()
        new = DbosRunner(url, versioned=True)
        try:
            engine = charging_engine(new, shop, ("a", "x", "b", "c"))
            with pytest.raises(DefinitionChangedError, match=r"step 'x' was added") as refused:
                await engine.run({}, run_id="v-1")
            assert refused.value.step == "x"
            assert new.application_version != old.application_version
            fresh = await engine.run({}, run_id="v-2")  # the queue was read: v-1, ahead of it, was not taken
            assert fresh.ok, fresh.error
            assert of_run(fetch(f"{shop}/effects"), "v-2") == ["A", "X", "B", "C"]
            assert of_run(fetch(f"{shop}/requests"), "v-1") == ["A", "B"]
            assert await new.status("v-1") in ("PENDING", "ENQUEUED")
        finally:
            await new.aclose()
        again = DbosRunner(url, versioned=True)
        try:
            result = await charging_engine(again, shop).run({}, run_id="v-1")
            assert again.application_version == old.application_version
            assert result.ok, result.error
            assert of_run(fetch(f"{shop}/requests"), "v-1") == ["A", "B", "B", "C"]  # B again, under its key
            assert of_run(fetch(f"{shop}/effects"), "v-1") == ["A", "B", "C"]
        finally:
            await again.aclose()


async def test_a_versioned_runner_takes_no_target_its_version_was_not_made_of(tmp_path: Path) -> None:
    runner = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}", versioned=True)
    try:
        engine = charging_engine(runner, "http://127.0.0.1:1")
        runner.register(engine)
        await runner.start()
        assert runner.application_version == definition_version(engine)
        runner.register(engine)  # the same definition: harmless
        with pytest.raises(DefinitionChangedError, match="register them first"):
            runner.register(charging_engine(runner, "http://127.0.0.1:1", ("a", "b")))
    finally:
        await runner.aclose()


async def test_versioned_temporal_workers_keep_each_run_on_the_definition_it_began_with(
    temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TemporalRunner(versioned=True)``: worker versioning with the definition's fingerprint as the build id, each
    run pinned to the version it began on. A run whose worker was killed (after C answered) is left alone by a worker
    of a changed definition (a node added), which runs a new run meanwhile; a worker of the old definition then
    finishes it, each effect once, and no workflow task of it ever failed."""
    import subprocess

    from temporalio.client import Client

    from tests.durable.fault_matrix import ROOT, workflow_text

    tag = uuid.uuid4().hex[:8]
    old, new, queue = f"vo-{tag}", f"vn-{tag}", f"q-{tag}"
    files = {"old": tmp_path / "five.yaml", "new": tmp_path / "changed.yaml"}
    files["old"].write_text(workflow_text(), encoding="utf-8")
    files["new"].write_text(workflow_text("added"), encoding="utf-8")

    def worker(name: str, file: str, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SHOP_URL": shop}
        command = [sys.executable, "-m", "tests.servers.fault_worker", "temporal", temporal_address]
        command += [str(files[file]), run_id, name, "--task-queue", queue, "--step-timeout", "4", "--versioned"]
        return subprocess.run([*command, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)

    with serve(create_app()) as shop:
        killed = await asyncio.to_thread(worker, "first", "old", old, "--cut", "after", "--order", "C")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        fresh = await asyncio.to_thread(worker, "new", "new", new)
        assert fresh.returncode == 0, fresh.stderr[-2000:]
        assert len(json.loads(fresh.stdout.splitlines()[-1])["output"]["charges"]) == 6
        resumed = await asyncio.to_thread(worker, "resumer", "old", old)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    assert of_run(effects, new) == ["A", "B", "X", "C", "D", "E"]
    assert of_run(effects, old) == ["A", "B", "C", "D", "E"]  # each once
    assert of_run(requests, old) in (["A", "B", "C", "D", "E"], ["A", "B", "C", "C", "D", "E"])
    assert not [r for r in requests if str(r["key"]).startswith(f"{old}.") and r["worker"] == "new"]
    client = await Client.connect(temporal_address)
    for name in ("SHOP_URL", "WORKER_NAME", "WORKER_PID"):  # what the workflow files read, to load them here
        monkeypatch.setenv(name, "0")
    for run_id, file in ((old, "old"), (new, "new")):
        handle = client.get_workflow_handle(run_id)
        info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
        assert info.deployment_version.build_id == definition_version(WorkflowEngine.from_yaml(files[file]))
        history = await handle.fetch_history()
        assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")], run_id


def test_kavalai_run_versioned_submits_and_runs_under_the_definition_version(tmp_path: Path) -> None:
    """``kavalai run --versioned``: a run made here, and one put on the queue with ``--submit`` (through
    ``DbosClient(application_version=...)``) and taken by a versioned process of the same definition, carry the
    workflow's :func:`definition_version` as their DBOS application version."""
    import subprocess

    from dbos import DBOSClient

    (tmp_path / "shop_tools.py").write_text(
        "from kavalai import pythontool\n\n@pythontool(idempotent=True)\ndef pay(order: str) -> str:\n"
        '    """Pay an order."""\n    return "paid " + order\n'
    )
    (tmp_path / "orders.yaml").write_text(
        "name: orders\ninput: object\noutput: object\npython_functions: [shop_tools.pay]\nnodes:\n"
        "  - {id: start, kind: start, next: a}\n"
        "  - {id: a, kind: function, tool: python://pay, inputs: {order: {expr: \"'A'\"}}, next: done}\n"
        '  - {id: done, kind: end, outputs: {paid: {expr: "a.result"}}}\n'
    )
    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"

    def kavalai_run(run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kavalai.cli.main", "run", "orders.yaml", "--versioned", "--db", db]
        command += ["--run-id", run_id, "--quiet", *extra]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    here = kavalai_run("v-1")
    assert here.returncode == 0, here.stderr
    submitted = kavalai_run("v-2", "--submit")
    assert (submitted.returncode, submitted.stdout.strip()) == (0, "v-2"), submitted.stderr
    taken = kavalai_run("v-2")  # a versioned process of the same definition takes it from the queue
    assert taken.returncode == 0, taken.stderr
    assert json.loads(taken.stdout) == {"paid": "paid A"}
    import importlib

    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("shop_tools")
        version = definition_version(WorkflowEngine.from_yaml(tmp_path / "orders.yaml"))
    finally:
        sys.path.remove(str(tmp_path))
    client = DBOSClient(system_database_url=db)
    try:
        assert [client.retrieve_workflow(run_id).get_status().app_version for run_id in ("v-1", "v-2")] == [version] * 2
    finally:
        client.destroy()


async def test_a_journal_recorded_by_position_is_refused_naming_its_step_never_replayed(tmp_path: Path) -> None:
    """A run whose steps an earlier release recorded by position (step-log rows named ``tool <URI>``, before steps
    had identities) resumed under this release: refused with :class:`DefinitionChangedError` naming that step, and
    nothing sent again (the old rows would not match a step's identity: the steps would run again under new keys)."""
    import sqlite3
    from contextlib import closing

    path = tmp_path / "journal.sqlite"
    async with interrupted_at_b(path, "old-1") as (runner, engine, shop):  # A recorded, B sent: pending
        with closing(sqlite3.connect(path)) as connection, connection:  # A's row as the earlier release wrote it
            renamed = connection.execute(
                "UPDATE kavalai_steps SET name = 'tool rest://shop.charge' WHERE run_id = 'old-1' AND position = 1"
            ).rowcount
        assert renamed == 1
        with pytest.raises(DefinitionChangedError, match=r"recorded its steps by position") as refused:
            await engine.run({}, run_id="old-1")
        assert refused.value.step == "tool rest://shop.charge"
        assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # nothing sent again
        assert await runner.status("old-1") == "PENDING"  # left as it stands


async def test_a_finished_run_is_not_read_back_under_another_workflow(journal_url: str) -> None:
    """Round 8's fault 5: a finished run's id given to another workflow. Found: DBOS handed the second workflow the
    first's outcome as its own (``ok``, ``{"n": [1, 2, 3]}`` for a workflow of nodes x, y), without a word. Refused
    now, naming the first step that differs, charging nothing; the run's own workflow still reads it back."""
    runner = DbosRunner(journal_url)
    try:
        with serve(create_app()) as shop:
            assert (await charging_engine(runner, shop).run({}, run_id="same-1")).output == {"n": [1, 2, 3]}
            with pytest.raises(
                DefinitionChangedError, match=r"Run same-1 was begun under another definition: step 'x'"
            ):
                await charging_engine(runner, shop, ("x", "y")).run({}, run_id="same-1")
            again = await charging_engine(runner, shop).run({}, run_id="same-1")
            assert again.ok
            assert again.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
    finally:
        await runner.aclose()


async def test_a_finished_temporal_run_is_not_read_back_under_another_workflow(temporal_address: str) -> None:
    """Round 8's fault 5 on Temporal (held): the finished run's recorded definition is compared before its result is
    read."""
    from kavalai.durable import TemporalRunner

    run_id = f"same-{uuid.uuid4().hex[:8]}"
    runner = TemporalRunner(temporal_address, task_queue=f"q-{run_id}")
    try:
        with serve(create_app()) as shop:
            assert (await charging_engine(runner, shop).run({}, run_id=run_id)).output == {"n": [1, 2, 3]}
            with pytest.raises(DefinitionChangedError, match=rf"Run {run_id} was begun under another definition"):
                await charging_engine(runner, shop, ("x", "y")).run({}, run_id=run_id)
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
    finally:
        await runner.aclose()
