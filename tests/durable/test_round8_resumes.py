"""Round 8's faults 9 to 11 (``FAULTS_round8.md``), each a resume after a crash, as ``kavalai run`` processes: the
first process pays order B and dies before its journal knows it (``os._exit(3)`` in the tool); then something is
changed, and ``kavalai run --run-id`` resumes the run. Counted in the tool's ledger (one entry per idempotency key)
and by the resumed run's output, never by elapsed time.

- fault 9: the resuming process is another kavalai release (``kavalai.__version__`` 99.0.0): a release is not a
  change of definition, the run resumes (DBOS on SQLite, Temporal);
- fault 10: DBOS's own ``operation_outputs`` table dropped while the run is interrupted (SQLite, Postgres): the
  kavalai step log holds the steps, the run resumes;
- fault 11: the journal's ``kavalai_schema`` row at version 0 (an older kavalai's; SQLite, Postgres): read as the
  first version, the row set to this release's, the run resumes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from kavalai.durable._schema import SCHEMA_VERSION
from tests.durable.conftest import ROOT
from tests.durable.test_cli import TOOLS, WORKFLOW, ledger

pytestmark = pytest.mark.timeout(900)

#: ``python -c`` of a ``kavalai`` process that reports another release (its first argument) as its version.
AS_RELEASE = (
    "import sys, kavalai; kavalai.__version__ = sys.argv.pop(1); "
    "from kavalai.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


class Resume:
    """The ledger workflow in ``directory``, run under ``run_id`` on ``engine`` (its ``kavalai`` options)."""

    def __init__(self, directory: Path, engine: list[str]) -> None:
        (directory / "ledger_tools.py").write_text(TOOLS, encoding="utf-8")
        self.workflow = directory / "ledger.yaml"
        self.workflow.write_text(WORKFLOW, encoding="utf-8")
        self.directory, self.engine = directory, engine
        self.ledger = directory / "ledger.jsonl"
        self.run_id = f"r8-{uuid.uuid4().hex[:8]}"

    def args(self) -> list[str]:
        return ["run", str(self.workflow), "--input", '{"who": "ann"}', "--run-id", self.run_id, *self.engine]

    def kavalai(self, entry: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """``kavalai run`` of the run (``entry``: how Python starts it), bounded at 300 s (a loaded machine)."""
        command = [sys.executable, *entry, *self.args()]
        full = {**os.environ, "PYTHONPATH": str(ROOT), "LEDGER": str(self.ledger), **env}
        return subprocess.run(
            command, cwd=self.directory, env=full, capture_output=True, text=True, timeout=300, check=False
        )

    def crash(self) -> None:
        """The first process: pays A and B, dies before B is journaled."""
        crashed = self.kavalai(["-m", "kavalai.cli.main"], {"CRASH_ON": "ann-B"})
        assert crashed.returncode == 3, crashed.stderr[-2000:]
        assert [entry["order"] for entry in ledger(self.ledger)] == ["ann-A", "ann-B"]

    def resume(self, release: str | None = None) -> None:
        """Resume the run (as ``release`` when given): it finishes, each order paid once."""
        entry = ["-m", "kavalai.cli.main"] if release is None else ["-c", AS_RELEASE, release]
        resumed = self.kavalai(entry, {})
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "Traceback" not in resumed.stderr
        assert json.loads(resumed.stdout) == {"paid": [1, 2, 3]}  # B's entry is read back by its key
        assert [entry["order"] for entry in ledger(self.ledger)] == ["ann-A", "ann-B", "ann-C"]
        attempts = [json.loads(line)["order"] for line in Path(f"{self.ledger}.attempts").read_text().splitlines()]
        assert attempts.count("ann-A") == 1  # a step the journal holds is never run again


def dbos_options(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[list[str], str]:
    """The ``kavalai run`` options of a DBOS journal of ``kind`` and its URL."""
    if kind == "sqlite":
        return [], f"sqlite:///{tmp_path / 'ledger.yaml.runs.sqlite'}"  # the default journal beside the workflow
    from tests.durable.fault_matrix import new_database

    url = new_database(request.getfixturevalue("postgres_server"), f"r8_{uuid.uuid4().hex[:8]}")
    return ["--db", url], url


def on_journal(url: str, *statements: str) -> None:
    """Run ``statements`` on the journal's database, as an operator would (a connection of its own)."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def read(url: str, query: str) -> list[tuple[object, ...]]:
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.exec_driver_sql(query)]
    finally:
        engine.dispose()


KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.faults)]


def test_a_run_resumed_by_another_kavalai_release_on_dbos(tmp_path: Path) -> None:
    """Fault 9 on DBOS (SQLite): a release is not a change of definition."""
    runs = Resume(tmp_path, [])
    runs.crash()
    runs.resume(release="99.0.0")


def test_a_run_resumed_by_another_kavalai_release_on_temporal(tmp_path: Path, temporal_address: str) -> None:
    """Fault 9 on Temporal (not run in round 8): the run is taken up by a worker of another release and finishes;
    B's activity, whose worker died, is tried again with its key (the ledger pays it once)."""
    queue = f"r8-{uuid.uuid4().hex[:8]}"
    runs = Resume(tmp_path, ["--engine", "temporal", "--address", temporal_address, "--queue", queue])
    runs.crash()
    runs.resume(release="99.0.0")


@pytest.mark.parametrize("kind", KINDS)
def test_dboss_own_step_table_dropped_while_a_run_is_interrupted(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Fault 10: an operator drops DBOS's ``operation_outputs`` while the run is interrupted; the steps are in the
    kavalai step log, so the resume finishes, each order paid once."""
    options, url = dbos_options(kind, tmp_path, request)
    runs = Resume(tmp_path, options)
    runs.crash()
    on_journal(
        url, "DROP TABLE dbos.operation_outputs CASCADE" if kind == "postgres" else "DROP TABLE operation_outputs"
    )
    runs.resume()


@pytest.mark.parametrize("kind", KINDS)
def test_a_journal_of_an_older_kavalai_at_schema_version_0(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Fault 11: the journal's version row says 0 (an older kavalai's); read as the first version, the row set to
    this release's, the interrupted run resumes; never half-recorded."""
    options, url = dbos_options(kind, tmp_path, request)
    runs = Resume(tmp_path, options)
    runs.crash()
    on_journal(url, "UPDATE kavalai_schema SET version = 0")
    runs.resume()
    assert read(url, "SELECT name, version FROM kavalai_schema") == [("kavalai", SCHEMA_VERSION)]
