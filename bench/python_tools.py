"""Benchmark: python:// tools through the kernel against floors measured in the same run.

Run: ``.venv/bin/python bench/python_tools.py [--calls N]``. For each case, after a warm-up batch, the calls run in
batches of 1,000, the cases taking turns batch by batch (so that on a shared machine a floor and what is compared
with it see the same load); the figure printed is the median time per call over the batches (microseconds).

Floors:
- a direct call of ``add(a, b)``;
- the pydantic floor: validate the args dict with a prebuilt model, call, validate the return with a prebuilt
  ``TypeAdapter`` — the least any typed tool layer must do; and its async form (validate, await the async tool,
  validate), the floor of an async ``python://`` call;
- pydantic-ai (``pydantic-ai-slim``, a dev dependency) on the same async tool: its ``FunctionToolset.call_tool``
  (no validation of its own: its tool manager validates) and its ``ToolManager.handle_call`` (validate, call, the
  retries' bookkeeping), the path its agents take;
- bare ``anyio.to_thread.run_sync`` and ``asyncio.to_thread`` hops: what running a function off the event loop costs
  with either library (a sync tool, validation and all, should cost no more than the bare ``asyncio.to_thread``);
- the call path before the middleware pipeline (look up, validate, invoke, coerce: what ``call_tool`` did before
  the call context, the in-flight tracking and the chain were added), built from the kernel's own public pieces, so
  the pipeline's own cost shows; and a kernel with one no-op middleware, to show what a middleware adds.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, TypeAdapter

from kavalai import FunctionKernel, FunctionKernelException, ToolExecutionError, pythontool
from kavalai.kernel import CallNext, ToolCall, ToolURI, coerce_output, validate_input

BATCH = 1_000


def add(a: int, b: int) -> int:
    return a + b


@pythontool
async def add_async(a: int, b: int) -> int:
    return a + b


async def add_raw(a: int, b: int) -> int:
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


Case = tuple[Callable[[], Any], bool]  # (body, whether it returns an awaitable)


async def measure(cases: dict[str, Case], calls: int) -> dict[str, float]:
    """Median microseconds per call of each case, over batches of BATCH calls, after one warm-up batch each.

    The cases take turns batch by batch, so a floor and the case compared with it see the same load on a shared
    machine.
    """
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(1 + max(1, calls // BATCH)):
        for name, (body, is_async) in cases.items():
            start = time.perf_counter()
            if is_async:
                for _ in range(BATCH):
                    await body()
            else:
                for _ in range(BATCH):
                    body()
            if round_:  # round 0 is the warm-up
                samples[name].append((time.perf_counter() - start) / BATCH * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


async def noop(call: ToolCall, call_next: CallNext) -> Any:
    return await call_next(call)


class _PriorUnset:
    """The 0.1.0 kernel's marker for "no timeout given"."""


_PRIOR_UNSET = _PriorUnset()


class PriorKernel(FunctionKernel):
    """A kernel that also has ``call_tool`` as it was before the pipeline (0.1.0): the baseline of the pipeline's
    cost. The method below is that release's body, line for line, for tools without a timeout (the benchmark's)."""

    async def prior_call_tool(
        self,
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        timeout: float | _PriorUnset | None = _PRIOR_UNSET,
    ) -> BaseModel:
        definition = self._tools.get(uri) if isinstance(uri, str) else None
        if definition is None:
            definition = await self.resolve_tool(uri)
        args = validate_input(definition, arguments)
        limit = definition.timeout if isinstance(timeout, _PriorUnset) else timeout
        try:
            if limit is None:
                raw = await definition.invoke(args)
            else:
                raise NotImplementedError("the benchmark's tools have no timeout")
        except FunctionKernelException:
            raise
        except Exception as exc:
            raise ToolExecutionError(
                f"Tool {definition.name} failed: {type(exc).__name__}: {exc}", uri=definition.name
            ) from exc
        return coerce_output(definition, raw)


async def pydantic_ai_calls() -> tuple[Callable[[], Any], Callable[[], Any]]:
    """pydantic-ai's two ways of calling the same async tool, set up once (a run context with its test model)."""
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    toolset = FunctionToolset([Tool(add_raw)])
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    tool = (await toolset.get_tools(ctx))["add_raw"]
    manager = await ToolManager(toolset).for_run_step(ctx)
    part = ToolCallPart(tool_name="add_raw", args=ARGS)
    return (lambda: toolset.call_tool("add_raw", ARGS, ctx, tool)), (lambda: manager.handle_call(part))


async def main(calls: int) -> None:
    kernel = PriorKernel()
    kernel.register_python_tool("add_async", add_async)
    kernel.register_python_tool("add_sync", add_sync)
    kernel.register_python_tool("add_inline", add_inline)
    with_noop = FunctionKernel(middleware=[noop])
    with_noop.register_python_tool("add_async", add_async)
    returns = TypeAdapter(int)

    def floor() -> int:
        args = AddArgs.model_validate(ARGS)
        return returns.validate_python(add(args.a, args.b))

    async def async_floor() -> int:
        args = AddArgs.model_validate(ARGS)
        return returns.validate_python(await add_raw(args.a, args.b))

    pai_bare, pai_manager = await pydantic_ai_calls()

    fast = await measure(
        {
            "direct": (lambda: add(1, 2), False),
            "floor": (floor, False),
            "async_floor": (async_floor, True),
            "pai_bare": (pai_bare, True),
            "pai_manager": (pai_manager, True),
            "async": (lambda: kernel.call_tool("python://add_async", ARGS), True),
            "timeout": (lambda: kernel.call_tool("python://add_async", ARGS, timeout=5.0), True),
            "inline": (lambda: kernel.call_tool("python://add_inline", ARGS), True),
            "prior": (lambda: kernel.prior_call_tool("python://add_async", ARGS), True),
            "noop": (lambda: with_noop.call_tool("python://add_async", ARGS), True),
        },
        calls,
    )
    slow = await measure(
        {
            "hop": (lambda: anyio.to_thread.run_sync(functools.partial(add, 1, 2)), True),
            "asyncio_hop": (lambda: asyncio.to_thread(add, 1, 2), True),
            "sync": (lambda: kernel.call_tool("python://add_sync", ARGS), True),
        },
        calls,
    )
    await kernel.close()
    await with_noop.close()

    print(f"python:// tools, {calls:,} calls per case, median of {BATCH:,}-call batches taken in turns (µs per call)")
    rows: list[tuple[str, float, tuple[str, float, float | None] | None]] = [
        ("direct call add(a, b)", fast["direct"], None),
        ("pydantic floor (validate args, call, validate return)", fast["floor"], None),
        ("async pydantic floor (validate, await, validate)", fast["async_floor"], None),
        ("kernel.call_tool, async tool", fast["async"], ("async pydantic floor", fast["async_floor"], 1.25)),
        (
            "pydantic-ai FunctionToolset.call_tool (no validation)",
            fast["pai_bare"],
            ("async pydantic floor", fast["async_floor"], None),
        ),
        (
            "pydantic-ai ToolManager.handle_call",
            fast["pai_manager"],
            ("async pydantic floor", fast["async_floor"], None),
        ),
        ("kernel.call_tool, async tool, timeout=5", fast["timeout"], ("no timeout", fast["async"], 1.3)),
        ("kernel.call_tool, inline sync tool", fast["inline"], ("pydantic floor", fast["floor"], 3.0)),
        ("call path before the pipeline, async tool", fast["prior"], None),
        ("kernel.call_tool, async tool (again)", fast["async"], ("path before the pipeline", fast["prior"], 1.05)),
        ("kernel.call_tool with one no-op middleware", fast["noop"], ("no middleware", fast["async"], 9.9)),
        ("bare anyio.to_thread.run_sync hop", slow["hop"], None),
        ("bare asyncio.to_thread hop", slow["asyncio_hop"], None),
        ("kernel.call_tool, sync tool (worker thread)", slow["sync"], ("asyncio.to_thread", slow["asyncio_hop"], 1.0)),
    ]
    for label, value, against in rows:
        line = f"  {label:<56} {value:9.2f} µs"
        if against is not None:
            name, base, target = against
            ratio = value / base
            line += f"   {ratio:5.2f}x {name}"
            if target is not None:
                line += f" (target <= {target}x: {'ok' if ratio <= target else 'OVER TARGET'})"
        print(line)
    added = fast["noop"] - fast["async"]
    verdict = "ok" if added < 0.5 else "OVER TARGET"
    print(f"  one no-op middleware adds {added:.2f} µs per call (target < 0.5 µs: {verdict})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=100_000, help="calls per case (default 100,000)")
    asyncio.run(main(parser.parse_args().calls))
