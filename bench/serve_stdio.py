"""Benchmark: a tool call through ``kavalai serve`` over stdio against the same call made directly, and through
FastMCP's proxy, in the same run.

Run: ``.venv/bin/python bench/serve_stdio.py [--calls N] [--rounds R] [--peer-src DIR]``.

Three stdio MCP servers, each driven by the official SDK's ``ClientSession`` (handshake era), call the ``slugify``
tool of the demo server that ships with kavalai:

- direct: the demo server itself (the floor);
- kavalai: ``kavalai serve --names own`` fronting the demo server (its result passed through as the server sent it);
- FastMCP: FastMCP's ``create_proxy`` fronting the demo server;
- optionally, with ``--peer-src DIR``, ``kavalai serve`` of another checkout (its ``src`` folder), e.g. the main
  branch, to compare two versions of the gateway in one run.

Rounds alternate between the clients (N sequential calls each), so that load from other processes hits all alike;
the figures are the medians of every call. Target: kavalai at most 2.14x direct, and no slower than FastMCP's proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

# Run as a script, this file's directory comes first on sys.path, where bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOL = "slugify"
ARGUMENTS = {"text": "Hello, Gateway World"}
TARGET = 2.14
_DEMO = [sys.executable, "-m", "kavalai.demo.mcp_server"]
_PROXY = """
import sys
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

create_proxy(StdioTransport(sys.argv[1], sys.argv[2:]), name="proxy").run(show_banner=False)
"""


def _commands(folder: Path, peer_src: str | None) -> dict[str, tuple[list[str], dict[str, str]]]:
    config = folder / "tools.yaml"
    demo = {"name": "demo", "command": _DEMO[0], "args": _DEMO[1:], "env": {"PYTHONPATH": str(ROOT / "src")}}
    config.write_text(json.dumps({"mcp_servers": [demo]}), encoding="utf-8")
    proxy = folder / "proxy.py"
    proxy.write_text(_PROXY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    serve = [sys.executable, "-m", "kavalai.cli._serve", str(config)]
    found = {
        "direct": (_DEMO, env),
        "kavalai": ([*serve, "--names", "own"], env),
        "FastMCP": ([sys.executable, str(proxy), *_DEMO], env),
    }
    if peer_src is not None:  # another checkout's gateway (without --names, which it may not know)
        found["kavalai (peer)"] = (serve, {**os.environ, "PYTHONPATH": peer_src})
    return found


@contextlib.asynccontextmanager
async def _session(command: list[str], env: dict[str, str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(ROOT))
    with _devnull() as errlog:
        async with stdio_client(params, errlog=errlog) as (reads, writes), ClientSession(reads, writes) as session:
            await session.initialize()
            yield session


def _devnull() -> TextIO:
    """Where the servers' stderr goes (a device, nothing to wait for)."""
    return open(os.devnull, "w")  # the caller closes it (its with)


async def _tool_name(session: ClientSession) -> str:
    names = [tool.name for tool in (await session.list_tools()).tools]
    return next(name for name in names if name == TOOL or name.endswith(f"_{TOOL}"))


async def _round(session: ClientSession, name: str, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await session.call_tool(name, ARGUMENTS)
        times.append(time.perf_counter() - start)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
    return times


async def main(calls: int, rounds: int, peer_src: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        commands = _commands(Path(tmp), peer_src)
        async with contextlib.AsyncExitStack() as stack:
            sessions = {label: await stack.enter_async_context(_session(*cmd)) for label, cmd in commands.items()}
            names = {label: await _tool_name(session) for label, session in sessions.items()}
            for label, session in sessions.items():
                await _round(session, names[label], 50)  # warm up
            samples: dict[str, list[float]] = {label: [] for label in sessions}
            for _ in range(rounds):
                for label, session in sessions.items():
                    samples[label].extend(await _round(session, names[label], calls))
    floor = statistics.median(samples["direct"])
    print(f"one tools/call of {TOOL!r} over stdio, {rounds} alternating rounds of {calls} calls; median per call")
    for label, times in samples.items():
        median = statistics.median(times)
        print(f"  {label:<16} {median * 1e3:7.3f} ms   {median / floor:5.2f}x direct")
    ours = statistics.median(samples["kavalai"]) / floor
    peer = statistics.median(samples["FastMCP"]) / floor
    verdict = "ok" if ours <= TARGET and ours <= peer else "OVER TARGET"
    print(f"  target: kavalai <= {TARGET}x direct and <= FastMCP's proxy ({peer:.2f}x): {ours:.2f}x  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="calls per client and round (default 200)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--peer-src", default=None, help="the src folder of another kavalai checkout to compare")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds, args.peer_src))
