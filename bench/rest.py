"""Benchmark: rest:// tools through the kernel against a raw shared aiohttp session, in the same run.

Run: ``.venv/bin/python bench/rest.py [--calls N] [--concurrency C] [--rounds R] [--round-calls M]``.

One local endpoint, ``POST /add`` (JSON ``{"a", "b"}`` in, ``{"sum"}`` out), is served by uvicorn in a separate
process, so the client's figures are not mixed with the server's CPU time in this process. Against it:

- the floor: one shared ``aiohttp.ClientSession`` posting the JSON and decoding the reply;
- ``kernel.call_tool("rest://bench.add", ...)``: validate the arguments, build and send the request through the
  server's pooled session, decode and validate the reply into the output model.

How the measurement stays sound on shared, busy cores: raw and kernel are measured **interleaved, in pairs**
taken back to back (which goes first alternates), so a change of load hits both members of a pair alike; the
figure reported is the **median of the per-pair ratios** with their spread (the interquartile range and the
extremes), which shows at a glance how far the run can be trusted.

- Sequential: after a warm-up, ``--calls`` calls per case, raw and kernel alternating call by call; median and
  p99 per call of each case, and the ratio of the medians of each run of 100 pairs (median, IQR, min-max).
- Concurrent: after a warm-up run each (which opens the pooled connections), ``--rounds`` paired rounds of
  ``--round-calls`` calls per case with ``--concurrency`` in flight (short rounds, so the two halves of a pair
  see the same load); calls per second (median of the rounds) and the per-round ratios. The client process's
  CPU time per call is printed beside it: when the two cores are busy, throughput follows CPU per call, and
  that ratio moves much less with the load than the calls per second do.

The machine's load average is printed too: the absolute figures move with it, the paired ratios much less.
Targets (issues #34 and #36): sequential at most 1.10x raw, concurrent throughput at least 0.95x raw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from kavalai import FunctionKernel, RestServer

ARGS = {"a": 20, "b": 22}
BLOCK = 100
INPUT = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
OUTPUT = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: ``POST /add`` sums two numbers (the same cost for both clients)."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    data = json.loads(body or b"{}")
    payload = json.dumps({"sum": data.get("a", 0) + data.get("b", 0)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def serve(port: int) -> None:
    """Run :func:`app` with uvicorn on 127.0.0.1:``port`` (the server process)."""
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", ws="none")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int, timeout: float = 20.0) -> subprocess.Popen[bytes]:
    """Start the server process and wait (bounded) until it accepts connections."""
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the benchmark server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the benchmark server did not start within {timeout} s")


async def timed_block(call: Callable[[], Awaitable[object]], n: int, out: list[float]) -> None:
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)


Call = Callable[[], Awaitable[object]]


async def sequential(raw: Call, tool: Call, calls: int) -> tuple[list[float], list[float], list[float]]:
    """Per-call seconds of raw and kernel (alternating call by call), and the ratio of medians per 100 pairs."""
    raw_times: list[float] = []
    tool_times: list[float] = []
    for call in (raw, tool):  # warm-up: connections open, code paths hot
        await timed_block(call, 200, [])
    for pair in range(calls):
        halves = [(raw, raw_times), (tool, tool_times)]
        for call, out in halves if pair % 2 == 0 else halves[::-1]:
            await timed_block(call, 1, out)
    ratios = [
        statistics.median(tool_times[i : i + BLOCK]) / statistics.median(raw_times[i : i + BLOCK])
        for i in range(0, calls - BLOCK + 1, BLOCK)
    ] or [statistics.median(tool_times) / statistics.median(raw_times)]
    return raw_times, tool_times, ratios


async def concurrent(call: Callable[[], Awaitable[object]], calls: int, concurrency: int) -> tuple[float, float]:
    """Calls per second, and this process's CPU seconds per call, for ``calls`` calls with ``concurrency`` in flight."""
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - start), (time.process_time() - cpu) / calls


async def concurrent_rounds(
    raw: Call, tool: Call, calls: int, concurrency: int, rounds: int
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(calls/s, CPU s per call) of raw and kernel in ``rounds`` paired rounds."""
    for call in (raw, tool):  # warm-up: the pools open their connections
        await concurrent(call, max(concurrency * 4, calls // 10), concurrency)
    raw_runs: list[tuple[float, float]] = []
    tool_runs: list[tuple[float, float]] = []
    for round_ in range(rounds):
        halves = [(raw, raw_runs), (tool, tool_runs)]
        for call, out in halves if round_ % 2 == 0 else halves[::-1]:
            out.append(await concurrent(call, calls, concurrency))
    return raw_runs, tool_runs


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def spread(ratios: list[float]) -> str:
    """``median (IQR low-high, min-max)`` of the per-pair ratios."""
    low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    median = statistics.median(ratios)
    return f"{median:.3f}x (IQR {low:.3f}-{high:.3f}, min-max {min(ratios):.3f}-{max(ratios):.3f})"


async def main(calls: int, concurrency: int, rounds: int, round_calls: int) -> None:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    kernel = FunctionKernel()
    try:
        kernel.register_rest_server(RestServer(name="bench", url=url))
        kernel.register_rest_tool("bench", "add", "POST", INPUT, OUTPUT, "Add two integers.")
        async with aiohttp.ClientSession() as session:

            async def raw() -> object:
                async with session.post(f"{url}/add", json=ARGS) as response:
                    return await response.json()

            async def tool() -> object:
                return await kernel.call_tool("rest://bench.add", ARGS)

            assert (await tool()).sum == 42  # type: ignore[attr-defined]
            raw_times, tool_times, seq_ratios = await sequential(raw, tool, calls)
            raw_runs, tool_runs = await concurrent_rounds(raw, tool, round_calls, concurrency, rounds)
    finally:
        await kernel.close()
        server.terminate()
        server.wait(10)

    end_load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"rest:// tools against one uvicorn endpoint (POST /add, separate process), aiohttp {aiohttp.__version__}")
    print(f"load average before / after the run: {load} / {end_load}")
    print(f"sequential, {len(raw_times):,} calls each, interleaved (median / p99 per call):")
    for label, times in (("raw shared aiohttp session", raw_times), ("kernel.call_tool rest://", tool_times)):
        print(f"  {label:31} {statistics.median(times) * 1e3:7.3f} ms / {p99(times) * 1e3:7.3f} ms")
    verdict = "ok" if statistics.median(seq_ratios) <= 1.10 else "OVER TARGET"
    print(f"  ratio {spread(seq_ratios)} over {len(seq_ratios)} runs of {BLOCK} pairs (target <= 1.10x: {verdict})")
    rate_ratios = [k[0] / r[0] for k, r in zip(tool_runs, raw_runs, strict=True)]
    cpu_ratios = [k[1] / r[1] for k, r in zip(tool_runs, raw_runs, strict=True)]
    print(f"concurrent, {concurrency} in flight, {rounds} paired rounds of {round_calls:,} calls each (medians):")
    for label, runs in (("raw shared aiohttp session", raw_runs), ("kernel.call_tool rest://", tool_runs)):
        rate, cpu = statistics.median(run[0] for run in runs), statistics.median(run[1] for run in runs)
        print(f"  {label:31} {rate:9,.0f} calls/s   {cpu * 1e6:6.1f} us client CPU per call")
    verdict = "ok" if statistics.median(rate_ratios) >= 0.95 else "UNDER TARGET"
    print(f"  throughput ratio {spread(rate_ratios)} over the {rounds} rounds (target >= 0.95x: {verdict})")
    print(f"  client CPU per call, kernel / raw: {spread(cpu_ratios)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2_000, help="sequential calls per case (default 2,000)")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight (default 32)")
    parser.add_argument("--rounds", type=int, default=40, help="paired concurrent rounds (default 40)")
    parser.add_argument("--round-calls", type=int, default=500, help="calls per case and round (default 500)")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve is not None:
        serve(options.serve)
    else:
        asyncio.run(main(options.calls, options.concurrency, options.rounds, options.round_calls))
