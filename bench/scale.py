"""Benchmark: costs at scale — registering many Python tools, their first listing, call cost against catalog size,
and the workflow engine's cost per node — with pydantic-ai (``pydantic-ai-slim``, a dev dependency) measured in the
same run where it does the same job.

Run: ``.venv/bin/python bench/scale.py [--tools N]``. Each tool is a distinct function ``(a: int, b: int) -> int``
with its own docstring, as in a catalog built from many sources.

- registration: kavalai ``FunctionKernel.register_python_tool`` against pydantic-ai ``FunctionToolset([Tool(f)...])``;
  time and peak traced memory. pydantic-ai builds each tool's argument validator and its parameters and return JSON
  schemas here; kavalai works out the input and output JSON schemas here and builds the models (the validators) at
  a tool's first call, so that cost is printed too (not compared: pydantic-ai has none left to pay);
- first listing: ``kernel.describe_tools()`` (every tool's input and output JSON schema) against collecting the
  ``tool_def`` of every pydantic-ai tool (its parameters and return schemas); and registering plus listing
  together, since each library may do the schema work in either step. ``get_tool_descriptions()`` returns the same
  list as JSON text too (Kaval.AI 1.0's form), which pydantic-ai has no counterpart of: its time is printed, not
  compared;
- call cost: ``call_tool`` on a kernel of 10 tools and of N tools, interleaved;
- per node: a workflow ``start -> function -> end`` run, per function node, against a direct ``call_tool`` of its
  (sync) tool; and, since a thread hop hides most of the engine's own cost, what one more function node adds to a
  run of an async tool, against a direct ``call_tool`` of that tool.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from kavalai import FunctionKernel, pythontool
from kavalai.workflow import WorkflowEngine


def make_functions(count: int) -> list[Callable[..., int]]:
    functions = []
    for i in range(count):

        def tool(a: int, b: int) -> int:
            return a + b

        tool.__name__ = f"tool_{i}"
        tool.__qualname__ = f"tool_{i}"
        tool.__doc__ = f"Tool number {i}: add two integers."
        functions.append(tool)
    return functions


def register_kavalai(functions: list[Callable[..., int]]) -> FunctionKernel:
    kernel = FunctionKernel()
    for function in functions:
        kernel.register_python_tool(f"cat.{function.__name__}", pythontool(function))
    return kernel


def register_pydantic_ai(functions: list[Callable[..., int]]) -> Any:
    from pydantic_ai import Tool  # imported by main() before anything is timed
    from pydantic_ai.toolsets import FunctionToolset

    return FunctionToolset([Tool(function) for function in functions])


def list_pydantic_ai(toolset: Any) -> list[Any]:
    return [tool.tool_def for tool in toolset.tools.values()]


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def traced_peak(work: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    kept = work()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del kept
    return peak / 1e6


def line(label: str, ours: float, theirs: float, unit: str, target: float) -> str:
    ratio = ours / theirs
    verdict = "ok" if ratio <= target else "OVER TARGET"
    return f"  {label:<44} {ours:10.3f} {unit} {theirs:10.3f} {unit}   {ratio:5.2f}x (target <= {target}x: {verdict})"


async def call_cost(kernel: FunctionKernel, uri: str, calls: int) -> float:
    arguments = {"a": 1, "b": 2}
    start = time.perf_counter()
    for _ in range(calls):
        await kernel.call_tool(uri, arguments)
    return (time.perf_counter() - start) / calls * 1e6


WORKFLOW = """
name: one-node
input: object
output: object
nodes:
  - {id: start, kind: start, next: add}
  - {id: add, kind: function, tool: "python://cat.tool_0", inputs: {a: 1, b: 2}, next: end}
  - {id: end, kind: end, outputs: {sum: add.result}}
"""


async def node_cost(kernel: FunctionKernel, runs: int) -> tuple[float, float]:
    engine = WorkflowEngine.from_yaml(WORKFLOW, kernel=kernel)
    async with engine:
        direct, per_node = [], []
        for _ in range(runs // 100):
            direct.append(await call_cost(kernel, "python://cat.tool_0", 100))
            start = time.perf_counter()
            for _ in range(100):
                await engine.run({})
            per_node.append((time.perf_counter() - start) / 100 * 1e6)
    return statistics.median(per_node), statistics.median(direct)


def chain(length: int) -> str:
    """A workflow of ``length`` function nodes in a row, each calling ``python://cat.add`` (an async tool) on the
    previous node's result, as nodes pass data on in real workflows."""
    nodes = ["  - {id: start, kind: start, next: n0}"]
    for i in range(length):
        after = f"n{i + 1}" if i < length - 1 else "end"
        a = f"n{i - 1}.result" if i else "1"
        nodes.append(
            f'  - {{id: n{i}, kind: function, tool: "python://cat.add", inputs: {{a: {a}, b: 2}}, next: {after}}}'
        )
    nodes.append(f"  - {{id: end, kind: end, outputs: {{sum: n{length - 1}.result}}}}")
    return "name: chain\ninput: object\noutput: object\nnodes:\n" + "\n".join(nodes) + "\n"


@pythontool
async def add(a: int, b: int) -> int:
    return a + b


async def marginal_node_cost(rounds: int) -> tuple[float, float]:
    """Microseconds a further function node adds to a run (runs of 11 and of 1 function nodes, so the start and end
    nodes and the run's own set-up cancel out), and a direct ``call_tool`` of the same async tool."""
    kernel = FunctionKernel()
    kernel.register_python_tool("cat.add", add)
    one, eleven = WorkflowEngine.from_yaml(chain(1), kernel=kernel), WorkflowEngine.from_yaml(chain(11), kernel=kernel)
    direct, added = [], []
    for _ in range(rounds):
        direct.append(await call_cost(kernel, "python://cat.add", 200))
        start = time.perf_counter()
        for _ in range(50):
            await one.run({})
        middle = time.perf_counter()
        for _ in range(50):
            await eleven.run({})
        added.append(((time.perf_counter() - middle) - (middle - start)) / 50 / 10 * 1e6)
    return statistics.median(added), statistics.median(direct)


async def first_calls(functions: list[Callable[..., int]]) -> tuple[float, float]:
    """Microseconds of the first call of each tool (which builds its models) and of a second call."""
    kernel = register_kavalai(functions)
    uris = [f"python://cat.{function.__name__}" for function in functions]
    arguments = {"a": 1, "b": 2}
    gc.collect()
    start = time.perf_counter()
    for uri in uris:
        await kernel.call_tool(uri, arguments)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for uri in uris:
        await kernel.call_tool(uri, arguments)
    return first / len(uris) * 1e6, (time.perf_counter() - start) / len(uris) * 1e6


async def main(count: int) -> None:
    import pydantic_ai  # noqa: F401 - imported before any timing, as kavalai is

    functions = make_functions(count)
    warm_up = make_functions(20)  # one-time costs (lazy imports, caches of either library) out of the figures
    register_kavalai(warm_up)
    list_pydantic_ai(register_pydantic_ai(warm_up))
    print(f"{count:,} Python tools; kavalai vs pydantic-ai {_pydantic_ai_version()} in the same run")
    print(f"  {'':<44} {'kavalai':>13} {'pydantic-ai':>13}")
    ours_time, kernel = timed(lambda: register_kavalai(functions))
    theirs_time, toolset = timed(lambda: register_pydantic_ai(functions))
    print(line("register every tool", ours_time, theirs_time, "s", 1.0))
    small = functions[: max(1, count // 10)]
    ours_mem = traced_peak(lambda: register_kavalai(small))
    theirs_mem = traced_peak(lambda: register_pydantic_ai(small))
    print(line(f"peak memory registering {len(small):,} tools", ours_mem, theirs_mem, "MB", 1.0))
    gc.collect()
    start = time.perf_counter()
    described = await kernel.describe_tools()
    ours_list = time.perf_counter() - start
    theirs_list, defs = timed(lambda: list_pydantic_ai(toolset))
    assert len(described) == len(defs) == count
    print(line("first listing of every tool's schemas", ours_list, theirs_list, "s", 1.0))
    ours_both, theirs_both = ours_time + ours_list, theirs_time + theirs_list
    print(line("register, then list every tool", ours_both, theirs_both, "s", 1.0))
    fresh = register_kavalai(functions)
    gc.collect()
    start = time.perf_counter()
    text = await fresh.get_tool_descriptions()
    as_text = time.perf_counter() - start
    print(f"  first get_tool_descriptions() (the list and its {len(text) / 1e6:.1f} MB of JSON text) {as_text:.3f} s")
    first, later = await first_calls(small)
    print(f"  first call_tool of each of {len(small):,} tools (builds its models) {first:8.1f} µs; then {later:.1f} µs")

    few = register_kavalai(functions[:10])
    samples_few, samples_many = [], []
    for _ in range(10):
        samples_few.append(await call_cost(few, "python://cat.tool_0", 2000))
        samples_many.append(await call_cost(kernel, f"python://cat.tool_{count - 1}", 2000))
    few_cost, many_cost = statistics.median(samples_few), statistics.median(samples_many)
    print(line(f"call_tool with {count:,} tools vs with 10", many_cost, few_cost, "µs", 1.10))
    node, direct = await node_cost(few, 2000)
    print(line("workflow run per function node vs call_tool", node, direct, "µs", 3.0))
    node, direct = await marginal_node_cost(40)
    print(line("a further function node (async tool) vs call_tool", node, direct, "µs", 3.0))


def _pydantic_ai_version() -> str:
    from importlib.metadata import version

    return version("pydantic-ai-slim")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tools", type=int, default=10_000, help="how many tools (default 10,000)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.tools))
