"""The ownership model (tests/kernel/ownership_machine.py) run by Hypothesis with a bounded number of examples;
``bench/ownership_fuzz.py`` runs it with many more."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from tests.kernel.ownership_machine import KernelMachine


def test_calls_from_everywhere_interleaved_with_close_always_end() -> None:
    run_state_machine_as_test(
        KernelMachine,
        settings=settings(
            max_examples=4,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            derandomize=True,
        ),
    )
