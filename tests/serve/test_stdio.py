"""``kavalai serve`` over stdio read and written on the event loop (``kavalai.serve._stdio``).

Real subprocesses driven by real hosts: the official SDK's client and FastMCP's over pipes (the event-loop path),
and raw JSON-RPC lines with stdin a regular file, which cannot be polled (the SDK's thread-based stdio).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from kavalai.serve._stdio import polls

TOOLS_MODULE = '''
"""Python tools for the served kernel."""

import os
import threading


async def threads() -> list[str]:
    """The names of the process's threads now."""
    return sorted(thread.name for thread in threading.enumerate())


async def echo(text: str) -> str:
    """Return the text."""
    return text


async def noisy(text: str) -> str:
    """Write the text on stdout (the Python object and descriptor 1), then return it."""
    print("stray print", text, flush=True)
    os.write(1, b"stray write\\n")
    return text
'''

BIG = "x" * 300_000  # far over the default 64 KiB line limit of asyncio's stream readers


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A configuration of three async Python tools."""
    (tmp_path / "stdio_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    functions = [{"function": f"stdio_tools.{name}", "name": name} for name in ("threads", "echo", "noisy")]
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"python_functions": functions}), encoding="utf-8")
    return path


def _command(config: Path) -> list[str]:
    return [sys.executable, "-m", "kavalai.cli._serve", str(config), "--names", "own"]


@contextlib.asynccontextmanager
async def _sdk_client(config: Path) -> AsyncIterator[Client]:
    command = _command(config)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(config.parent))
    with (config.parent / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


async def test_the_sdk_client_is_served_without_io_threads(config: Path) -> None:
    with anyio.fail_after(60):
        async with _sdk_client(config) as client:
            threads = (await client.call_tool("threads", {})).structured_content["result"]
            # the SDK's stdio reads stdin in an anyio worker thread, blocked there for the whole serving
            assert threads == ["MainThread"], threads
            echoed = await client.call_tool("echo", {"text": BIG})
            assert echoed.structured_content == {"result": BIG}
            results: list[Any] = [None] * 20

            async def call(index: int) -> None:
                results[index] = await client.call_tool("echo", {"text": f"{index}-{BIG}"})

            async with anyio.create_task_group() as group:  # many large answers in flight on one pipe
                for index in range(20):
                    group.start_soon(call, index)
            assert [result.structured_content["result"] for result in results] == [f"{i}-{BIG}" for i in range(20)]
            noisy = await client.call_tool("noisy", {"text": "still the protocol"})
            assert noisy.structured_content == {"result": "still the protocol"}
    stderr = (config.parent / "stderr.log").read_text()
    assert "stray print still the protocol" in stderr  # stdout pointed at stderr while serving
    assert "stray write" in stderr


async def test_fastmcp_client_over_stdio(config: Path) -> None:
    import fastmcp
    from fastmcp.client.transports import StdioTransport

    command = _command(config)
    transport = StdioTransport(command=command[0], args=command[1:], cwd=str(config.parent), keep_alive=False)
    with anyio.fail_after(60):
        async with fastmcp.Client(transport) as client:
            assert (await client.call_tool("threads", {})).data == ["MainThread"]
            assert (await client.call_tool("echo", {"text": BIG})).data == BIG
            assert {tool.name for tool in await client.list_tools()} == {"threads", "echo", "noisy"}


def _lines(*requests: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(request).encode() + b"\n" for request in requests)


_OPENING = (
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "file", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
)


def test_a_stdout_that_cannot_be_polled_is_served_by_the_sdks_stdio(config: Path, tmp_path: Path) -> None:
    answers_file = tmp_path / "answers.jsonl"
    threads = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "threads", "arguments": {}}}
    echo = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": BIG}}}
    with answers_file.open("wb") as stdout:
        assert not polls(stdout.fileno())
        process = subprocess.Popen(
            _command(config), stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.DEVNULL, cwd=str(config.parent)
        )
        try:
            assert process.stdin is not None
            process.stdin.write(_lines(*_OPENING, threads, echo))
            process.stdin.flush()
            answers = _wait_for_answers(answers_file, 3)
            process.stdin.close()
            assert process.wait(timeout=60) == 0
        finally:
            process.kill()
    # the SDK's stdio: its reader thread is there
    assert any("AnyIO worker thread" in name for name in answers[2]["result"]["structuredContent"]["result"])
    assert answers[3]["result"]["structuredContent"] == {"result": BIG}


def _wait_for_answers(path: Path, count: int) -> dict[int, Any]:
    """The answers written to ``path`` once there are ``count`` whole lines (a generous bounded wait)."""
    for _ in range(3000):
        lines = path.read_bytes().split(b"\n")[:-1]
        if len(lines) >= count:
            return {answer["id"]: answer for answer in map(json.loads, lines)}
        time.sleep(0.02)
    raise AssertionError(f"{count} answers were not written: {path.read_text()}")


def test_polls_tells_pipes_from_files(tmp_path: Path) -> None:
    reading, writing = os.pipe()
    try:
        assert polls(reading)
        assert polls(writing)
    finally:
        os.close(reading)
        os.close(writing)
    with (tmp_path / "file").open("wb") as file:
        assert not polls(file.fileno())
    assert not polls(987654)  # not open
