"""The fault matrix of durable runs: a worker killed (``SIGKILL``) at a step boundary, one or two new workers racing
to resume the run, and what must hold afterwards (issue 27).

A workflow file of five steps charges orders A to E through ``rest://shop.charge``, a real local REST service
(``effects_app``) that records every request with its ``Idempotency-Key`` and makes one effect per key. For one
:class:`Case` (an engine, a boundary, a number of resuming workers), :func:`run_case`:

1. runs ``tests.servers.fault_worker`` in a process of its own, which runs the workflow durably under a run id and is
   killed at the cut step (order C): ``before`` the step's request is sent, ``during`` the HTTP call (the service
   kills the caller after recording the request, before answering), or ``after`` the answer came back and before
   the engine recorded the step;
2. starts ``workers`` new processes at once, each making the same call (``engine.run(input, run_id=...)``), so they
   race to resume it;
3. checks (:meth:`Outcome.problems`): every resuming process returned, with the run's output; the run completed once
   (the engine says so, and every process got the same output); each step's request reached the service with one
   key, the cut step's at most twice, the steps before the cut once (none ran again), every step had one effect.

``tests/durable/test_faults.py`` runs a slice of the matrix in the default suite and the whole of it behind the
``faults`` marker; ``bench/durable_faults.py`` prints the whole matrix as a table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.durable.full_disk import FULL_PAST, run_full_past
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

ROOT = Path(__file__).resolve().parents[2]
ORDERS = ("A", "B", "C", "D", "E")
CUT = "C"
ENGINES = ("sqlite", "postgres", "temporal")
BOUNDARIES = ("before", "during", "after")
#: The boundary of the SIGTERM rows: the worker is sent SIGTERM (an orchestrator's stop) during the cut step's call.
TERM = "term"

#: The REST tool's timeout, which is also the longest an attempt of its step may take on Temporal: after it, a step
#: whose worker died is tried again on another worker.
TOOL_TIMEOUT = 4

WORKFLOW = """
name: five-charges
input: {type: object, properties: {amount: {type: integer}}}
output: object
rest_servers:
  - name: shop
    url_env: SHOP_URL
    headers: {X-Worker: "${WORKER_NAME}", X-Pid: "${WORKER_PID}"}
    rest_tools:
      - name: charge
        method: POST
        path: /charge
        timeout: %(timeout)s
        input_schema:
          type: object
          properties: {order: {type: string}, amount: {type: integer}}
          required: [order, amount]
nodes:
  - {id: start, kind: start, next: a}
%(nodes)s
  - {id: done, kind: end, outputs: {charges: {expr: "[%(charges)s]"}}}
"""


#: The definition changes of the matrix's "definition changed" rows: the five nodes as they are after the change,
#: as (node, order charged), and the node the refusal must name.
CHANGES: dict[str, tuple[list[tuple[str, str]], str]] = {
    "added": ([("a", "A"), ("b", "B"), ("x", "X"), ("c", "C"), ("d", "D"), ("e", "E")], "x"),  # the same tool
    "removed": ([("a", "A"), ("b", "B"), ("c", "C"), ("e", "E")], "d"),
    "renamed": ([("a", "A"), ("b", "B"), ("c", "C"), ("dee", "D"), ("e", "E")], "dee"),
}


def workflow_text(change: str | None = None) -> str:
    """The five-step workflow file; with ``change``, as :data:`CHANGES` changes it."""
    pairs = [(order.lower(), order) for order in ORDERS] if change is None else CHANGES[change][0]
    ids = [node for node, _ in pairs]
    nodes = []
    for index, (node, order) in enumerate(pairs):
        after = ids[index + 1] if index + 1 < len(ids) else "done"
        inputs = f"{{order: {{expr: \"'{order}'\"}}, amount: input.amount}}"
        nodes.append(f"  - {{id: {node}, kind: function, tool: rest://shop.charge, inputs: {inputs}, next: {after}}}")
    charges = ", ".join(f"{node}.result.charge" for node in ids)
    return WORKFLOW % {"timeout": TOOL_TIMEOUT, "nodes": "\n".join(nodes), "charges": charges}


@dataclass(frozen=True)
class Case:
    """One cell of the matrix."""

    engine: str  # sqlite, postgres (DBOS on each) or temporal
    boundary: str  # before, during or after (the cut step's call); "term": during, the worker sent SIGTERM
    workers: int  # resuming processes started at once
    change: str | None = None  # a process of a changed definition tries to resume first (CHANGES), and is refused

    @property
    def label(self) -> str:
        changed = "" if self.change is None else f"-{self.change}"
        return f"{self.engine}-{self.boundary}-{self.workers}{changed}"


@dataclass
class Outcome:
    """What a case did, and what was wrong with it."""

    case: Case
    killed: bool = False
    returned: int = 0  # resuming processes that returned the run's output
    completed_once: bool = False
    duplicates: int = 0  # requests beyond one per step (the cut step's repeat)
    seconds: float = 0.0  # from the kill to the last resuming process's exit
    problems: list[str] = field(default_factory=list)
    logs: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def all_cases() -> list[Case]:
    """The whole matrix: every engine, boundary and number of resuming workers (1 and 2)."""
    return [Case(e, b, w) for e in ENGINES for b in BOUNDARIES for w in (1, 2)]


def changed_cases() -> list[Case]:
    """The "definition changed between crash and resume" rows: every engine and change, the worker killed after
    the cut step's answer came back (its effect made, not recorded), one resuming worker of the old definition."""
    return [Case(e, "after", 1, change) for e in ENGINES for change in CHANGES]


@dataclass(frozen=True)
class Engines:
    """The engines' servers, shared by many cases: a Postgres server (a fresh database per case) and a Temporal dev
    server (a task queue per case)."""

    postgres: str | None = None
    temporal: str | None = None

    def target(self, case: Case, directory: Path) -> str:
        """The journal (DBOS) or server address (Temporal) of a new case."""
        if case.engine == "sqlite":
            return f"sqlite:///{directory / 'journal.sqlite'}"
        if case.engine == "postgres":
            assert self.postgres is not None
            return new_database(self.postgres, "faults_" + uuid.uuid4().hex[:12])
        assert self.temporal is not None
        return self.temporal


@contextmanager
def engines(names: set[str]) -> Iterator[Engines]:
    """The servers the engines ``names`` need, for as long as the block runs."""
    with ExitStack() as stack:
        postgres_url = temporal_address = None
        if "postgres" in names:
            from tests.servers.postgres_server import postgres

            postgres_url = stack.enter_context(postgres())
        if "temporal" in names:
            from tests.servers.temporal_server import temporal_server

            temporal_address = stack.enter_context(temporal_server())
        yield Engines(postgres_url, temporal_address)


def new_database(server: str, name: str) -> str:
    """Create the database ``name`` on the Postgres ``server`` (its URL) and return its URL."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return server.rsplit("/", 1)[0] + "/" + name


def fetch(url: str) -> Any:
    """GET ``url``'s JSON (plain urllib: the check must not share the code under test)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def start(case: Case, target: str, workflow: Path, run_id: str, name: str, rest: str, *extra: str) -> Any:
    """A ``fault_worker`` process of ``case``; its stderr goes to ``NAME.log`` beside the workflow file."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHOP_URL": rest}
    engine = "temporal" if case.engine == "temporal" else "dbos"
    command = [sys.executable, "-m", "tests.servers.fault_worker", engine, target, str(workflow), run_id, name]
    command += ["--task-queue", f"q-{run_id}", "--step-timeout", str(TOOL_TIMEOUT), *extra]
    with (workflow.parent / f"{name}.log").open("w") as log:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)


def run_case(case: Case, servers: Engines, directory: Path, *, timeout: float = 180.0) -> Outcome:
    """Run one case in ``directory`` (its workflow file, journal and logs) and check it."""
    if case.boundary in (OUTAGE, FULL):
        return run_outage(case, servers, directory, timeout=timeout)
    if case.boundary == FULL_PAST:
        return run_full_past(case, directory, timeout=timeout)
    directory.mkdir(parents=True, exist_ok=True)
    workflow = directory / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    run_id = f"{case.label}-{uuid.uuid4().hex[:8]}"
    target = servers.target(case, directory)
    outcome = Outcome(case)
    kill_during = CUT if case.boundary in ("during", TERM) else None
    kill_signal = signal.SIGTERM if case.boundary == TERM else signal.SIGKILL
    with serve(create_app(kill_during=kill_during, kill_signal=kill_signal)) as rest:
        cut = [] if kill_during else ["--cut", case.boundary, "--order", CUT]
        first = start(case, target, workflow, run_id, "first", rest, *cut)
        try:
            first.communicate(timeout=timeout)
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate(timeout=10)
        outcome.killed = first.returncode == -kill_signal
        if not outcome.killed:
            outcome.problems.append(f"the first worker was not killed (exit {first.returncode})")
        before = fetch(f"{rest}/requests")
        if case.change is not None:
            refused_by_changed(case, target, workflow, run_id, rest, before, timeout, outcome)
        began = time.monotonic()
        resumers = [start(case, target, workflow, run_id, f"resumer{n}", rest) for n in range(1, case.workers + 1)]
        outputs = [finish(process, timeout, outcome) for process in resumers]
        outcome.seconds = time.monotonic() - began
        requests, effects = fetch(f"{rest}/requests"), fetch(f"{rest}/effects")
    outcome.logs = "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(directory.glob("*.log"))
    )
    check(outcome, outputs, before, requests, effects)
    outcome.completed_once = outcome.ok and completed(case, target, run_id, outcome)
    return outcome


def refused_by_changed(
    case: Case, target: str, workflow: Path, run_id: str, rest: str, before: list[Any], timeout: float, outcome: Outcome
) -> None:
    """A process whose workflow file is changed as ``case.change`` says tries to resume the run: it must be refused
    (exit 1, :class:`~kavalai.errors.DefinitionChangedError` naming the first step that differs) and send nothing
    but, at most, the cut step again under its own key (on Temporal its worker may take the step's retried activity,
    which carries that step's request)."""
    assert case.change is not None
    changed = workflow.with_name("changed.yaml")
    changed.write_text(workflow_text(case.change), encoding="utf-8")
    process = start(case, target, changed, run_id, "changed", rest)
    try:
        process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate(timeout=10)
        outcome.problems.append(f"the changed worker did not return within {timeout:.0f} s")
        return
    log = (workflow.parent / "changed.log").read_text(errors="replace")
    step = CHANGES[case.change][1]
    if process.returncode != 1 or "DefinitionChangedError" not in log or f"step {step!r} was" not in log:
        outcome.problems.append(f"the changed worker was not refused naming {step!r} (exit {process.returncode})")
    cut_keys = {r["key"] for r in before if r["order"] == CUT}
    sent = fetch(f"{rest}/requests")[len(before) :]
    if any(r["order"] != CUT or r["key"] not in cut_keys for r in sent):
        outcome.problems.append(f"the changed worker sent {[(r['order'], r['key']) for r in sent]}")


def finish(process: Any, timeout: float, outcome: Outcome) -> Any:
    """Wait for a resuming process; its printed result, or ``None`` (with the problem noted)."""
    try:
        stdout, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate(timeout=10)
        outcome.problems.append(f"a resuming worker did not return within {timeout:.0f} s")
        return None
    if process.returncode != 0:
        outcome.problems.append(f"a resuming worker exited with {process.returncode}")
        return None
    outcome.returned += 1
    return json.loads(stdout.strip().splitlines()[-1])


def check(outcome: Outcome, outputs: list[Any], before: list[Any], requests: list[Any], effects: list[Any]) -> None:
    """The matrix's checks on what the service received and what the resuming processes returned."""
    expected = {"status": "succeeded", "output": {"charges": [1, 2, 3, 4, 5]}}
    for output in outputs:
        if output is not None and output != expected:
            outcome.problems.append(f"a resuming worker returned {output}")
    cut = ORDERS.index(CUT)
    for index, order in enumerate(ORDERS):
        mine = [r for r in requests if r["order"] == order]
        keys = {r["key"] for r in mine}
        most = 2 if index == cut else 1
        if not 1 <= len(mine) <= most or len(keys) != 1:
            outcome.problems.append(f"step {order}: {len(mine)} requests with keys {sorted(map(str, keys))}")
        if index < cut and len(mine) != sum(r["order"] == order for r in before):
            outcome.problems.append(f"step {order}, before the cut, ran again")
    outcome.duplicates = len(requests) - len(ORDERS)
    if [e["order"] for e in effects] != list(ORDERS):
        outcome.problems.append(f"effects {[e['order'] for e in effects]}, not one per step")
    sent_before = {r["order"] for r in before}
    if outcome.case.boundary == "before" and CUT in sent_before:
        outcome.problems.append("the cut step's request was sent before the kill")
    if outcome.case.boundary != "before" and CUT not in sent_before:
        outcome.problems.append("the cut step's request was not sent before the kill")


def completed(case: Case, target: str, run_id: str, outcome: Outcome) -> bool:
    """Whether the engine holds one completed run under ``run_id``."""
    if case.engine == "temporal":
        import asyncio

        return asyncio.run(_temporal_completed(target, run_id, outcome))
    from kavalai.durable.dbos import DbosClient

    client = DbosClient(target)
    try:
        status = client.status(run_id)
    finally:
        client.close()
    if status != "SUCCESS":
        outcome.problems.append(f"the DBOS run's status is {status}")
    return status == "SUCCESS"


async def _temporal_completed(address: str, run_id: str, outcome: Outcome) -> bool:
    from temporalio.client import Client, WorkflowExecutionStatus

    client = await Client.connect(address)
    runs = [run async for run in client.list_workflows(f"WorkflowId = '{run_id}'")]
    history = await client.get_workflow_handle(run_id).fetch_history()
    ends = [e for e in history.events if e.HasField("workflow_execution_completed_event_attributes")]
    once = len(runs) == 1 and runs[0].status == WorkflowExecutionStatus.COMPLETED and len(ends) == 1
    if not once:
        outcome.problems.append(f"Temporal holds {len(runs)} runs, {len(ends)} completions")
    return once


def boundary(case: Case) -> str:
    """The boundary column: where the worker was killed, and the definition change made before the resume."""
    return case.boundary if case.change is None else f"{case.boundary}, then a node {case.change}"


def table(outcomes: list[Outcome]) -> str:
    """The matrix as a Markdown table."""
    lines = [
        "| engine | boundary | resuming workers | completed once | duplicate requests | resumers returned | time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"sqlite": "DBOS, SQLite", "postgres": "DBOS, Postgres", "temporal": "Temporal"}
    for o in outcomes:
        done = "yes" if o.completed_once else "NO"
        lines.append(
            f"| {names[o.case.engine]} | {boundary(o.case)} | {o.case.workers} | {done} | {o.duplicates} | "
            f"{o.returned}/{o.case.workers} | {o.seconds:.1f} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------- fault kinds x engines (issue 35)

#: The fault kinds of the step journal and, per engine, the test that makes that fault and counts its effects at a
#: local shop service (a row of the default suite each; ``None``: the engine has no such fault, or it is not built).
FAULT_KINDS: dict[str, dict[str, str | None]] = {
    "database outage mid-step, back in time": {
        "sqlite": "test_journal_io.py::test_an_outage_mid_step_pauses_the_run_which_goes_on_once_the_database_is_back",
        "postgres": "test_journal_io.py::test_postgres_stopped_mid_step_and_started_again_pauses_the_run",
        "temporal": "test_faults.py::test_a_database_outage_mid_step_as_a_matrix_row[temporal-outage-0]",
    },
    "database outage past the run's patience (interrupted, resumed)": {
        "sqlite": "test_journal_io.py::test_an_outage_past_the_runs_patience_interrupts_it_and_the_run_resumes_later",
        "postgres": "test_journal_io.py::test_postgres_down_past_the_patience_interrupts_the_run_then_resumed",
        "temporal": "test_temporal_outage.py::"
        "test_a_temporal_server_away_past_the_runs_patience_interrupts_it_and_the_run_resumes_later",
    },
    "cancel mid-step": {
        "sqlite": "test_cancel.py::test_a_cancel_mid_step_is_the_last_step_and_the_run_stays_cancelled[sqlite]",
        "postgres": "test_cancel.py::test_a_cancel_mid_step_is_the_last_step_and_the_run_stays_cancelled[postgres]",
        "temporal": "test_cancel.py::test_a_cancelled_temporal_run_ends_cancelled_not_completed",
    },
    "cancel cuts the step in flight (recorded cancelled)": {
        "sqlite": "test_cancel.py::test_a_cancel_cuts_the_step_in_flight_which_is_recorded_cancelled[sqlite]",
        "postgres": "test_cancel.py::test_a_cancel_cuts_the_step_in_flight_which_is_recorded_cancelled[postgres]",
        "temporal": "test_cancel.py::test_a_temporal_cancel_cuts_the_activity_in_flight_and_records_its_end",
    },
    "cancel while waiting for an answer": {
        "sqlite": "test_cancel.py::test_a_cancel_reaches_a_run_waiting_for_an_answer[sqlite]",
        "postgres": "test_cancel.py::test_a_cancel_reaches_a_run_waiting_for_an_answer[postgres]",
        "temporal": "test_cancel_wait_temporal.py::test_a_cancel_reaches_a_temporal_run_waiting_for_an_answer",
    },
    "definition changed between crash and resume (added, removed, renamed)": {
        "sqlite": "test_definition.py::test_a_resume_under_a_changed_workflow_is_refused_and_runs_nothing",
        "postgres": "test_faults.py::test_a_worker_killed_and_its_run_resumed_under_a_changed_definition",
        "temporal": "test_definition.py::test_temporal_refuses_to_take_up_a_run_under_a_changed_workflow",
    },
    "a tool that may not repeat found sent (in doubt / replay / idempotent)": {
        "sqlite": "test_doubt.py::test_a_step_sent_without_a_result_is_in_doubt_unless_its_tool_says_replay",
        "postgres": "test_doubt.py::"
        "test_on_postgres_a_step_sent_without_a_result_is_in_doubt_unless_its_tool_says_replay",
        "temporal": "test_doubt_temporal.py::test_a_temporal_step_in_doubt_fails_or_is_replayed_as_its_server_says",
    },
    "a step in doubt of a tool that says ask, resolved done / retry (kavalai runs resolve)": {
        "sqlite": "test_doubt.py::test_a_step_in_doubt_of_a_tool_that_says_ask_waits_for_the_operator",
        "postgres": "test_doubt.py::test_on_postgres_a_step_in_doubt_of_a_tool_that_says_ask_waits_for_the_operator",
        "temporal": "test_doubt_temporal.py::"
        "test_a_temporal_step_in_doubt_of_a_server_that_says_ask_waits_for_kavalai_runs_resolve",
    },
    "two answers racing, 20 rounds": {
        "sqlite": "test_answer_race.py::test_one_answer_wins_on_dbos[sqlite]",
        "postgres": "test_answer_race.py::test_one_answer_wins_on_dbos[postgres]",
        "temporal": "test_answer_race.py::test_one_answer_wins_on_temporal",
    },
    "a worker killed while an answer is delivered (applied once or refused)": {
        "sqlite": "test_dbos_answer_kill.py::"
        "test_a_dbos_worker_killed_while_an_answer_is_delivered_applies_it_once_on_sqlite",
        "postgres": "test_dbos_answer_kill.py::"
        "test_a_dbos_worker_killed_while_an_answer_is_delivered_applies_it_once_on_postgres",
        "temporal": "test_temporal_answer_kill.py::"
        "test_a_worker_killed_while_an_answer_is_delivered_applies_it_once_or_says_it_did_not",
    },
    "no worker takes an answer (its worker killed as the query / update is sent): sent again to the next": {
        "sqlite": None,
        "postgres": None,
        "temporal": "test_temporal_answer_kill.py::"
        "test_an_answer_no_worker_takes_is_delivered_again_to_the_next_worker",
    },
    "cancel racing a step's completion, 20 rounds (cancelled or finished, never both)": {
        "sqlite": "test_dbos_fault_kinds.py::"
        "test_a_cancel_racing_a_steps_completion_on_dbos_ends_the_run_cancelled_or_finished_never_both[sqlite]",
        "postgres": "test_dbos_fault_kinds.py::"
        "test_a_cancel_racing_a_steps_completion_on_dbos_ends_the_run_cancelled_or_finished_never_both[postgres]",
        "temporal": "test_temporal_cancel_race.py::"
        "test_a_cancel_racing_a_steps_completion_ends_the_run_cancelled_or_finished_never_both",
    },
    "the journal's disk full mid-step (the write paused until space is freed)": {
        "sqlite": "test_faults.py::test_a_full_journal_disk_mid_step_as_a_matrix_row[sqlite-full-0]",
        "postgres": "test_faults.py::test_a_full_journal_disk_mid_step_as_a_matrix_row[postgres-full-0]",
        "temporal": "test_faults.py::test_a_full_journal_disk_mid_step_as_a_matrix_row[temporal-full-0]",
    },
    "the journal's disk full past the run's deadline (interrupted, resumable, finished once there is room)": {
        "sqlite": "test_faults.py::test_a_full_journal_disk_past_the_runs_deadline_as_a_matrix_row[sqlite-full-past-1]",
        "postgres": "test_faults.py::"
        "test_a_full_journal_disk_past_the_runs_deadline_as_a_matrix_row[postgres-full-past-1]",
        "temporal": None,
    },
    "the engine's server restarted twice within one step": {
        "sqlite": "test_dbos_fault_kinds.py::"
        "test_the_sqlite_journal_away_twice_within_one_step_loses_nothing_and_charges_once",
        "postgres": "test_dbos_fault_kinds.py::"
        "test_postgres_restarted_twice_within_one_step_loses_nothing_and_charges_once",
        "temporal": "test_temporal_outage.py::"
        "test_a_temporal_server_restarted_twice_within_one_step_loses_nothing_and_charges_once",
    },
    "a worker sent SIGTERM (not SIGKILL) mid-step, resumed": {
        "sqlite": "test_faults.py::test_a_worker_sent_sigterm_mid_step_and_its_run_resumed[sqlite-term-1]",
        "postgres": "test_faults.py::test_a_worker_sent_sigterm_mid_step_and_its_run_resumed[postgres-term-1]",
        "temporal": "test_faults.py::test_a_worker_sent_sigterm_mid_step_and_its_run_resumed[temporal-term-1]",
    },
    "a finished run's id given to another workflow (refused, nothing charged)": {
        "sqlite": "test_definition.py::test_a_finished_run_is_not_read_back_under_another_workflow[sqlite]",
        "postgres": "test_definition.py::test_a_finished_run_is_not_read_back_under_another_workflow[postgres]",
        "temporal": "test_definition.py::test_a_finished_temporal_run_is_not_read_back_under_another_workflow",
    },
    "a tool whose result fails its output model after its effect (failed, never sent again)": {
        "sqlite": "test_output_model.py::"
        "test_a_result_failing_its_output_model_is_a_failed_step_never_sent_again[sqlite]",
        "postgres": "test_output_model.py::"
        "test_a_result_failing_its_output_model_is_a_failed_step_never_sent_again[postgres]",
        "temporal": "test_output_model.py::"
        "test_on_temporal_a_result_failing_its_output_model_is_a_failed_step_never_sent_again",
    },
    "the journal read-only after a failover, mid-step (interrupted, resumed)": {
        "sqlite": None,
        "postgres": "test_journal_io_postgres.py::test_postgres_turned_read_only_mid_step",
        "temporal": None,
    },
    "the journal's sessions terminated by an operator, mid-step": {
        "sqlite": None,
        "postgres": "test_journal_io_postgres.py::test_the_runners_sessions_terminated_mid_step",
        "temporal": None,
    },
    "the step table locked by an operator past the run's patience (interrupted, resumed)": {
        "sqlite": None,
        "postgres": "test_journal_io_postgres.py::test_the_step_table_locked_by_an_operator_mid_step",
        "temporal": None,
    },
    "the journal's password rotated mid-step (paused until put back)": {
        "sqlite": None,
        "postgres": "test_journal_password.py::test_a_password_rotated_mid_step_pauses_the_run_until_it_is_put_back",
        "temporal": None,
    },
    "the journal's password rotated past the run's patience (interrupted, resumed)": {
        "sqlite": None,
        "postgres": "test_journal_password.py::"
        "test_a_password_rotated_past_the_runs_patience_interrupts_it_and_it_resumes",
        "temporal": None,
    },
    "a keyed step found sent after its server moved (URL changed): in doubt naming both origins": {
        "sqlite": "test_origin.py::test_a_keyed_step_found_sent_is_in_doubt_when_its_server_moved",
        "postgres": "test_origin.py::test_on_postgres_a_keyed_step_found_sent_is_in_doubt_when_its_server_moved",
        "temporal": "test_origin.py::test_a_temporal_step_retried_after_its_server_moved_is_in_doubt",
    },
    "resumed without the step's tool: refused, resumable, finished with it (workflow / agent)": {
        "sqlite": "test_missing_tool.py::test_an_agent_resumed_without_a_steps_tool_is_refused_and_finishes_with_it",
        "postgres": "test_missing_tool.py::"
        "test_on_postgres_an_agent_resumed_without_a_steps_tool_is_refused_and_finishes_with_it",
        "temporal": "test_missing_tool.py::"
        "test_a_temporal_worker_without_a_steps_tool_is_refused_and_the_run_finishes_with_it",
    },
    "a value no column takes as it is (a NUL, a lone surrogate) in a step's arguments and result": {
        "sqlite": "test_journal_values.py::"
        "test_a_value_no_column_takes_as_it_is_is_journaled_and_read_back[sqlite-surrogate]",
        "postgres": "test_journal_values.py::"
        "test_a_value_no_column_takes_as_it_is_is_journaled_and_read_back[postgres-surrogate]",
        "temporal": "test_journal_values.py::test_on_temporal_a_value_no_column_takes_as_it_is_is_read_back[surrogate]",
    },
    "the step table dropped by an operator mid-step (interrupted, never the tool's error)": {
        "sqlite": "test_operator_faults.py::"
        "test_the_step_table_dropped_mid_step_interrupts_the_run_never_the_tools_error[sqlite]",
        "postgres": "test_operator_faults.py::"
        "test_the_step_table_dropped_mid_step_interrupts_the_run_never_the_tools_error[postgres]",
        "temporal": None,
    },
    "a node removed while its step is in doubt (refused naming it; then in doubt, once)": {
        "sqlite": "test_operator_faults.py::"
        "test_a_node_removed_while_its_step_is_in_doubt_is_refused_naming_it[sqlite]",
        "postgres": "test_operator_faults.py::"
        "test_a_node_removed_while_its_step_is_in_doubt_is_refused_naming_it[postgres]",
        "temporal": None,
    },
    "a run cancelled while interrupted (no process runs it): never revived": {
        "sqlite": "test_operator_faults.py::test_a_run_cancelled_while_interrupted_is_never_revived[sqlite]",
        "postgres": "test_operator_faults.py::test_a_run_cancelled_while_interrupted_is_never_revived[postgres]",
        "temporal": None,
    },
    "two `kavalai run --run-id` of one new run at once on the default journal (one run, each payment once)": {
        "sqlite": "test_cli_faults.py::test_two_runs_of_one_new_run_id_at_once_are_one_run",
        "postgres": None,
        "temporal": None,
    },
    "the workflow file moved with its journal between a crash and the resume": {
        "sqlite": "test_cli_faults.py::test_a_workflow_moved_with_its_journal_resumes_there",
        "postgres": None,
        "temporal": None,
    },
    "a worker frozen (SIGSTOP) past its lease mid-step, another finishes the run, then SIGCONT (two owners)": {
        "sqlite": "test_frozen_worker.py::test_a_worker_frozen_past_its_lease_while_another_finishes_its_run[sqlite]",
        "postgres": "test_frozen_worker.py::"
        "test_a_worker_frozen_past_its_lease_while_another_finishes_its_run[postgres]",
        "temporal": None,
    },
    "`kavalai runs cancel` racing `kavalai runs resolve --retry` on a step in doubt (cancelled or finished)": {
        "sqlite": "test_cancel_resolve_race.py::test_a_cancel_racing_a_retry_of_a_step_in_doubt",
        "postgres": None,
        "temporal": None,
    },
    # Round 8's faults 7-12 (FAULTS_round8.md), one row each.
    "two `kavalai runs resolve` of one step in doubt racing, --done vs --retry, 10 rounds (one wins)": {
        "sqlite": "test_doubt.py::test_two_resolves_of_one_step_in_doubt_racing_ten_rounds",
        "postgres": None,
        "temporal": "test_doubt_temporal.py::test_two_resolves_of_one_temporal_step_in_doubt_racing_ten_rounds",
    },
    "`kavalai runs resolve` of a step that is done or that the run lacks (refused, the record unchanged)": {
        "sqlite": "test_doubt.py::test_a_step_in_doubt_of_a_tool_that_says_ask_waits_for_the_operator[done]",
        "postgres": "test_doubt.py::"
        "test_on_postgres_a_step_in_doubt_of_a_tool_that_says_ask_waits_for_the_operator[done]",
        "temporal": None,
    },
    "a run resumed by another kavalai release (not a change of definition)": {
        "sqlite": "test_round8_resumes.py::test_a_run_resumed_by_another_kavalai_release_on_dbos",
        "postgres": None,
        "temporal": "test_round8_resumes.py::test_a_run_resumed_by_another_kavalai_release_on_temporal",
    },
    "DBOS's own step table dropped while a run is interrupted (the step log finishes it)": {
        "sqlite": "test_round8_resumes.py::test_dboss_own_step_table_dropped_while_a_run_is_interrupted[sqlite]",
        "postgres": "test_round8_resumes.py::test_dboss_own_step_table_dropped_while_a_run_is_interrupted[postgres]",
        "temporal": None,
    },
    "a journal of an older kavalai (schema version 0): migrated, the run resumed": {
        "sqlite": "test_round8_resumes.py::test_a_journal_of_an_older_kavalai_at_schema_version_0[sqlite]",
        "postgres": "test_round8_resumes.py::test_a_journal_of_an_older_kavalai_at_schema_version_0[postgres]",
        "temporal": None,
    },
    "hostile run ids (5,000 characters, NUL, newline, a quote and semicolon): refused by rule or read back": {
        "sqlite": "test_run_ids.py::"
        "test_every_runner_refuses_the_same_run_ids_with_the_rule_before_its_engine_sees_them[dbos-sqlite]",
        "postgres": "test_run_ids.py::"
        "test_every_runner_refuses_the_same_run_ids_with_the_rule_before_its_engine_sees_them[dbos-postgres]",
        "temporal": "test_run_ids.py::"
        "test_every_runner_refuses_the_same_run_ids_with_the_rule_before_its_engine_sees_them[temporal]",
    },
    "a step's journal row edited by hand to text that is not JSON (refused naming the step, resumable)": {
        "sqlite": "test_round10_edits.py::"
        "test_a_step_row_edited_to_text_that_is_not_json_is_refused_naming_the_step[sqlite]",
        "postgres": "test_round10_edits.py::"
        "test_a_step_row_edited_to_text_that_is_not_json_is_refused_naming_the_step[postgres]",
        "temporal": None,
    },
    "an answer claimed whose message to the run failed (the next answer delivers the kept one)": {
        "sqlite": "test_round10_answers.py::test_an_answer_whose_message_failed_after_its_claim_still_reaches_the_run",
        "postgres": None,
        "temporal": None,
    },
    "a run still going on another task queue (its workers moved): refused naming the queue, nothing sent": {
        "sqlite": None,
        "postgres": None,
        "temporal": "test_round10_temporal.py::test_a_run_going_on_another_task_queue_is_refused_naming_it",
    },
    "a run terminated by an operator mid-step (an end named so, never run again)": {
        "sqlite": None,
        "postgres": None,
        "temporal": "test_round10_temporal.py::test_a_run_terminated_mid_step_is_an_end_named_so_and_never_run_again",
    },
}


def kinds_table(outcomes: dict[str, str]) -> str:
    """The fault kinds x engines as a Markdown table, from each test's outcome (``passed``, ``failed``, ...) by its
    node id (``test_file.py::name``, or ``name[param]``; the cases of a test named without one summed)."""
    lines = ["| fault kind | DBOS, SQLite | DBOS, Postgres | Temporal |", "|---|---|---|---|"]
    for kind, cells in FAULT_KINDS.items():
        shown = []
        for engine in ENGINES:
            test = cells[engine]
            shown.append("not built" if test is None else outcomes.get(test, "not run"))
        lines.append(f"| {kind} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- database outage rows (issue 35)

#: The boundary of the outage rows: the engine's database goes away while the cut step's call is in flight (after the
#: shop made the charge, before it answered) and comes back; the worker is not killed.
OUTAGE = "outage"
#: The boundary of the full-disk rows: the journal's disk is full (it cannot grow) while the cut step's call is in
#: flight, and has room again once the worker failed to record the step (``full_disk.py``).
FULL = "full"
#: SQLite's busy timeout in the outage rows: the lock is held past it.
BUSY_TIMEOUT = 0.2


def outage_cases() -> list[Case]:
    """The database outage rows: DBOS on SQLite (the journal held locked by another process past its busy timeout),
    DBOS on Postgres (``pg_ctl stop -m immediate``, then started) and Temporal (a dev server keeping its state in a
    file, killed and started again)."""
    return [Case(engine, OUTAGE, 0) for engine in ENGINES]


def full_past_cases() -> list[Case]:
    """The rows of a full disk past the run's deadline (``full_disk.run_full_past``): the DBOS engines, whose run
    has a patience of its own (``journal_outage``) for its journal's writes."""
    return [Case(engine, FULL_PAST, 1) for engine in ("sqlite", "postgres")]


def full_cases() -> list[Case]:
    """The full-disk rows: the journal of each engine cannot grow mid-step, then has room again (``full_disk.py``)."""
    return [Case(engine, FULL, 0) for engine in ENGINES]


def run_outage(case: Case, servers: Engines, directory: Path, *, timeout: float = 180.0) -> Outcome:
    """Run one outage or full-disk row: the worker runs the five charges; at charge C the database goes away (or
    its disk is full), and comes back once the worker has failed to record the step (its log says it tries again;
    on Temporal, once the server is dead). The run must complete, in that worker, with each effect once."""
    directory.mkdir(parents=True, exist_ok=True)
    workflow = directory / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    run_id = f"{case.label}-{uuid.uuid4().hex[:8]}"
    outcome = Outcome(case)
    running: list[Any] = []  # the worker, whose own file size a full SQLite disk limits
    with ExitStack() as stack:
        outage = stack.enter_context(_outage(case, servers, directory, lambda: running[0]))
        rest = stack.enter_context(serve(create_app(on_charge=outage.begin_at(CUT))))
        first = start(case, outage.target, workflow, run_id, "first", rest, "--busy-timeout", str(BUSY_TIMEOUT))
        running.append(first)
        began = time.monotonic()
        outage.end_after_retries(directory / "first.log", first)
        outputs = [finish(first, timeout, outcome)]
        outcome.seconds = time.monotonic() - began
        requests, effects = fetch(f"{rest}/requests"), fetch(f"{rest}/effects")
        outcome.logs = "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(directory.glob("*.log"))
        )
        outcome.killed = outage.happened
        if not outage.happened:
            outcome.problems.append("the database did not go away during the cut step")
        if case.boundary == FULL and outage.failed < 2:
            outcome.problems.append(f"the full disk refused {outage.failed} writes of the step, not 2 or more")
        check(outcome, outputs, requests, requests, effects)
        outcome.completed_once = outcome.ok and completed(case, outage.target, run_id, outcome)
    return outcome


class _Outage:
    """Takes an engine's database away (from the shop's thread, mid-charge) and brings it back."""

    def __init__(self, target: str, stop: Any, restart: Any, *, logged: bool, failures: Any = None) -> None:
        self.target, self._stop, self._restart, self._logged = target, stop, restart, logged
        self._failures = failures  # failures(worker's log): the writes the fault refused so far (a full disk)
        self.failed = 0
        self.happened = False
        self._begun = threading.Event()

    def begin_at(self, order: str) -> Any:
        def on_charge(charged: str) -> None:
            if charged == order and not self.happened:
                self.happened = True
                self._stop()
                self._begun.set()

        return on_charge

    def end_after_retries(self, log: Path, process: Any, *, tries: int = 2) -> None:
        """Bring the database back once the worker tried (and failed) ``tries`` times to record the step (its log
        says "trying again"; bounded wait), or once it is gone (Temporal: the worker's own retries are quiet)."""
        for _ in range(3000):  # bounded: 300 s
            if process.poll() is not None:
                break
            if self._begun.is_set() and self._failures is not None:
                self.failed = self._failures(log)
                if self.failed >= tries:
                    break
            elif self._begun.is_set() and (
                not self._logged or log.read_text(errors="replace").count("trying again") >= tries
            ):
                break
            time.sleep(0.1)
        if self._begun.is_set():
            self._restart()


@contextmanager
def _outage(case: Case, servers: Engines, directory: Path, worker: Any) -> Iterator[_Outage]:
    """The database of ``case``'s engine, and how to take it away and back: a SQLite journal locked by another
    process, a Postgres server of its own, a Temporal dev server of its own with a database file; or, in a full-disk
    row, how to fill its disk and free it (``full_disk.py``; ``worker()``: the DBOS worker's process)."""
    if case.boundary == FULL:
        from tests.durable.full_disk import full_disk

        with full_disk(case.engine, directory, worker=worker) as disk:
            yield _Outage(disk.target, disk.fill, disk.free, logged=True, failures=disk.failures)
    elif case.engine == "sqlite":
        from tests.durable.test_journal_io import Locker

        locker = Locker(directory / "journal.sqlite")
        try:
            yield _Outage(f"sqlite:///{locker.path}", locker.lock, locker.release, logged=True)
        finally:
            locker.release()
    elif case.engine == "postgres":
        from tests.servers.postgres_server import postgres_server

        with postgres_server() as server:
            url = new_database(server.url, "outage")
            yield _Outage(url, lambda: server.stop(immediate=True), server.start, logged=True)
            if server.process is None or server.process.poll() is not None:
                server.start()
    else:
        from tests.servers.temporal_server import temporal_server_with_db

        with temporal_server_with_db(directory / "temporal.db") as server:
            yield _Outage(server.address, server.kill, server.start, logged=False)
