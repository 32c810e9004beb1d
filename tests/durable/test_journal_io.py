"""The journal gate (:mod:`kavalai.durable._journal_io`): a database outage pauses a durable run and is never a step's
result; past the run's patience the run is interrupted and stays resumable; every journal operation of a run crosses
the gate.

The outage is real: another process holds the SQLite journal's write lock (``BEGIN IMMEDIATE``) from the moment the
local shop service records a charge until the test lets go, so the step's effect is made and its record cannot be
written. Assertions count requests and effects at the service, the gate's attempts and the run's final state.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kavalai import FunctionKernel, RestServer
from kavalai.durable import DbosRunner, DurableRunner
from kavalai.durable._journal_io import journal_io, passing_failure
from kavalai.errors import RunInterruptedError
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import fetch
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

SRC = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "durable"

LOCKER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
connection.execute("COMMIT")
"""


class Locker:
    """A process that holds a SQLite database's write lock from :meth:`lock` until :meth:`release`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.process: subprocess.Popen[str] | None = None

    def lock(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(self.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.communicate("go\n", timeout=30)

    def at_first(self, locked_order: str) -> Callable[[str], None]:
        """A shop's ``on_charge`` that locks the database at the first charge of ``locked_order``."""
        return lambda order: self.lock() if order == locked_order and self.process is None else None


class Attempts(logging.Handler):
    """Counts the gate's failed attempts (its warnings); :attr:`reached` is set at ``goal``."""

    def __init__(self, goal: int) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.goal = goal
        self.reached = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "trying again" in record.getMessage():
            self.count += 1
            if self.count >= self.goal:
                self.reached.set()


@pytest.fixture
def attempts() -> Iterator[Attempts]:
    handler = Attempts(goal=2)
    logger = logging.getLogger("kavalai.durable")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def charging_engine(runner: DurableRunner, shop: str, nodes: tuple[str, ...] = ("a", "b", "c")) -> WorkflowEngine:
    """A workflow charging one order per node (node ``a`` charges order ``A``), in order."""
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url=shop))
    kernel.register_rest_tool(
        "shop",
        "charge",
        "POST",
        {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}},
        path="/charge",
    )
    builder = WorkflowBuilder("charges", input=dict, output=dict).start(next=nodes[0])
    for node, after in zip(nodes, (*nodes[1:], "done"), strict=True):
        order = {"expr": f"'{node.upper()}'"}
        inputs = {"order": order, "amount": {"expr": "1"}}
        builder = builder.function(node, tool="rest://shop.charge", inputs=inputs, next=after)
    charges = ", ".join(f"{node}.result.charge" for node in nodes)
    workflow = builder.end("done", outputs={"n": {"expr": f"[{charges}]"}})
    return WorkflowEngine(workflow.build(), kernel, durable=runner)


async def outage_then_back(
    engine: WorkflowEngine, run_id: str, attempts: Attempts, shop: str, back: Callable[[], None]
) -> Any:
    """Run ``engine`` while its journal goes away at step B; once the record of B has failed ``attempts.goal``
    times (tried again, never handed to the workflow), ``back()`` brings the database back; the run's result."""
    run = asyncio.ensure_future(engine.run({}, run_id=run_id))
    try:
        assert await asyncio.to_thread(attempts.reached.wait, 120)
        assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # step C has not begun
        await asyncio.to_thread(back)
        return await run
    finally:
        run.cancel()


def orders(rows: list[dict[str, Any]]) -> list[str]:
    return [row["order"] for row in rows]


async def test_an_outage_mid_step_pauses_the_run_which_goes_on_once_the_database_is_back(
    tmp_path: Path, attempts: Attempts
) -> None:
    path = tmp_path / "journal.sqlite"
    locker = Locker(path)
    runner = DbosRunner(f"sqlite:///{path}", busy_timeout=0.05, journal_outage=600)
    on_charge = lambda order: locker.lock() if order == "B" else None  # noqa: E731
    try:
        with serve(create_app(on_charge=on_charge)) as shop:
            result = await outage_then_back(charging_engine(runner, shop), "outage-1", attempts, shop, locker.release)
            assert result.ok, result.error
            assert result.output == {"n": [1, 2, 3]}
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
            assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
        assert attempts.count >= 2
        assert await runner.status("outage-1") == "SUCCESS"
        recorded = [name for _, name, _ in await runner.recorded_steps("outage-1")]
        assert recorded == [f"{node}#1/tool rest://shop.charge#1" for node in "abc"]
    finally:
        locker.release()
        await runner.aclose()


@asynccontextmanager
async def interrupted_at_b(
    path: Path, run_id: str, *, concurrency: int | None = None
) -> AsyncIterator[tuple[DbosRunner, WorkflowEngine, str]]:
    """The charges run under ``run_id`` on the SQLite journal ``path``, held locked by another process from B's charge
    on, past the run's patience: the run is interrupted, pending, A recorded and B sent; the journal is free again.
    Yields the runner, the engine and the shop's URL."""
    locker = Locker(path)
    runner = DbosRunner(f"sqlite:///{path}", busy_timeout=0.05, journal_outage=0.5, concurrency=concurrency)
    try:
        with serve(create_app(on_charge=locker.at_first("B"))) as shop:
            engine = charging_engine(runner, shop)
            with pytest.raises(RunInterruptedError, match=rf"Run {run_id} is interrupted: could not record step 2"):
                await engine.run({}, run_id=run_id)
            assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # no step began after the failed record
            assert await runner.status(run_id) == "PENDING"  # not failed: resumable
            locker.release()
            yield runner, engine, shop
    finally:
        locker.release()
        await runner.aclose()


async def test_an_outage_past_the_runs_patience_interrupts_it_and_the_run_resumes_later(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    async with interrupted_at_b(tmp_path / "journal.sqlite", "outage-2") as (runner, engine, shop):
        assert await shown_as("interrupted", url, "outage-2")  # marked once the journal is back
        await resumed_once(engine, "outage-2", shop)
        assert await runner.status("outage-2") == "SUCCESS"
        assert await shown_as("finished", url, "outage-2")


async def test_an_interrupted_run_leaves_its_place_on_the_queue_to_the_next_run(tmp_path: Path) -> None:
    """A runner that runs one run at a time, its run interrupted (parked, resumable): the next run of the queue is
    taken and finishes; the interrupted one then resumes, each charge once."""
    async with interrupted_at_b(tmp_path / "journal.sqlite", "first", concurrency=1) as (runner, engine, shop):
        result = await engine.run({}, run_id="second")
        assert result.ok, result.error
        assert orders(fetch(f"{shop}/effects")) == ["A", "B", "A", "B", "C"]  # the second run's three, after A, B
        assert await runner.status("first") == "PENDING"
        result = await engine.run({}, run_id="first")
        assert result.ok, result.error
        assert orders(fetch(f"{shop}/effects")) == ["A", "B", "A", "B", "C", "C"]  # the first's B made once


async def resumed_once(engine: WorkflowEngine, run_id: str, shop: str) -> None:
    """Run ``run_id``, interrupted while B's charge was in flight, again: it finishes, and B's outcome, never recorded,
    was sent again with the same key, so the service made each charge once."""
    result = await engine.run({}, run_id=run_id)
    assert result.ok, result.error
    assert result.output == {"n": [1, 2, 3]}
    requests = fetch(f"{shop}/requests")
    assert orders(requests) == ["A", "B", "B", "C"]
    assert requests[1]["key"] == requests[2]["key"]
    assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]


async def shown_as(state: str, url: str, run_id: str) -> bool:
    """Whether ``kavalai runs show`` and ``list`` (a :class:`DbosClient`) come to show the run in ``state`` (a bounded
    wait: the mark of an interruption is written by the runner's next heartbeat)."""
    from kavalai.durable.dbos import DbosClient

    client = await asyncio.to_thread(DbosClient, url)
    try:
        for _ in range(600):
            listed = {run.run_id: run.state for run in await asyncio.to_thread(client.list_runs)}
            shown = await asyncio.to_thread(client.describe, run_id)
            if shown.state == state and listed.get(run_id) == state:
                return True
            await asyncio.sleep(0.05)
        return False
    finally:
        client.close()


# ------------------------------------------------------------------------------------------------ the gate itself


def locked() -> sa.exc.OperationalError:
    import sqlite3

    return sa.exc.OperationalError("INSERT ...", {}, sqlite3.OperationalError("database is locked"))


async def test_a_passing_failure_is_tried_again_until_it_passes() -> None:
    calls: list[int] = []

    def write(n: int) -> str:
        calls.append(n)
        if len(calls) < 4:
            raise locked()
        return "written"

    assert await journal_io("run-1", "record step 1", write, 7) == "written"
    assert calls == [7, 7, 7, 7]


async def test_past_its_patience_the_run_is_interrupted_and_other_errors_pass_through() -> None:
    calls: list[str] = []

    def down() -> None:
        calls.append("try")
        raise locked()

    with pytest.raises(RunInterruptedError, match="could not record step 2 in its journal after 1 attempts") as caught:
        await journal_io("run-1", "record step 2", down, outage=0)
    assert caught.value.run_id == "run-1"
    assert calls == ["try"]

    def wrong() -> None:
        raise sa.exc.IntegrityError("INSERT ...", {}, Exception("UNIQUE constraint failed"))

    with pytest.raises(sa.exc.IntegrityError):
        await journal_io("run-1", "record step 2", wrong)
    assert passing_failure(locked())
    assert not passing_failure(ValueError("database is locked"))


def test_a_read_only_or_unauthorized_database_is_a_passing_failure() -> None:
    """A failover to a standby (SQLSTATE 25006, raised as ``InternalError``), a password rotated under the worker
    (28P01 at connect) and a read-only SQLite file are outages an operator ends, not results of a step; a constraint
    (23505) is still a bug."""
    import psycopg

    read_only = psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction")
    assert passing_failure(sa.exc.InternalError("INSERT ...", {}, read_only))
    password = psycopg.errors.InvalidPassword('password authentication failed for user "kav"')
    assert passing_failure(sa.exc.OperationalError("SELECT 1", {}, password))
    import sqlite3

    assert passing_failure(
        sa.exc.OperationalError("INSERT ...", {}, sqlite3.OperationalError("attempt to write a readonly database"))
    )
    unique = psycopg.errors.UniqueViolation("duplicate key value violates unique constraint")
    assert not passing_failure(sa.exc.IntegrityError("INSERT ...", {}, unique))
    assert not passing_failure(sa.exc.InternalError("SELECT ...", {}, psycopg.errors.InternalError_("bug")))


def test_a_table_that_cannot_grow_is_a_passing_failure() -> None:
    """Postgres out of room by a file size limit (``EFBIG``) says ``could not extend file ...: File too large`` as
    an ``InternalError`` (SQLSTATE XX000, no class of its own): a full disk an operator ends, not the step's error
    (it was, and the run failed for good with the charge made; ``test_faults.py``'s full-disk rows)."""
    import psycopg

    too_large = psycopg.errors.InternalError_('could not extend file "base/16384/16392": File too large')
    assert passing_failure(sa.exc.InternalError("INSERT ...", {}, too_large))


async def test_a_full_journal_disk_pauses_the_write_until_space_is_freed(tmp_path: Path) -> None:
    """The journal's disk full (SQLite's ``database or disk is full``, here a real database capped by
    ``max_page_count``; an operator frees space) is an outage, not a bug: the write is tried again and goes in once
    there is room. Found with a tmpfs filled mid-run: the record of a made charge raised, the run hung, never
    resumable."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'full.sqlite'}", poolclass=sa.pool.StaticPool)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE steps (result BLOB)")
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
        connection.exec_driver_sql(f"PRAGMA max_page_count = {pages}")  # no room for one more page
    tries: list[str] = []

    def record() -> int:
        tries.append("try")
        if len(tries) == 3:  # the operator frees space
            with engine.begin() as connection:
                connection.exec_driver_sql("PRAGMA max_page_count = 100000")
        with engine.begin() as connection:
            connection.exec_driver_sql("INSERT INTO steps VALUES (randomblob(20000))")
            return int(connection.exec_driver_sql("SELECT count(*) FROM steps").scalar() or 0)

    try:
        assert await journal_io("run-1", "record step 1", record) == 1
        assert tries == ["try", "try", "try"]
    finally:
        engine.dispose()


def test_every_journal_operation_of_a_run_crosses_the_gate() -> None:
    """The enumeration: in the step log, the answer log and the code a DBOS run executes, no blocking journal
    operation goes to a thread (or runs) except through ``journal_io``."""
    for module in ("_step_log.py", "_answer_log.py"):
        tree = ast.parse((SRC / module).read_text())
        assert not [node for node in ast.walk(tree) if _to_thread(node)], f"{module} bypasses journal_io"
    run_code = [
        node
        for module in ("dbos.py", "_dbos_journal.py", "_cancel_watch.py")
        for node in ast.walk(ast.parse((SRC / module).read_text()))
        if isinstance(node, ast.AsyncFunctionDef | ast.ClassDef)
        and node.name in ("_kavalai_run", "DbosJournal", "CancelWatch")
    ]
    assert len(run_code) == 3
    for code in run_code:
        assert not [node for node in ast.walk(code) if _to_thread(node)], f"{code.name} bypasses journal_io"
    journal = ast.parse((SRC / "_step_log.py").read_text())
    gated = [n for n in ast.walk(journal) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "journal_io"]
    # the read of the run's steps when an attempt begins (and the removal of an interruption's mark), the sent mark of
    # an unsafe step, the record of each step, the question about a step in doubt and the looks for its answer
    assert len(gated) == 6
    answers = ast.parse((SRC / "_answer_log.py").read_text())
    crossing = {
        node.name
        for node in ast.walk(answers)
        if isinstance(node, ast.AsyncFunctionDef)
        and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "journal_io" for n in ast.walk(node))
    }
    every_async = {node.name for node in ast.walk(answers) if isinstance(node, ast.AsyncFunctionDef)}
    assert crossing == every_async == {"lookup", "keep", "publish", "open_questions"}


def _to_thread(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_thread"


async def test_postgres_stopped_mid_step_and_started_again_pauses_the_run(attempts: Attempts) -> None:
    """The finding of issue 35: Postgres stopped with ``-m immediate`` while a charge is in flight, started again once
    the run has tried (and failed) to record it twice: the charge is not a failed step, the run goes on, each
    charge once."""
    from tests.durable.fault_matrix import new_database
    from tests.servers.postgres_server import postgres_server

    with postgres_server() as server:
        url = new_database(server.url, "outage")
        runner = DbosRunner(url, journal_outage=600)

        def stop_at_b(order: str) -> None:
            if order == "B":
                server.stop(immediate=True)

        try:
            with serve(create_app(on_charge=stop_at_b)) as shop:
                engine = charging_engine(runner, shop)
                result = await outage_then_back(engine, "pg-outage-1", attempts, shop, server.start)
                assert result.ok, result.error
                assert result.output == {"n": [1, 2, 3]}
                assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
                assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
            assert await runner.status("pg-outage-1") == "SUCCESS"
        finally:
            if server.process is None or server.process.poll() is not None:  # back up, for aclose()
                server.start()
            await runner.aclose()


async def test_postgres_down_past_the_patience_interrupts_the_run_then_resumed() -> None:
    """Postgres stopped (``-m immediate``) while a charge is in flight and kept down past the run's patience: the run
    is interrupted, not failed; once Postgres is back it is shown ``interrupted``, and run again under its id it
    resumes, each charge made once. (It once hung the process at exit: see ``test_parked.py``.)"""
    from tests.durable.fault_matrix import new_database
    from tests.servers.postgres_server import postgres_server

    with postgres_server() as server:
        url = new_database(server.url, "outage_past")
        runner = DbosRunner(url, journal_outage=0.5)
        stopped: list[str] = []

        def stop_at_first_b(order: str) -> None:
            if order == "B" and not stopped:
                stopped.append(order)
                server.stop(immediate=True)

        try:
            with serve(create_app(on_charge=stop_at_first_b)) as shop:
                engine = charging_engine(runner, shop)
                with pytest.raises(RunInterruptedError, match=r"Run pg-outage-2 is interrupted: could not record step"):
                    await engine.run({}, run_id="pg-outage-2")
                assert orders(fetch(f"{shop}/requests")) == ["A", "B"]  # no step began after the failed record
                await asyncio.to_thread(server.start)
                assert await runner.status("pg-outage-2") == "PENDING"  # not failed: resumable
                assert await shown_as("interrupted", url, "pg-outage-2")  # marked once the journal is back
                await resumed_once(engine, "pg-outage-2", shop)
            assert await shown_as("finished", url, "pg-outage-2")
        finally:
            if server.process is None or server.process.poll() is not None:  # back up, for aclose()
                server.start()
            await runner.aclose()


async def test_an_outcome_dbos_could_not_write_interrupts_the_caller_instead_of_a_wait_for_ever(tmp_path: Path) -> None:
    """DBOS writes a run's outcome after its execution has left the target; when that write fails (found with the
    journal's tmpfs full after the last charge: DBOS logged `database or disk is full` and `kavalai run` waited for
    ever, the run PENDING), the caller waiting here is told the run is interrupted once the run's patience has
    passed, and the run stays resumable. A run whose outcome is written is returned as before."""
    from kavalai.durable._dbos_local import LocalRuns

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    table = sa.Table(
        "workflow_status", sa.MetaData(), sa.Column("workflow_uuid", sa.Text), sa.Column("status", sa.Text)
    )
    table.metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"workflow_uuid": "full", "status": "PENDING"}])
        connection.execute(table.insert(), [{"workflow_uuid": "written", "status": "PENDING"}])
    runs = LocalRuns()
    try:
        for run_id in ("full", "written"):
            with runs.executing(run_id):
                pass  # its steps are recorded; the outcome is DBOS's write, after this
        with engine.begin() as connection:
            connection.execute(table.update().where(table.c.workflow_uuid == "written").values(status="SUCCESS"))
        await runs.until_settled("written", engine, table, 0.05, outage=0.2, floor=0)
        with pytest.raises(RunInterruptedError, match="Run full is interrupted: could not record its outcome"):
            await asyncio.wait_for(runs.until_settled("full", engine, table, 0.05, outage=0.2, floor=0), 60)
    finally:
        engine.dispose()
