"""Benchmark: mcp:// tools through the kernel against the raw MCP SDK client, in the same run.

Run: ``.venv/bin/python bench/mcp.py [--calls N] [--concurrency C] [--rounds R] [--protocol legacy|2026-07-28]``.

``--protocol`` picks the era measured on both sides: ``legacy`` (the default; the raw side is a ``ClientSession``
after ``initialize``) or ``2026-07-28`` (the raw side is the SDK's ``mcp.Client``, negotiating with
``server/discover`` as the kernel does; the kernel also opens its ``subscriptions/listen`` stream when connecting).

Against the stdio demo server that ships with kavalai (an SDK ``MCPServer``), on its ``slugify`` tool (text
output, no output schema, so neither side validates structured content):

- sequential latency: N calls of ``ClientSession.call_tool`` on a raw SDK session (``stdio_client``), and N
  of ``kernel.call_tool``; the two are measured in alternating rounds so that load from other processes on the
  machine hits both alike; median and p99 per call;
- throughput: C calls in flight on one session (C workers making 20 calls each per round), calls per second,
  the median over the alternating rounds;
- connecting: ``connect_mcp_servers()`` with 1 server and with 4 servers (spawn, initialize, list tools), and
  closing them, medians of 3 runs; the raw SDK (``stdio_client`` + ``ClientSession``) connecting and closing 1
  and 4 servers concurrently is the floor, and 4 servers connected one after another is shown for comparison.
  The CPU time one server start costs (measured on the reaped children) bounds what 4 concurrent starts can do
  on this machine's CPUs; the verdict says whether the kernel or the machine misses the target.

``--instructions raw|ours N`` makes only one side's N sequential calls after the warm-up (no rounds, no connect
figures), for an instruction count under ``valgrind --tool=callgrind`` (load-independent; the server is a child
process, which callgrind does not follow): the count of N minus the count of 0, divided by N, is one call's cost.

Targets: sequential median at most 1.05x the raw SDK (issue 36; 1.10x before it), throughput at least 0.9x,
4 servers connected in at most 1.5x the time of one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and its name would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from kavalai import FunctionKernel, McpServer  # noqa: E402
from kavalai.demo.mcp_server import demo_server_config  # noqa: E402

TOOL = "slugify"
ARGS = {"text": "Typed tools make agents dependable"}
WARMUP = 200
CONNECT_RUNS = 3  # connect figures are medians of this many runs
PER_WORKER = 20  # calls each of the C concurrent workers makes in one round


async def sequential(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    """Seconds per call of ``calls`` sequential calls."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def concurrent(call: Callable[[], Awaitable[object]], calls: int, concurrency: int) -> float:
    """Calls per second with ``concurrency`` calls in flight, ``calls`` in all."""
    per_worker = calls // concurrency

    async def worker() -> None:
        for _ in range(per_worker):
            await call()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return per_worker * concurrency / (time.perf_counter() - start)


#: The protocol era measured (``--protocol``): "legacy" (the initialize handshake) or "2026-07-28".
PROTOCOL = "legacy"


def _config(name: str = "demo") -> McpServer:
    return demo_server_config(name).model_copy(update={"protocol": PROTOCOL})


@asynccontextmanager
async def _raw_session(params: StdioServerParameters) -> AsyncIterator[Callable[[], Awaitable[object]]]:
    """The raw SDK connected in the era measured, as a function making one call (the floor)."""
    if PROTOCOL == "legacy":
        async with stdio_client(params) as streams, ClientSession(*streams) as session:
            await session.initialize()
            await session.list_tools()
            yield lambda: session.call_tool(TOOL, ARGS)
        return
    async with Client(params, mode="auto") as client:  # discover, as the kernel does
        assert client.protocol_version == PROTOCOL
        await client.list_tools()
        yield lambda: client.call_tool(TOOL, ARGS)


async def connect_time(servers: int) -> tuple[float, float, float]:
    """Seconds to connect ``servers`` demo servers concurrently, and to close them; and the CPU seconds the server
    processes had used by the time they were connected."""
    kernel = FunctionKernel()
    for i in range(servers):
        kernel.register_mcp_server(_config(f"demo{i}"))
    start = time.perf_counter()
    await kernel.connect_mcp_servers()
    connected = time.perf_counter() - start
    cpu = sum(_process_cpu(state.pid) for state in kernel.mcp_server_states() if state.pid is not None)
    start = time.perf_counter()
    await kernel.close()
    return connected, time.perf_counter() - start, cpu


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def raw_connect_time(servers: int) -> tuple[float, float]:
    """Seconds for the raw SDK to connect ``servers`` demo servers concurrently, and to close them (the floor)."""
    config = demo_server_config()
    params = StdioServerParameters(command=config.command or "", args=config.args, env=config.env)
    connected = 0
    all_connected = anyio.Event()
    release = anyio.Event()

    async def connect_one() -> None:
        nonlocal connected
        async with _raw_session(params):
            connected += 1
            if connected == servers:
                all_connected.set()
            await release.wait()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(servers):
            tg.start_soon(connect_one)
        await all_connected.wait()
        elapsed = time.perf_counter() - start
        release.set()
        start = time.perf_counter()
    return elapsed, time.perf_counter() - start


async def connect_sequentially(servers: int) -> float:
    """Seconds to connect ``servers`` demo servers one after another (for comparison)."""
    kernel = FunctionKernel()
    for i in range(servers):
        kernel.register_mcp_server(_config(f"demo{i}"))
    start = time.perf_counter()
    for i in range(servers):
        await kernel.resolve_tool(f"mcp://demo{i}.{TOOL}")
    elapsed = time.perf_counter() - start
    await kernel.close()
    return elapsed


async def connect_figures(runs: int) -> tuple[float, ...]:
    """Medians over ``runs`` runs, alternating kernel and raw SDK: connect and close of 1 and 4 servers by the
    kernel, then by the raw SDK; last, the CPU seconds one server used until it was connected."""
    figures: list[list[float]] = [[] for _ in range(9)]
    for _ in range(runs):
        one, close_one, cpu = await connect_time(1)
        four, close_four, _ = await connect_time(4)
        measured = [one, close_one, four, close_four, *await raw_connect_time(1), *await raw_connect_time(4), cpu]
        for column, value in zip(figures, measured, strict=True):
            column.append(value)
    return tuple(statistics.median(column) for column in figures)


def p99(samples: list[float]) -> float:
    """The 99th percentile."""
    return statistics.quantiles(samples, n=100)[98]


async def main(calls: int, concurrency: int, rounds: int, connect: bool = True) -> None:
    config = _config()
    params = StdioServerParameters(command=config.command or "", args=config.args, env=config.env)
    async with AsyncExitStack() as stack:
        raw_call = await stack.enter_async_context(_raw_session(params))
        kernel = FunctionKernel()
        stack.push_async_callback(kernel.close)
        kernel.register_mcp_server(config)
        await kernel.connect_mcp_servers()
        uri = f"mcp://demo.{TOOL}"

        async def raw() -> object:
            return await raw_call()

        async def ours() -> object:
            return await kernel.call_tool(uri, ARGS)

        assert (await kernel.call_tool(uri, ARGS)).result == "typed-tools-make-agents-dependable"  # type: ignore[attr-defined]
        await sequential(raw, WARMUP)
        await sequential(ours, WARMUP)
        raw_seq: list[float] = []
        our_seq: list[float] = []
        raw_rate: list[float] = []
        our_rate: list[float] = []
        for i in range(rounds):
            # Alternate which side goes first, so neither always runs right after the other's burst.
            for side in ("raw", "ours") if i % 2 == 0 else ("ours", "raw"):
                call, seq, rate = (raw, raw_seq, raw_rate) if side == "raw" else (ours, our_seq, our_rate)
                seq += await sequential(call, calls // rounds)
                rate.append(await concurrent(call, concurrency * PER_WORKER, concurrency))

    raw_median, our_median = statistics.median(raw_seq), statistics.median(our_seq)
    raw_tput, our_tput = statistics.median(raw_rate), statistics.median(our_rate)
    seq_ratio, tput_ratio = our_median / raw_median, our_tput / raw_tput
    print(f"mcp:// over stdio, protocol {PROTOCOL}, tool {TOOL!r} of the demo server")
    print(f"{len(raw_seq)} sequential calls each, {rounds} rounds")
    print(f"  raw SDK call_tool                 median {raw_median * 1e3:6.3f} ms   p99 {p99(raw_seq) * 1e3:6.3f} ms")
    print(
        f"  kernel.call_tool                  median {our_median * 1e3:6.3f} ms   p99 {p99(our_seq) * 1e3:6.3f} ms"
        f"   {seq_ratio:.2f}x raw (target <= 1.05x: {_verdict(seq_ratio <= 1.05)})"
    )
    print(f"{concurrency} calls in flight on one session, median of {rounds} rounds")
    print(f"  raw SDK call_tool                 {raw_tput:8.0f} calls/s")
    print(
        f"  kernel.call_tool                  {our_tput:8.0f} calls/s"
        f"   {tput_ratio:.2f}x raw (target >= 0.9x: {_verdict(tput_ratio >= 0.9)})"
    )
    if connect:
        await _print_connect_figures()


async def _print_connect_figures() -> None:
    one, close_one, four, close_four, raw_one, raw_close_one, raw_four, raw_close_four, cpu = await connect_figures(
        CONNECT_RUNS
    )
    four_in_a_row = await connect_sequentially(4)
    connect_ratio = four / one
    cpus = _cpus()
    # Four starts need 4 * cpu seconds of CPU on `cpus` CPUs, and none can be faster than one start alone (a lower
    # bound: the kernel's own process needs some CPU too).
    best_ratio = max(1.0, 4 * cpu / cpus / one)
    print(f"connecting (spawn + initialize + tools/list) and closing, median of {CONNECT_RUNS} runs")
    print("                                    kernel     raw SDK   kernel/raw   close: kernel   raw SDK")
    for label, ours_, raw_, ours_close, raw_close in (
        ("1 server", one, raw_one, close_one, raw_close_one),
        ("4 servers, concurrently", four, raw_four, close_four, raw_close_four),
    ):
        print(
            f"  {label:<27} {ours_ * 1e3:8.0f} ms {raw_ * 1e3:8.0f} ms   {ours_ / raw_:8.2f}x"
            f"   {ours_close * 1e3:10.0f} ms {raw_close * 1e3:6.0f} ms"
        )
    print(f"  4 servers, one after another  {four_in_a_row * 1e3:8.0f} ms   (for comparison)")
    print(
        f"  4 servers / 1 server: kernel {connect_ratio:.2f}x, raw SDK {raw_four / raw_one:.2f}x"
        f"   (target <= 1.5x: {_verdict(connect_ratio <= 1.5)})"
    )
    print(
        f"  one server uses {cpu:.2f} s of CPU until connected (measured); 4 of them on {cpus} CPUs cannot connect"
        f" in less than {best_ratio:.2f}x the time of one here"
    )
    if connect_ratio > 1.5:
        culprit = "the machine (CPU-bound server starts)" if best_ratio > 1.5 else "the kernel"
        print(f"  -> over target because of {culprit}; kernel vs raw SDK with 4 servers: {four / raw_four:.2f}x")


async def counted(side: str, count: int) -> None:
    """Only ``side``'s ``count`` sequential calls after the warm-up (``--instructions``)."""
    config = _config()
    params = StdioServerParameters(command=config.command or "", args=config.args, env=config.env)
    async with AsyncExitStack() as stack:
        if side == "raw":
            call = await stack.enter_async_context(_raw_session(params))
        else:
            kernel = FunctionKernel()
            stack.push_async_callback(kernel.close)
            kernel.register_mcp_server(config)
            await kernel.connect_mcp_servers()

            async def call() -> object:
                return await kernel.call_tool(f"mcp://demo.{TOOL}", ARGS)

        await sequential(call, WARMUP)
        await sequential(call, count)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER TARGET"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2_000, help="calls per client and case (default 2000)")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight (default 32)")
    parser.add_argument("--rounds", type=int, default=20, help="alternating rounds (default 20)")
    parser.add_argument("--protocol", choices=["legacy", "2026-07-28"], default="legacy", help="the era measured")
    parser.add_argument("--no-connect", action="store_true", help="only the calls: no connect/close figures")
    parser.add_argument("--instructions", nargs=2, metavar=("SIDE", "N"), help="raw|ours and how many calls, only")
    args = parser.parse_args()
    PROTOCOL = args.protocol
    if args.instructions:
        anyio.run(counted, args.instructions[0], int(args.instructions[1]))
    else:
        anyio.run(main, args.calls, args.concurrency, args.rounds, not args.no_connect)
    sys.exit(0)
