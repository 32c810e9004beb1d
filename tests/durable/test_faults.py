"""The fault matrix of durable runs (``tests/durable/fault_matrix.py``): a worker killed with SIGKILL at a step
boundary, new workers racing to resume the run, against the real engines (issue 27).

The default suite runs a slice (one boundary per engine, racing workers on Postgres); ``-m faults`` runs the whole
matrix (every engine, boundary and number of resuming workers), as ``bench/durable_faults.py`` does with a table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.durable.fault_matrix import (
    TERM,
    Case,
    Engines,
    all_cases,
    changed_cases,
    full_cases,
    full_past_cases,
    outage_cases,
    run_case,
)

pytestmark = pytest.mark.timeout(420)

SLICE = [Case("sqlite", "after", 1), Case("postgres", "during", 2), Case("temporal", "before", 1)]
CHANGED = Case("postgres", "after", 1, "added")  # the "definition changed" row of the default suite


def servers_for(case: Case, request: pytest.FixtureRequest) -> Engines:
    return Engines(
        postgres=request.getfixturevalue("postgres_server") if case.engine == "postgres" else None,
        temporal=request.getfixturevalue("temporal_address") if case.engine == "temporal" else None,
    )


def check(case: Case, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    outcome = run_case(case, servers_for(case, request), tmp_path)
    assert outcome.ok, f"{case.label}: {outcome.problems}\n{outcome.logs}"
    assert outcome.killed
    assert outcome.completed_once
    assert outcome.returned == case.workers
    assert outcome.duplicates == (0 if case.boundary == "before" else 1)


@pytest.mark.parametrize("case", SLICE, ids=lambda case: case.label)
def test_a_worker_killed_at_a_step_boundary_and_its_run_resumed(
    case: Case, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    check(case, request, tmp_path)


@pytest.mark.parametrize(
    "case",
    [
        Case("sqlite", TERM, 1),
        *(pytest.param(Case(e, TERM, 1), marks=pytest.mark.faults) for e in ("postgres", "temporal")),
    ],
    ids=lambda case: case.label,
)
def test_a_worker_sent_sigterm_mid_step_and_its_run_resumed(
    case: Case, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Round 8's fault 4: SIGTERM (an orchestrator's stop, not SIGKILL) while the cut step's call is in flight; the
    worker ends (by the signal), a new one resumes the run, each charge made once (held on every engine)."""
    check(case, request, tmp_path)


@pytest.mark.faults
@pytest.mark.parametrize("case", [c for c in all_cases() if c not in SLICE], ids=lambda case: case.label)
def test_the_whole_fault_matrix(case: Case, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    check(case, request, tmp_path)


def test_a_worker_killed_and_its_run_resumed_under_a_changed_definition(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """SIGKILL after the cut step's answer, then a process whose workflow has a node added (the same tool as its
    neighbours) tries to resume: refused, naming the node, nothing sent; a process of the old definition then
    finishes the run once, each effect once."""
    check(CHANGED, request, tmp_path)


@pytest.mark.faults
@pytest.mark.parametrize("case", [c for c in changed_cases() if c != CHANGED], ids=lambda case: case.label)
def test_every_definition_change_on_every_engine(case: Case, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    check(case, request, tmp_path)


def test_every_fault_kind_names_a_test_of_the_default_suite() -> None:
    """The kinds x engines table (``bench/durable_faults.py --kinds``) runs these: each must exist."""
    import importlib

    from tests.durable.fault_matrix import FAULT_KINDS

    named = {test for cells in FAULT_KINDS.values() for test in cells.values() if test is not None}
    assert len(named) == 94  # 74 with round 8's 1-6, round 9's, two full disks; 87 with round 8's 7-12; 89 full past
    # the deadline; 94 with round 10's
    for test in named:
        module, _, name = test.split("[")[0].partition("::")
        assert callable(getattr(importlib.import_module(f"tests.durable.{module[:-3]}"), name, None)), test


@pytest.mark.parametrize(
    "case",
    [case if case.engine == "temporal" else pytest.param(case, marks=pytest.mark.faults) for case in outage_cases()],
    ids=lambda case: case.label,
)
def test_a_database_outage_mid_step_as_a_matrix_row(case: Case, tmp_path: Path) -> None:
    """The engine's database goes away while charge C is in flight and comes back (each engine its own database
    server, ``fault_matrix.run_outage``): the run completes in its worker, each charge made once. (DBOS's rows run
    under ``-m faults``; ``test_journal_io.py`` has their default-suite tests.)"""
    outcome = run_case(case, Engines(), tmp_path)
    assert outcome.ok, f"{case.label}: {outcome.problems}\n{outcome.logs}"
    assert outcome.killed  # the database did go away
    assert outcome.completed_once
    assert outcome.returned == 1
    # A DBOS step is recorded once the database is back; a Temporal activity whose end was lost is tried again, with
    # its key (the shop makes it once).
    assert outcome.duplicates <= (1 if case.engine == "temporal" else 0)


@pytest.mark.parametrize(
    "case",
    [case if case.engine == "sqlite" else pytest.param(case, marks=pytest.mark.faults) for case in full_cases()],
    ids=lambda case: case.label,
)
def test_a_full_journal_disk_mid_step_as_a_matrix_row(case: Case, tmp_path: Path) -> None:
    """The journal cannot grow while charge C is in flight (``full_disk.py``: a file size limit on the process
    writing it, which is SQLite's worker, the Postgres server or the Temporal dev server), until the step's write
    was refused twice; then it has room again. Never a tool error: the write is tried again, the run pauses and
    completes in its worker, each charge made once (Postgres's "could not extend file: File too large" was the
    tool's error, the run failed for good with C charged)."""
    outcome = run_case(case, Engines(), tmp_path)
    assert outcome.ok, f"{case.label}: {outcome.problems}\n{outcome.logs}"
    assert outcome.killed  # the disk did fill up
    assert outcome.completed_once
    assert outcome.returned == 1
    assert outcome.duplicates <= (1 if case.engine == "temporal" else 0)


@pytest.mark.parametrize(
    "case",
    [case if case.engine == "sqlite" else pytest.param(case, marks=pytest.mark.faults) for case in full_past_cases()],
    ids=lambda case: case.label,
)
def test_a_full_journal_disk_past_the_runs_deadline_as_a_matrix_row(case: Case, tmp_path: Path) -> None:
    """The journal cannot grow from charge C on, and gets no room back within the run's patience
    (``full_disk.run_full_past``): the run ends ``interrupted`` (told so, never a tool error, nothing sent after C),
    stays resumable, and once there is room a new worker finishes it, each charge made once."""
    outcome = run_case(case, Engines(), tmp_path)
    assert outcome.ok, f"{case.label}: {outcome.problems}\n{outcome.logs}"
    assert outcome.killed  # the disk did fill up
    assert outcome.completed_once
    assert outcome.returned == 1
    assert outcome.duplicates == 1  # C sent again, under its key, by the resuming worker
