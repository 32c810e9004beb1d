"""The ownership model (tests/kernel/ownership_machine.py) run by Hypothesis with a bounded number of examples;
``bench/ownership_fuzz.py`` runs it with many more, its MCP server a stdio process of each example's own.

Here the MCP server is one streamable HTTP server this test starts once: with a stdio server each example started
a process, and another at each reconnect after a ``close()``, each costing 5-7 s under a load of 12 (importing the
SDK), so the test ran past pytest-timeout's 60 s on 3.13 while its rules took a few seconds (tenth session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from tests.kernel.ownership_machine import KernelMachine
from tests.servers.mcp_deadline import build_server
from tests.servers.uvicorn_server import serve


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    """The deadline-recording MCP server over streamable HTTP on a free local port."""
    with serve(build_server().streamable_http_app()) as base_url:
        yield f"{base_url}/mcp"


def test_calls_from_everywhere_interleaved_with_close_always_end(mcp_url: str) -> None:
    class Machine(KernelMachine):
        pass

    Machine.mcp_url = mcp_url
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=4,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            derandomize=True,
        ),
    )


@pytest.mark.parametrize("how", ["two-tasks", "two-loops", "close-and-reconnect"])
def test_two_closes_at_once_with_calls_and_cut_threads_in_flight(mcp_url: str, how: str) -> None:
    """The machine's new rule, each way, on a state Hypothesis reaches only now and then in a few examples: calls of
    every kind in flight on both loops and threads of cut sync calls running, then two ``close()`` at once (or one
    racing a reconnect); the invariants (threads counted among them) after every step, and the teardown."""

    class Machine(KernelMachine):
        pass

    Machine.mcp_url = mcp_url
    machine = Machine()
    try:
        machine.start_call("python", "task", 3600.0, None)
        machine.start_call("mcp", "second-loop", 3600.0, None)
        machine.start_call("sync", "second-loop", 0.4, 1.0)
        machine.cut_hung_sync_calls("task", 5)
        machine.check_invariants_now()
        machine.two_closes_at_once(how)
        machine.check_invariants_now()
    finally:
        machine.teardown()
