"""Benchmark: a workflow run of ten function nodes against the ten direct ``call_tool`` calls it makes.

Run: ``.venv/bin/python bench/workflow.py [--rounds N]``. The workflow is ``start -> n0 -> ... -> n9 -> end``, each
function node calling ``python://cat.add`` (an async tool) on the previous node's result, as nodes pass data on in
real workflows; the direct side awaits ``kernel.call_tool`` ten times with the same arguments. Rounds alternate the
two sides; the medians of the per-round figures are printed, and their ratio (#36's bound: 2.5x).

``--instructions runs|calls N`` does only one side's work N times after a warm-up, for an instruction count under
``valgrind --tool=callgrind`` (load-independent): the count of N minus the count of 0, divided by N, is one run's
(or one set of ten calls') cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from kavalai import FunctionKernel
from kavalai.workflow import WorkflowEngine
from scale import add, chain  # bench/, the script's own folder: the chain of function nodes bench/scale.py times

NODES = 10
RUNS_PER_ROUND = 100


async def runs(engine: WorkflowEngine, count: int) -> None:
    for _ in range(count):
        result = await engine.run({})
        if not result.ok:
            raise RuntimeError(result.error)


async def calls(kernel: FunctionKernel, count: int) -> None:
    for _ in range(count):
        a = 1
        for _ in range(NODES):
            a = (await kernel.call_tool("python://cat.add", {"a": a, "b": 2})).result


def setup(nodes: int = NODES) -> tuple[FunctionKernel, WorkflowEngine]:
    kernel = FunctionKernel()
    kernel.register_python_tool("cat.add", add)
    return kernel, WorkflowEngine.from_yaml(chain(nodes), kernel=kernel)


async def timed(rounds: int) -> None:
    kernel, engine = setup()
    await runs(engine, 50)  # warm: the tool's models, lazy imports
    await calls(kernel, 50)
    run_us, call_us = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        await calls(kernel, RUNS_PER_ROUND)
        middle = time.perf_counter()
        await runs(engine, RUNS_PER_ROUND)
        end = time.perf_counter()
        call_us.append((middle - start) / RUNS_PER_ROUND * 1e6)
        run_us.append((end - middle) / RUNS_PER_ROUND * 1e6)
    run, direct = statistics.median(run_us), statistics.median(call_us)
    print(f"a {NODES}-node run of function nodes  {run:9.1f} µs")
    print(f"{NODES} direct call_tool calls          {direct:9.1f} µs")
    print(f"ratio {run / direct:.2f}x (#36's bound: 2.5x)")


async def counted(side: str, count: int, nodes: int) -> None:
    kernel, engine = setup(nodes)
    await runs(engine, 50)
    await calls(kernel, 50)
    if side == "runs":
        await runs(engine, count)
    else:
        await calls(kernel, count)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=30, help="alternating rounds (default 30)")
    parser.add_argument("--instructions", nargs=2, metavar=("SIDE", "N"), help="runs|calls and how many, only")
    parser.add_argument("--nodes", type=int, default=NODES, help="function nodes of a counted run (default 10)")
    arguments = parser.parse_args()
    if arguments.instructions:
        asyncio.run(counted(arguments.instructions[0], int(arguments.instructions[1]), arguments.nodes))
    else:
        asyncio.run(timed(arguments.rounds))
