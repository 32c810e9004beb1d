"""The journal's disk full mid-step, for the fault matrix's "full" rows (``fault_matrix.run_outage``): a database
that cannot grow while a step's call is in flight, then room again. No root and no small filesystem: real limits.

- **DBOS on Postgres**: the server's processes get ``RLIMIT_FSIZE`` (``PostgresServer.limit_file_size``); Postgres
  ignores ``SIGXFSZ``, so a table that must grow past the limit fails with ``could not extend file ...: File too
  large`` (``EFBIG``) while everything else goes on. The cluster's WAL files are 1 MB (``--wal-segsize=1``) and the
  step table is grown past that beforehand, so the limit can stop the step table's growth and not the WAL's. At the
  fault the limit is the table's size and its pages are filled to the brim (small rows until one is refused for
  want of a new page): the step's record needs a page and cannot have one.
- **DBOS on SQLite** and **Temporal** (a dev server keeping its state in a SQLite file): ``RLIMIT_FSIZE`` on the
  process writing the file (the DBOS worker, which CPython makes ignore ``SIGXFSZ``; the Temporal server) at the size
  of its largest database file, so the next write past its end fails.

Space returns when the limit is lifted (``free``). The padding rows belong to a run id no test uses.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["FULL_PAST", "FullDisk", "full_disk", "run_full_past"]

#: The WAL file size of the Postgres cluster (MB): the limit must stay above it.
WAL_MB = 1
#: The run id of the rows that grow the step table past the WAL file size.
PADDING = "kavalai-test-padding"


class FullDisk:
    """A journal (``target``) whose disk can be made full (:meth:`fill`) and given room again (:meth:`free`);
    :meth:`failures` counts the writes of the step it refused, from the worker's log (or the server's)."""

    def __init__(
        self, target: str, fill: Callable[[], None], free: Callable[[], None], server_log: Path | None = None
    ) -> None:
        self.target, self.fill, self.free, self.server_log = target, fill, free, server_log

    def failures(self, worker_log: Path) -> int:
        """The step's writes refused so far: the DBOS worker's "could not record" lines (the journal gate's), or
        the Temporal server's failed writes of a worker's answer (a workflow or activity task's completion: "disk
        I/O error")."""
        if self.server_log is None:
            return worker_log.read_text(errors="replace").count("could not record step")
        lines = self.server_log.read_text(errors="replace").splitlines()
        return sum('"service failures" operation=Respond' in line and "disk I/O error" in line for line in lines)


@contextmanager
def full_disk(engine: str, directory: Path, *, worker: Callable[[], Any] | None = None) -> Iterator[FullDisk]:
    """The journal of ``engine`` in ``directory`` and how to fill its disk; ``worker()`` gives the DBOS worker's
    process on SQLite (the one writing the file), known only once it runs."""
    if engine == "postgres":
        with _postgres() as disk:
            yield disk
    elif engine == "sqlite":
        journal = directory / "journal.sqlite"
        assert worker is not None
        pids: list[int] = []

        def fill() -> None:
            pids.append(worker().pid)
            limit_pid(pids[0], largest(journal))

        def free() -> None:
            for pid in pids[:1]:
                limit_pid(pid, None)

        yield FullDisk(f"sqlite:///{journal}", fill, free)
    else:
        from tests.servers.temporal_server import temporal_server_with_db

        log = directory / "temporal-server.txt"
        with temporal_server_with_db(directory / "temporal.db", log=log) as server:

            def full() -> None:
                assert server.process is not None
                limit_pid(server.process.pid, largest(server.db_file))

            def room() -> None:
                if server.process is not None and server.process.poll() is None:
                    limit_pid(server.process.pid, None)

            yield FullDisk(server.address, full, room, server_log=log)


def largest(database: Path) -> int:
    """The size of the largest file of the SQLite database ``database`` (itself, its WAL, its shared memory)."""
    files = [database, *(database.with_name(database.name + end) for end in ("-wal", "-shm", "-journal"))]
    return max(path.stat().st_size for path in files if path.exists())


def limit_pid(pid: int, limit: int | None) -> None:
    """``RLIMIT_FSIZE`` of the process ``pid`` (this user's): ``limit`` bytes, or none."""
    soft = resource.RLIM_INFINITY if limit is None else limit
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: nothing to limit
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, resource.RLIM_INFINITY))


@contextmanager
def _postgres() -> Iterator[FullDisk]:
    from tests.durable.fault_matrix import new_database
    from tests.servers.postgres_server import postgres_server

    with postgres_server(wal_segment_mb=WAL_MB) as server:
        url = new_database(server.url, "full")
        _grow_step_table(url)
        position = _fill_step_table(url, None)

        def fill() -> None:
            _fill_step_table(url, server.limit_file_size, position)

        try:
            yield FullDisk(url, fill, lambda: server.limit_file_size(None))
        finally:
            if server.process is not None and server.process.poll() is None:
                server.limit_file_size(None)


def _grow_step_table(url: str) -> None:
    """Make kavalai's tables and grow the step table past the WAL file size, with rows of a run nobody resumes."""
    import psycopg
    import sqlalchemy as sa

    from kavalai.durable._schema import ensure_schema

    engine = sa.create_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    try:
        ensure_schema(engine)
    finally:
        engine.dispose()
    rows = (WAL_MB << 20) // 200 + 1000  # rows of about 250 bytes: past the WAL file size
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO kavalai_steps (run_id, position, name, result) "
            "SELECT %s, n, 'padding', repeat('x', 200) FROM generate_series(1, %s) AS n",
            (PADDING, rows),
        )


def _fill_step_table(url: str, limit: Callable[[int], None] | None, first: int = -1) -> int:
    """Fill what room is left on the step table's pages with the smallest rows until one needs a new page: with
    ``limit`` (which limits the server's files to the table's size first) until one is refused for want of it, no
    page having room for a step's record then; without, until the table grew by a page (done before the run, so
    that the fault, mid-step, has little left to fill). The next row's position (rows are numbered down from
    ``first``)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:

        def size() -> int:
            found = connection.execute("SELECT pg_relation_size('kavalai_steps')").fetchone()
            assert found is not None
            return int(found[0])

        connection.execute("VACUUM kavalai_steps")  # the free space map knows every page's room
        before = size()
        if limit is not None:
            limit(before)
        for position in range(first, first - 100_000, -1):  # bounded; each row takes about 44 bytes of a page
            try:
                connection.execute("INSERT INTO kavalai_steps VALUES ('p', %s, '', '')", (position,))
            except psycopg.errors.InternalError_ as exc:
                assert limit is not None, exc
                assert "could not extend file" in str(exc), exc
                return position
            if limit is None and size() > before:
                return position - 1
        raise AssertionError("the step table's pages never filled up")


#: The boundary of the "full past the deadline" rows: the journal's disk stays full past the run's patience.
FULL_PAST = "full-past"
#: The run's patience (``journal_outage``, seconds) in those rows: the disk stays full past it.
PATIENCE = 1.5


def run_full_past(case: Any, directory: Path, *, timeout: float = 180.0) -> Any:
    """Run one "full past the deadline" row of the fault matrix (a DBOS engine): the journal's disk is full from
    charge C on and stays full past the run's patience. The worker must end the run ``interrupted`` (told so, not a
    tool error, nothing sent after C), leave it resumable, and, once there is room, a new worker finishes it with
    each effect once (C sent again under its key). Returns the matrix's ``Outcome``."""
    from tests.durable.fault_matrix import CUT, Outcome, check, completed, fetch, finish, start, workflow_text
    from tests.servers.effects_app import create_app
    from tests.servers.uvicorn_server import serve

    directory.mkdir(parents=True, exist_ok=True)
    workflow = directory / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    run_id = f"{case.label}-{directory.name}"
    outcome = Outcome(case)
    running: list[Any] = []
    with full_disk(case.engine, directory, worker=lambda: running[0]) as disk:
        filled: list[bool] = []

        def fill_at_cut(order: str) -> None:
            if order == CUT and not filled:
                filled.append(True)
                disk.fill()

        with serve(create_app(on_charge=fill_at_cut)) as rest:
            first = start(case, disk.target, workflow, run_id, "first", rest, "--journal-outage", str(PATIENCE))
            running.append(first)
            told = finish(first, timeout, outcome)
            outcome.killed = bool(filled)
            refused = disk.failures(directory / "first.log")
            before = fetch(f"{rest}/requests")
            if (
                told is None
                or told.get("status") != "interrupted"
                or "is interrupted: could not record" not in str(told.get("output"))
            ):
                outcome.problems.append(f"the first worker told {told}, not that the run is interrupted")
            if refused < 1:
                outcome.problems.append("the full disk refused no write of the step")
            if [r["order"] for r in before] != ["A", "B", CUT]:
                outcome.problems.append(f"requests before the disk had room: {[r['order'] for r in before]}")
            disk.free()
            outcome.returned = 0
            resumed = finish(start(case, disk.target, workflow, run_id, "resumer1", rest), timeout, outcome)
            requests, effects = fetch(f"{rest}/requests"), fetch(f"{rest}/effects")
        outcome.logs = "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(directory.glob("*.log"))
        )
        check(outcome, [resumed], before, requests, effects)
        outcome.completed_once = outcome.ok and completed(case, disk.target, run_id, outcome)
    return outcome
