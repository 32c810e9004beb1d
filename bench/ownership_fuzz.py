"""The ownership model of issue 24 (tests/kernel/ownership_machine.py) with many Hypothesis examples.

Run: ``.venv/bin/python bench/ownership_fuzz.py [--examples N] [--steps N]``. Each example starts one kernel with an
async Python tool, a sync one and a real stdio MCP server, and interleaves calls from tasks and from a second event
loop (with and without timeouts) with ``close()``, reconnects, ``remove_tool`` and cancelled callers, checking after
every step that each call has ended one of the ways it may, within its deadline plus a bounded slack, and at the end
that nothing is left. Prints the examples run, the steps taken and the time; exits non-zero on a failure (with the
shrunk example).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, where bench/mcp.py would shadow the mcp package;
# the repository's root takes its place (the model lives in tests/).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

from hypothesis import HealthCheck, settings  # noqa: E402 - after the path is set
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from tests.kernel.ownership_machine import KernelMachine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=60, help="Hypothesis examples (default 60)")
    parser.add_argument("--steps", type=int, default=25, help="steps per example (default 25)")
    options = parser.parse_args()
    started = time.monotonic()
    run_state_machine_as_test(
        KernelMachine,
        settings=settings(
            max_examples=options.examples,
            stateful_step_count=options.steps,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    elapsed = time.monotonic() - started
    print(f"ownership model: {options.examples} examples of up to {options.steps} steps passed in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
