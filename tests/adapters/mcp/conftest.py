"""Fixtures of the ``mcp://`` tests: real MCP servers (stdio processes, HTTP on 127.0.0.1) and a leak check.

Every stdio server started here carries a unique marker in its environment, which its own children inherit;
after each test (once the kernel is closed) no live process may carry the marker, and the test process may
have no child it did not have before.
"""

from __future__ import annotations

import gc
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.servers.mcp_http import sse_app, streamable_http_app
from tests.servers.uvicorn_server import serve

from kavalai import McpServer

ROOT = Path(__file__).resolve().parents[3]
MARK_VAR = "KAVALAI_TEST_MARK"

StdioFactory = Callable[..., McpServer]


def live_processes_marked(mark: str) -> list[int]:
    """The pids of live (non-zombie) processes whose environment holds ``MARK_VAR=mark``."""
    needle = f"{MARK_VAR}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def live_children() -> set[int]:
    """The pids of the test process's live (non-zombie) child processes."""
    me = str(os.getpid())
    children = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] not in ("Z", "X"):
            children.add(int(entry.name))
    return children


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``predicate()`` holds, at most ``timeout`` seconds (then fail)."""
    with anyio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - a bounded wait on state that no event exposes
            await anyio.sleep(0.01)


def collect_sse_server_streams() -> None:
    """The SDK's SSE *server* (not the client under test) leaves the memory streams of a connection it was serving
    unclosed when it is stopped; collect them here, where their ResourceWarning is known and expected, rather than
    at random in a later test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def open_fds() -> int:
    """How many file descriptors the test process holds."""
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def mark() -> str:
    """This test's process marker."""
    return uuid.uuid4().hex


@pytest.fixture(autouse=True)
def no_leftover_processes(mark: str) -> Iterator[None]:
    """Fail the test if a server process (or a child of one) outlives it."""
    before = live_children()
    yield
    assert live_processes_marked(mark) == []
    assert live_children() <= before


@pytest.fixture
def stdio_server(mark: str) -> StdioFactory:
    """Build the McpServer of a test server module run over stdio (``tests.servers.mcp_tools`` by default)."""

    def build(name: str = "tools", module: str = "tests.servers.mcp_tools", **options: Any) -> McpServer:
        env = {MARK_VAR: mark, **options.pop("env", {})}
        return McpServer(name=name, command=sys.executable, args=["-m", module], cwd=ROOT, env=env, **options)

    return build


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The streamable HTTP endpoint of the test tools on a free 127.0.0.1 port."""
    with serve(streamable_http_app()) as base_url:
        yield f"{base_url}/mcp"


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    """The legacy SSE endpoint of the test tools on a free 127.0.0.1 port."""
    with serve(sse_app()) as base_url:
        yield f"{base_url}/sse"
