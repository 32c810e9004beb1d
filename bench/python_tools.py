"""Benchmark: python:// tools through the kernel against floors measured in the same run.

Run: ``.venv/bin/python bench/python_tools.py [--calls N]``. For each case, after a warm-up, the calls run in
batches of 1,000; the figure printed is the median time per call over the batches (microseconds).

Floors:
- a direct call of ``add(a, b)``;
- the pydantic floor: validate the args dict with a prebuilt model, call, validate the return with a prebuilt
  ``TypeAdapter`` — the least any typed tool layer must do;
- a bare ``anyio.to_thread.run_sync`` hop, the least a sync tool run off the event loop costs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio.to_thread
from pydantic import BaseModel, TypeAdapter

from kavalai import FunctionKernel, pythontool

BATCH = 1_000


def add(a: int, b: int) -> int:
    return a + b


@pythontool
async def add_async(a: int, b: int) -> int:
    return a + b


@pythontool
def add_sync(a: int, b: int) -> int:
    return a + b


@pythontool(inline=True)
def add_inline(a: int, b: int) -> int:
    return a + b


class AddArgs(BaseModel):
    a: int
    b: int


ARGS = {"a": 1, "b": 2}


async def measure(body: Callable[[], Awaitable[object]], calls: int) -> float:
    """Median microseconds per call over batches of BATCH calls, after one warm-up batch."""
    for _ in range(BATCH):
        await body()
    per_call: list[float] = []
    for _ in range(max(1, calls // BATCH)):
        start = time.perf_counter()
        for _ in range(BATCH):
            await body()
        per_call.append((time.perf_counter() - start) / BATCH * 1e6)
    return statistics.median(per_call)


def measure_sync(body: Callable[[], object], calls: int) -> float:
    """Like :func:`measure`, for a plain function call."""
    for _ in range(BATCH):
        body()
    per_call: list[float] = []
    for _ in range(max(1, calls // BATCH)):
        start = time.perf_counter()
        for _ in range(BATCH):
            body()
        per_call.append((time.perf_counter() - start) / BATCH * 1e6)
    return statistics.median(per_call)


async def main(calls: int) -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("add_async", add_async)
    kernel.register_python_tool("add_sync", add_sync)
    kernel.register_python_tool("add_inline", add_inline)
    returns = TypeAdapter(int)

    def floor() -> int:
        args = AddArgs.model_validate(ARGS)
        return returns.validate_python(add(args.a, args.b))

    direct = measure_sync(lambda: add(1, 2), calls)
    pydantic_floor = measure_sync(floor, calls)
    kernel_async = await measure(lambda: kernel.call_tool("python://add_async", ARGS), calls)
    kernel_inline = await measure(lambda: kernel.call_tool("python://add_inline", ARGS), calls)
    hop = await measure(lambda: anyio.to_thread.run_sync(functools.partial(add, 1, 2)), calls)
    kernel_sync = await measure(lambda: kernel.call_tool("python://add_sync", ARGS), calls)
    await kernel.close()

    print(f"python:// tools, {calls:,} calls per case, median of {BATCH:,}-call batches (µs per call)")
    rows = [
        ("direct call add(a, b)", direct, None),
        ("pydantic floor (validate args, call, validate return)", pydantic_floor, None),
        ("kernel.call_tool, async tool", kernel_async, ("pydantic floor", pydantic_floor, 3.0)),
        ("kernel.call_tool, inline sync tool", kernel_inline, ("pydantic floor", pydantic_floor, 3.0)),
        ("bare anyio.to_thread.run_sync hop", hop, None),
        ("kernel.call_tool, sync tool (worker thread)", kernel_sync, ("thread hop", hop, 1.3)),
    ]
    for label, value, against in rows:
        line = f"  {label:<56} {value:9.2f} µs"
        if against is not None:
            name, base, target = against
            ratio = value / base
            verdict = "ok" if ratio <= target else "OVER TARGET"
            line += f"   {ratio:5.2f}x {name} (target <= {target}x: {verdict})"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=100_000, help="calls per case (default 100,000)")
    asyncio.run(main(parser.parse_args().calls))
