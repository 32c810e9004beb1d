"""Fixtures of the workflow tests: a kernel with small real Python tools, and the example REST API."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel, McpServer, pythontool

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def make_flaky(failures: int, error: type[Exception] = RuntimeError) -> tuple[Callable[..., Any], list[int]]:
    """A tool that raises ``error`` on its first ``failures`` calls, then returns ``x * 10``; and its call log."""
    calls: list[int] = []

    @pythontool
    async def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) <= failures:
            raise error(f"transient failure {len(calls)}")
        return x * 10

    return flaky, calls


class Pair(BaseModel):
    """Two numbers."""

    left: int
    right: int


@pythontool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pythontool
def inc(x: int) -> int:
    """Add one."""
    return x + 1


@pythontool
def split(pair: str) -> Pair:
    """'3,4' -> Pair(left=3, right=4)."""
    left, right = pair.split(",")
    return Pair(left=int(left), right=int(right))


@pythontool
def words(text: str) -> list[str]:
    """Split a text into words."""
    return text.split()


@pythontool
def label(n: int) -> str:
    """A label for a number; returns a number-looking string for 7."""
    return "seven" if n == 7 else str(n)


@pythontool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {reason}")


@pythontool
async def hang() -> str:
    """Never returns; sets ``EVENTS["hang.started"]`` on entry and ``EVENTS["hang.ended"]`` when cancelled."""
    EVENTS.setdefault("hang.started", anyio.Event()).set()
    try:
        await anyio.Event().wait()
    finally:
        EVENTS.setdefault("hang.ended", anyio.Event()).set()
    return "unreachable"  # pragma: no cover


@pythontool
async def meet(mine: str, theirs: str) -> str:
    """Set this branch's event and wait for the other branch's one: only concurrent branches get through."""
    EVENTS.setdefault(mine, anyio.Event()).set()
    await EVENTS.setdefault(theirs, anyio.Event()).wait()
    return f"{mine} met {theirs}"


EVENTS: dict[str, anyio.Event] = {}


async def wait_for(name: str) -> None:
    """Wait (at most 10 s) until ``EVENTS[name]`` is set."""
    with anyio.fail_after(10):
        await EVENTS.setdefault(name, anyio.Event()).wait()


@pytest.fixture
async def tools_kernel() -> AsyncIterator[FunctionKernel]:
    """A kernel with the small Python tools above at ``python://t.<name>``."""
    EVENTS.clear()
    kernel = FunctionKernel()
    for func in (add, inc, split, words, label, explode, hang, meet):
        kernel.register_python_tool(f"t.{func.__name__}", func)
    try:
        yield kernel
    finally:
        await kernel.close()


def text_mcp_server(name: str = "text") -> McpServer:
    """The example stdio MCP server (word_count, top_words), run with this interpreter."""
    return McpServer(name=name, command=sys.executable, args=[str(EXAMPLES / "text_mcp_server.py")])


@pytest.fixture
async def text_api_url() -> AsyncIterator[str]:
    """The example REST API served on a free 127.0.0.1 port."""
    from aiohttp import web
    from examples.text_api import create_app

    runner = web.AppRunner(create_app(), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()
