"""Benchmark: ``kavalai serve`` over streamable HTTP beside FastMCP's HTTP server, the same tool, in the same run.

Run: ``.venv/bin/python bench/serve_http.py [--rounds R] [--calls N] [--sessions 1,8,32,128] [--no-node]``.

Both servers are real processes started by the bench on free 127.0.0.1 ports and serve one Python tool,
``add(a, b)``: ``kavalai serve CONFIG --transport http`` (the tool as ``python_add``) and a FastMCP 4 server
(``FastMCP.run(transport="http")``, the tool as ``add``). Three kinds of client, each with one MCP session per
connection:

- ``sdk``: the MCP Python SDK's ``mcp.client.Client`` (httpx underneath);
- ``aiohttp``: a plain keep-alive aiohttp client speaking JSON-RPC (initialize, then ``tools/call`` POSTs with the
  session id, reading the SSE answer);
- ``node``: node's ``fetch`` (undici, what the TypeScript SDK and so most MCP hosts use), when ``node`` is on PATH;
  the node process times its own calls;
- ``nagle``: a bare HTTP/1.1 client with Nagle's algorithm on that writes each request's headers and body apart:
  without an immediate acknowledgement from the server, each call waits for its delayed ACK (40 ms or more).

For each client and each number of sessions S (1 = sequential calls on one session; 8/32/128 sessions, each making
calls one after another, all at once), the servers take turns, the order flipping at each turn, so that the load
of other processes on a shared machine hits them alike: every round, and with one session (sequential latency)
every slice of 20 calls (``--slice``); node's client takes the turns within one process. Each session first makes
20 calls unmeasured. Printed per server: p50 and p99 latency of a call (all slices pooled), calls per second (all
calls over the time they took), the server's CPU time per call (its process and children, user + system) and the
load generator's (this process, single-threaded, or node's: where it is above the server's, as with the SDK's
client against ``kavalai serve``, calls/s measure the generator more than the server). Then
``kavalai serve --stateless`` with ``--workers 1`` and ``--workers 2`` at 32 sessions (aiohttp), beside FastMCP
stateless, with the CPU the load generator (this process) took, and the most two workers can gain over one with
that generator on this machine's cores (:func:`workers_ceiling`: on two cores a generator taking 0.4 of the
server's CPU a call caps it at 1.43x).

Targets (issue 40): sequential p50 at most 1.0x FastMCP's with every client; at 32 sessions at least 1.3x FastMCP's
calls/s and a p99 no higher; ``--workers 2`` at least 1.3x one worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path, where bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

import aiohttp  # noqa: E402
import psutil  # noqa: E402
from mcp.client import Client  # noqa: E402

Call = Callable[[], Awaitable[object]]
ACCEPT = "application/json, text/event-stream"
#: Seconds a client keeps an idle connection: below uvicorn's 5 s (both servers), so that the client, not the
#: server, closes a connection left idle while another server's round runs (a POST is not retried on one the
#: server closed).
_IDLE = 3.0
#: Calls each session makes before the measured ones.
_WARM_UP = 20
TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
FASTMCP = """
import sys
from fastmcp import FastMCP

mcp = FastMCP("peer")


@mcp.tool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False, log_level="warning",
        stateless_http=sys.argv[2] == "stateless")
"""
NODE = r"""
const {servers, sessions, calls, slices} = JSON.parse(process.argv[2]);
const headers = {"content-type": "application/json", accept: "application/json, text/event-stream"};
async function post(url, body, session) {
  const extra = session ? {"mcp-session-id": session} : {};
  const answer = await fetch(url, {method: "POST", headers: {...headers, ...extra}, body: JSON.stringify(body)});
  const text = await answer.text();
  if (answer.status >= 300) throw new Error(`HTTP ${answer.status}: ${text}`);
  return [answer.headers.get("mcp-session-id"), text];
}
async function open(server) {
  if (!server.stateful) return null;
  const init = {jsonrpc: "2.0", id: 0, method: "initialize", params: {protocolVersion: "2025-06-18",
                capabilities: {}, clientInfo: {name: "bench", version: "1"}}};
  const [session] = await post(server.url, init, null);
  await post(server.url, {jsonrpc: "2.0", method: "notifications/initialized"}, session);
  return session;
}
const opened = [];
for (const server of servers) opened.push(await Promise.all(Array.from({length: sessions}, () => open(server))));
const found = servers.map(() => ({latencies: [], seconds: 0}));
let number = 0;
const cpu = process.cpuUsage();
for (let slice = 0; slice < slices; slice++) {
  const order = servers.map((_, index) => index);
  if (slice % 2) order.reverse();
  for (const index of order) {
    const {url, tool} = servers[index];
    const start = performance.now();
    await Promise.all(opened[index].map(async (session) => {
      for (let i = 0; i < calls; i++) {
        const n = ++number;
        const t = performance.now();
        const [, text] = await post(url, {jsonrpc: "2.0", id: n, method: "tools/call",
                                          params: {name: tool, arguments: {a: n, b: 1}}}, session);
        if (!text.includes(`"result":${n + 1}`) && !text.includes(`"result": ${n + 1}`)) throw new Error(text);
        found[index].latencies.push((performance.now() - t) / 1000);
      }
    }));
    found[index].seconds += (performance.now() - start) / 1000;
  }
}
const used = process.cpuUsage(cpu);
console.log(JSON.stringify({found, cpu: (used.user + used.system) / 1e6}));
"""


@dataclass
class Server:
    """A server process serving ``add`` at ``url`` as ``tool``; stateful when it hands out session ids."""

    name: str
    url: str
    tool: str
    stateful: bool
    process: subprocess.Popen[bytes]

    def cpu(self) -> float:
        """CPU seconds of the process and its children so far."""
        try:
            root = psutil.Process(self.process.pid)
            total = 0.0
            for proc in [root, *root.children(recursive=True)]:
                times = proc.cpu_times()
                total += times.user + times.system
            return total
        except psutil.Error:
            return 0.0


@dataclass
class Sample:
    latencies: list[float]
    calls_per_second: float
    server_cpu_per_call: float
    client_cpu: float
    seconds: float


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _process(command: list[str], log: Path, cwd: Path) -> Any:
    """A server process, owned: SIGTERM at the end, SIGKILL after 10 s."""
    with log.open("wb") as err:
        inherited = os.environ.get("PYTHONPATH")  # a tree to measure instead of this one (PYTHONPATH=/tmp/base/src)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), *([inherited] if inherited else [])])}
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=cwd, env=env)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _until_answering(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait (at most 60 s) until ``url`` answers an HTTP request."""
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{url}: the server exited; see {log}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(url.rsplit("/", 1)[0] + "/", timeout=aiohttp.ClientTimeout(total=2)):
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within 60 s")


@contextlib.asynccontextmanager
async def kavalai_server(folder: Path, *options: str) -> AsyncIterator[Server]:
    """``kavalai serve`` over HTTP with ``options``, on a free port."""
    port = _free_port()
    log = folder / f"kavalai-{port}.log"
    command = [sys.executable, "-m", "kavalai.cli._serve", str(folder / "tools.yaml"), "--transport", "http"]
    with _process([*command, "--port", str(port), *options], log, folder) as process:
        url = f"http://127.0.0.1:{port}/mcp"
        await _until_answering(url, process, log)
        yield Server("kavalai", url, "python_add", "--stateless" not in options, process)


@contextlib.asynccontextmanager
async def fastmcp_server(folder: Path, *, stateless: bool = False) -> AsyncIterator[Server]:
    """FastMCP's HTTP server with the same tool, on a free port."""
    port = _free_port()
    log = folder / f"fastmcp-{port}.log"
    mode = "stateless" if stateless else "stateful"
    with _process([sys.executable, str(folder / "peer.py"), str(port), mode], log, folder) as process:
        url = f"http://127.0.0.1:{port}/mcp"
        await _until_answering(url, process, log)
        yield Server("FastMCP", url, "add", not stateless, process)


# ----------------------------------------------------------------------------------------------------- clients


@contextlib.asynccontextmanager
async def aiohttp_sessions(server: Server, count: int) -> AsyncIterator[list[Call]]:
    """``count`` MCP sessions, each on its own keep-alive aiohttp connection."""
    async with contextlib.AsyncExitStack() as stack:
        calls = []
        for _ in range(count):
            connector = aiohttp.TCPConnector(limit=1, keepalive_timeout=_IDLE)
            http = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
            calls.append(await _aiohttp_session(http, server))
        yield calls


async def _aiohttp_session(http: aiohttp.ClientSession, server: Server) -> Call:
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if server.stateful:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        async with http.post(server.url, json=init, headers=headers) as answer:
            await answer.read()
            headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        async with http.post(
            server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        ) as answer:
            await answer.read()
    counter = iter(range(1, 1 << 62))

    async def call() -> None:
        number = next(counter)
        body = {"jsonrpc": "2.0", "id": number, "method": "tools/call"}
        body["params"] = {"name": server.tool, "arguments": {"a": number, "b": 1}}
        async with http.post(server.url, json=body, headers=headers) as answer:
            text = await answer.text()
        if f'"result":{number + 1}' not in text.replace(" ", ""):
            raise RuntimeError(f"unexpected answer: {text[:300]}")

    return call


@contextlib.asynccontextmanager
async def nagle_sessions(server: Server, count: int) -> AsyncIterator[list[Call]]:
    """``count`` MCP sessions of a bare HTTP/1.1 client that leaves Nagle's algorithm on (no ``TCP_NODELAY``) and
    writes each request's headers and body apart, as some HTTP clients do."""
    connections = [_NagleConnection(server) for _ in range(count)]
    try:
        yield [await connection.session() for connection in connections]
    finally:
        for connection in connections:
            connection.close()


class _NagleConnection:
    """One keep-alive connection (made again when the server closed it while idle) and its MCP session."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._host, self._path = server.url.removeprefix("http://").split("/", 1)
        self._headers = {"Host": self._host, "Accept": ACCEPT, "Content-Type": "application/json"}
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def session(self) -> Call:
        if self._server.stateful:
            params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
            answered, _ = await self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
            self._headers["mcp-session-id"] = answered["mcp-session-id"]
            await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        counter = iter(range(1, 1 << 62))

        async def call() -> None:
            number = next(counter)
            params = {"name": self._server.tool, "arguments": {"a": number, "b": 1}}
            _, text = await self._post({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params})
            if f'"result":{number + 1}'.encode() not in text.replace(b" ", b""):
                raise RuntimeError(f"unexpected answer: {text[:300]!r}")

        return call

    async def _post(self, body: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        if self._streams is None or self._streams[0].at_eof():
            self.close()
            host, port = self._host.rsplit(":", 1)
            self._streams = await asyncio.open_connection(host, int(port))
            self._streams[1].get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        reader, writer = self._streams
        data = json.dumps(body).encode()
        fields = {**self._headers, "Content-Length": len(data)}
        head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
        writer.write(f"POST /{self._path} HTTP/1.1\r\n{head}\r\n".encode())
        await writer.drain()
        writer.write(data)  # apart from the headers: Nagle holds it until they are acknowledged
        await writer.drain()
        return await _read_answer(reader)

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _read_answer(reader: asyncio.StreamReader) -> tuple[dict[str, str], bytes]:
    """An HTTP/1.1 answer's headers (lower-cased names) and body (chunked or with a length)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")[1:]
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in head if line)}
    if headers.get("transfer-encoding") != "chunked":
        return headers, await reader.readexactly(int(headers.get("content-length", "0")))
    body = b""
    while size := int((await reader.readline()).strip(), 16):
        body += await reader.readexactly(size)
        await reader.readline()
    await reader.readline()
    return headers, body


@contextlib.asynccontextmanager
async def sdk_sessions(server: Server, count: int) -> AsyncIterator[list[Call]]:
    """``count`` sessions of the MCP SDK's client."""
    async with contextlib.AsyncExitStack() as stack:
        calls = []
        for _ in range(count):
            client = await stack.enter_async_context(Client(server.url))
            calls.append(_sdk_call(client, server.tool))
        yield calls


def _sdk_call(client: Client, tool: str) -> Call:
    async def call() -> None:
        result = await client.call_tool(tool, {"a": 2, "b": 1})
        if result.is_error:
            raise RuntimeError(str(result.content))

    return call


async def run_python_clients(calls: Sequence[Call], per_session: int, server: Server) -> Sample:
    """Every session makes ``per_session`` calls one after another, all sessions at once."""
    latencies: list[float] = []

    async def session(call: Call) -> None:
        for _ in range(per_session):
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    cpu_server, cpu_client = server.cpu(), time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(session(call) for call in calls))
    seconds = time.perf_counter() - start
    done = len(calls) * per_session
    used = server.cpu() - cpu_server
    return Sample(latencies, done / seconds, used / done, time.process_time() - cpu_client, seconds)


async def run_node(
    node: str, script: Path, servers: Sequence[Server], sessions: int, per_slice: int, slices: int
) -> list[Sample]:
    """The node client: ``sessions`` sessions on each server (opened before the timing), then ``slices`` slices in
    which the servers take turns (the order flipping every slice), each session making ``per_slice`` calls."""
    cpu_servers = [server.cpu() for server in servers]
    plan = {
        "servers": [{"url": s.url, "tool": s.tool, "stateful": s.stateful} for s in servers],
        "sessions": sessions,
        "calls": per_slice,
        "slices": slices,
    }
    command = [node, str(script), json.dumps(plan)]
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"node client failed: {err.decode(errors='replace')[-500:]}")
    answer = json.loads(out)
    done = sessions * per_slice * slices
    samples = []
    for server, before, found in zip(servers, cpu_servers, answer["found"], strict=True):
        used = server.cpu() - before  # includes opening the sessions: a little above the calls alone
        share = answer["cpu"] / len(servers)
        samples.append(Sample(found["latencies"], done / found["seconds"], used / done, share, found["seconds"]))
    return samples


# --------------------------------------------------------------------------------------------------- measuring


@dataclass
class Figures:
    p50_ms: float
    p99_ms: float
    calls_per_second: float
    cpu_ms_per_call: float
    client_cpu_share: float


def summarize(samples: list[Sample]) -> Figures:
    """Latency percentiles of every call pooled; calls/s and CPU per call over all the samples' calls and time."""
    pooled = sorted(latency for sample in samples for latency in sample.latencies)
    p99 = pooled[min(len(pooled) - 1, int(len(pooled) * 0.99))]
    seconds = sum(s.seconds for s in samples)
    calls = sum(s.calls_per_second * s.seconds for s in samples)
    return Figures(
        statistics.median(pooled) * 1000,
        p99 * 1000,
        calls / seconds,
        sum(s.server_cpu_per_call * s.calls_per_second * s.seconds for s in samples) / calls * 1000,
        sum(s.client_cpu for s in samples) / seconds,
    )


async def compare(
    client: str,
    sessions: int,
    servers: Sequence[Server],
    rounds: int,
    calls: int,
    node: tuple[str, Path] | None,
    slice_calls: int = 20,
) -> list[Figures]:
    """``rounds`` rounds of ``calls`` calls of ``client`` with ``sessions`` sessions on each server, the servers
    taking turns every round, or with one session every slice of ``slice_calls`` calls (the order flipping at each
    turn), so that load from other processes hits them alike; figures per server."""
    per_session = max(5, calls // sessions)
    per_slice = min(per_session, slice_calls) if sessions == 1 else per_session  # concurrency needs whole rounds
    slices = max(1, per_session // per_slice)
    samples: list[list[Sample]] = [[] for _ in servers]
    async with contextlib.AsyncExitStack() as stack:
        if client == "node":
            assert node is not None
            for _ in range(rounds):
                for index, sample in enumerate(await run_node(*node, servers, sessions, per_slice, slices)):
                    samples[index].append(sample)
            return [summarize(found) for found in samples]
        opener = {"aiohttp": aiohttp_sessions, "sdk": sdk_sessions, "nagle": nagle_sessions}[client]
        opened: list[list[Call]] = []
        for server in servers:
            opened.append(await stack.enter_async_context(opener(server, sessions)))
            for call in opened[-1]:
                for _ in range(_WARM_UP):
                    await call()
        for number in range(rounds * slices):
            order = list(range(len(servers)))
            if number % 2:
                order.reverse()
            for index in order:
                samples[index].append(await run_python_clients(opened[index], per_slice, servers[index]))
    return [summarize(found) for found in samples]


def _row(label: str, figures: Sequence[Figures]) -> str:
    cells = [label]
    for found in figures:
        cells += [f"{found.p50_ms:7.2f}", f"{found.p99_ms:7.2f}", f"{found.calls_per_second:8.0f}"]
        cells.append(f"{found.cpu_ms_per_call:6.2f}")
        cells.append(f"{found.client_cpu_share / found.calls_per_second * 1000:6.2f}")
    first, peer = figures[0], figures[-1]
    cells += [f"{first.p50_ms / peer.p50_ms:5.2f}x", f"{first.calls_per_second / peer.calls_per_second:5.2f}x"]
    cells.append(f"{first.p99_ms / peer.p99_ms:5.2f}x")
    return " | ".join(cells)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=400, help="calls a round (per server)")
    parser.add_argument("--slice", type=int, default=20, help="calls a server makes before the other's turn")
    parser.add_argument("--sessions", default="1,8,32,128")
    parser.add_argument("--no-node", action="store_true")
    parser.add_argument("--clients", default="aiohttp,sdk,node,nagle")
    parser.add_argument("--part", choices=("all", "table", "workers"), default="all")
    args = parser.parse_args()
    node_binary = None if args.no_node else shutil.which("node")
    levels = [int(part) for part in args.sessions.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-serve-http-") as name:
        folder = Path(name)
        (folder / "bench_tools.py").write_text(TOOLS, encoding="utf-8")
        (folder / "peer.py").write_text(FASTMCP, encoding="utf-8")
        (folder / "client.mjs").write_text(NODE, encoding="utf-8")
        config = {"python_functions": [{"function": "bench_tools.add", "name": "add"}]}
        (folder / "tools.yaml").write_text(json.dumps(config), encoding="utf-8")
        node = (node_binary, folder / "client.mjs") if node_binary else None
        clients = [c for c in args.clients.split(",") if c != "node" or node is not None]
        print(
            f"kavalai serve vs FastMCP's HTTP server, tool add(a, b); {args.rounds} alternating rounds of "
            f"~{args.calls} calls; CPU: {os.cpu_count()} cores; node: {node_binary or 'absent'}"
        )
        print(
            "client S | kavalai p50 ms | p99 ms | calls/s | CPU ms/call | generator CPU ms/call | FastMCP p50 ms | "
            "p99 ms | calls/s | CPU ms/call | generator CPU ms/call | p50 ratio | calls/s ratio | p99 ratio"
        )
        async with kavalai_server(folder) as kavalai, fastmcp_server(folder) as peer:
            for client in clients if args.part != "workers" else ():
                for sessions in levels:
                    found = await compare(client, sessions, [kavalai, peer], args.rounds, args.calls, node, args.slice)
                    print(_row(f"{client:7} {sessions:3}", found), flush=True)
        if args.part == "table":
            return
        print()
        print("stateless, aiohttp, 32 sessions: kavalai --workers 1 | --workers 2 | FastMCP stateless")
        async with (
            kavalai_server(folder, "--stateless") as one,
            kavalai_server(folder, "--stateless", "--workers", "2") as two,
            fastmcp_server(folder, stateless=True) as peer,
        ):
            found = await compare("aiohttp", 32, [one, two, peer], args.rounds, args.calls, None, args.slice)
        for label, figures in zip(("--workers 1", "--workers 2", "FastMCP"), found, strict=True):
            print(
                f"{label:12} p50 {figures.p50_ms:6.2f} ms  p99 {figures.p99_ms:6.2f} ms  "
                f"{figures.calls_per_second:6.0f} calls/s  server CPU {figures.cpu_ms_per_call:5.2f} ms/call  "
                f"load generator CPU {figures.client_cpu_share:4.0%} of a core"
            )
        cores = os.cpu_count() or 1
        print(
            f"--workers 2 / --workers 1: {found[1].calls_per_second / found[0].calls_per_second:.2f}x calls/s; "
            f"--workers 2 / FastMCP: {found[1].calls_per_second / found[2].calls_per_second:.2f}x; "
            f"the most this generator allows on {cores} cores: {workers_ceiling(found[0], cores):.2f}x"
        )


def workers_ceiling(one: Figures, cores: int) -> float:
    """The most ``--workers 2`` can gain over one worker on ``cores`` cores shared with this load generator, from one
    worker's server CPU a call (s) and the generator's (c), each process single-threaded: one worker serves at
    most min(1/s, 1/c, cores/(s+c)) calls/s, two at most min(2/s, 1/c, cores/(s+c)). With the generator taking 0.4
    of what the server takes a call, on two cores, the bound is 1.43x; 1.3x needs c at most 0.54 s."""
    server = one.cpu_ms_per_call / 1000
    client = one.client_cpu_share / one.calls_per_second
    shared = cores / (server + client)
    return min(2 / server, 1 / client, shared) / min(1 / server, 1 / client, shared)


if __name__ == "__main__":
    asyncio.run(main())
