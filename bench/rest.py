"""Benchmark: rest:// tools through the kernel against a raw shared aiohttp session, in the same run.

Run: ``.venv/bin/python bench/rest.py [--calls N] [--concurrency C]``.

One local endpoint, ``POST /add`` (JSON ``{"a", "b"}`` in, ``{"sum"}`` out), is served by uvicorn in a separate
process, so the client's figures are not mixed with the server's CPU time in this process. Against it:

- the floor: one shared ``aiohttp.ClientSession`` posting the JSON and decoding the reply;
- ``kernel.call_tool("rest://bench.add", ...)``: validate the arguments, build and send the request through the
  server's pooled session, decode and validate the reply into the output model.

Sequential: ``--calls`` calls one after another (raw and kernel alternate in blocks of 100, after a warm-up),
median and p99 per call. Concurrent: ``--calls`` calls with ``--concurrency`` in flight, calls per second: seven
rounds, each a raw run and a kernel run back to back (their order alternating); the median rate of each, and the
median of the per-round ratios. The machine's load average is printed too: on shared cores the figures move
with it, the ratios much less. Targets: sequential median at most 1.15x raw, concurrent throughput at least
0.9x raw.
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
ROUNDS = 7
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


async def sequential(cases: dict[str, Callable[[], Awaitable[object]]], calls: int) -> dict[str, list[float]]:
    """Per-call seconds for each case; cases alternate in blocks so drift hits them alike."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for call in cases.values():  # warm-up: connections open, code paths hot
        await timed_block(call, 200, [])
    for _ in range(max(1, calls // BLOCK)):
        for name, call in cases.items():
            await timed_block(call, BLOCK, samples[name])
    return samples


async def concurrent(call: Callable[[], Awaitable[object]], calls: int, concurrency: int) -> float:
    """Calls per second for ``calls`` calls with ``concurrency`` in flight."""
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - start)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


async def main(calls: int, concurrency: int) -> None:
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
            seq = await sequential({"raw": raw, "kernel": tool}, calls)
            rates: dict[str, list[float]] = {"raw": [], "kernel": []}
            order = [("raw", raw), ("kernel", tool)]
            for _ in range(ROUNDS):
                for name, call in order:
                    rates[name].append(await concurrent(call, calls, concurrency))
                order.reverse()  # neither side always runs first
    finally:
        await kernel.close()
        server.terminate()
        server.wait(10)

    raw_med, tool_med = statistics.median(seq["raw"]), statistics.median(seq["kernel"])
    raw_rate, tool_rate = statistics.median(rates["raw"]), statistics.median(rates["kernel"])
    seq_ratio = tool_med / raw_med
    # Each round pairs a raw and a kernel run taken back to back, so the load of the moment hits both alike.
    rate_ratio = statistics.median(k / r for k, r in zip(rates["kernel"], rates["raw"], strict=True))
    print(f"rest:// tools against one uvicorn endpoint (POST /add, separate process), aiohttp {aiohttp.__version__}")
    print(f"load average before the run: {load}")
    print(f"sequential, {len(seq['raw']):,} calls each (median / p99 per call):")
    print(f"  raw shared aiohttp session      {raw_med * 1e3:7.3f} ms / {p99(seq['raw']) * 1e3:7.3f} ms")
    print(f"  kernel.call_tool rest://        {tool_med * 1e3:7.3f} ms / {p99(seq['kernel']) * 1e3:7.3f} ms")
    verdict = "ok" if seq_ratio <= 1.15 else "OVER TARGET"
    print(f"  ratio {seq_ratio:.3f}x raw (target <= 1.15x: {verdict})")
    print(f"concurrent, {calls:,} calls with {concurrency} in flight ({ROUNDS} paired rounds, medians):")
    print(f"  raw shared aiohttp session      {raw_rate:9,.0f} calls/s")
    print(f"  kernel.call_tool rest://        {tool_rate:9,.0f} calls/s")
    verdict = "ok" if rate_ratio >= 0.9 else "UNDER TARGET"
    print(f"  ratio {rate_ratio:.3f}x raw, median of the paired rounds (target >= 0.9x: {verdict})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2_000, help="calls per case (default 2,000)")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight (default 32)")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve is not None:
        serve(options.serve)
    else:
        asyncio.run(main(options.calls, options.concurrency))
