"""Python opcodes per call, by function: where a call's Python work goes, load-independent.

Run: ``.venv/bin/python bench/opcodes.py mcp raw|ours [--calls N]`` (bench/mcp.py's sequential call: the raw SDK
session or ``kernel.call_tool``) or ``.venv/bin/python bench/opcodes.py workflow runs|calls [--calls N]``
(bench/workflow.py's 10-node run, or its ten direct calls).

After a warm-up, N calls run under ``sys.settrace`` with ``f_trace_opcodes``; every opcode executed in this process
is counted against its function. Printed: opcodes per call in all, without the asyncio loop's own (``asyncio/`` and
``selectors.py``: their count depends on timing, e.g. how often a stdio server's exit watcher polls while a call
waits, so they are shown apart), by package, and the top functions. Instruction counts (callgrind) add the C work
(pydantic-core, the interpreter itself) but also count that timing-dependent loop work, which under valgrind's
slowdown varies from run to run; opcodes do not.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib.util
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
WARMUP = 200
_LOOP_PARTS = ("/asyncio/", "selectors.py")


class Counter:
    """Opcodes executed, by (file, function), while :meth:`on` is in effect."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            self.counts[(code.co_filename, code.co_name)] += 1
        return self._trace

    def on(self) -> None:
        sys.settrace(self._trace)

    def off(self) -> None:
        sys.settrace(None)

    def report(self, calls: int, top: int) -> None:
        total = sum(self.counts.values())
        loop = sum(n for (file, _), n in self.counts.items() if any(part in file for part in _LOOP_PARTS))
        print(f"opcodes per call: {total / calls:,.0f}; without the asyncio loop's own: {(total - loop) / calls:,.0f}")
        by_package: collections.Counter[str] = collections.Counter()
        for (file, _), n in self.counts.items():
            by_package[_package(file)] += n
        for package, n in by_package.most_common(20):
            print(f"  {n / calls:8.1f}  {package}")
        print("functions:")
        for (file, name), n in self.counts.most_common(top):
            print(f"  {n / calls:8.1f}  {_short(file)}:{name}")


def _short(file: str) -> str:
    for marker in ("site-packages/", "/src/", "/bench/"):
        if marker in file:
            return file.split(marker)[-1]
    return file.rsplit("/lib/python3.", 1)[-1]


def _package(file: str) -> str:
    parts = _short(file).split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[-1]


async def _count(call: Callable[[], Awaitable[object]], calls: int, counter: Counter) -> None:
    for _ in range(WARMUP):
        await call()
    counter.on()
    try:
        for _ in range(calls):
            await call()
    finally:
        counter.off()


def _mcp_bench() -> Any:
    """bench/mcp.py as a module (this folder off sys.path first: its name would shadow the mcp package)."""
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
    spec = importlib.util.spec_from_file_location("bench_mcp", HERE / "mcp.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


async def mcp(side: str, calls: int, counter: Counter) -> None:
    """bench/mcp.py's sequential call of one side."""
    bench = _mcp_bench()
    from mcp.client.stdio import StdioServerParameters

    config = bench._config()
    params = StdioServerParameters(command=config.command or "", args=config.args, env=config.env)
    async with AsyncExitStack() as stack:
        if side == "raw":
            call = await stack.enter_async_context(bench._raw_session(params))
        else:
            kernel = bench.FunctionKernel()
            stack.push_async_callback(kernel.close)
            kernel.register_mcp_server(config)
            await kernel.connect_mcp_servers()

            async def call() -> object:
                return await kernel.call_tool(f"mcp://demo.{bench.TOOL}", bench.ARGS)

        await _count(call, calls, counter)


async def workflow(side: str, calls: int, counter: Counter) -> None:
    """bench/workflow.py's 10-node run, or its ten direct calls."""
    sys.path.insert(0, str(HERE))
    import workflow as bench

    kernel, engine = bench.setup()

    async def call() -> object:
        if side == "runs":
            await bench.runs(engine, 1)
        else:
            await bench.calls(kernel, 1)
        return None

    await _count(call, calls, counter)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("bench", choices=["mcp", "workflow"])
    parser.add_argument("side", help="mcp: raw|ours; workflow: runs|calls")
    parser.add_argument("--calls", type=int, default=300, help="calls counted (default 300)")
    parser.add_argument("--top", type=int, default=40, help="functions listed (default 40)")
    arguments = parser.parse_args()
    counter = Counter()
    measure = mcp if arguments.bench == "mcp" else workflow
    if arguments.bench == "mcp":
        import anyio

        anyio.run(measure, arguments.side, arguments.calls, counter)
    else:
        asyncio.run(measure(arguments.side, arguments.calls, counter))
    counter.report(arguments.calls, arguments.top)
