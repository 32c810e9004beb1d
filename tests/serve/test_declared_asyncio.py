"""Issue 40 (CPU per call): while ``serve_http`` serves, the loop's thread declares ``asyncio`` to sniffio, so that
anyio's many questions per call (which library runs?) are answered from an attribute, not by looking for the current
task; the declaration stays on that thread (a sync tool's worker thread can still ``anyio.run``) and ends with the
serving."""

from __future__ import annotations

import anyio
import pytest
import sniffio
from mcp.client import Client
from tests.test_listen import gateway

from kavalai import pythontool

pytestmark = pytest.mark.timeout(120)


@pythontool
async def declared() -> str:
    """What the loop's thread declares to sniffio (on the loop)."""
    return str(sniffio.thread_local.name)


@pythontool
def nested_run() -> str:
    """Run an anyio loop of its own on the worker thread, as a sync tool may."""

    async def library() -> str:
        return sniffio.current_async_library()

    return anyio.run(library)


async def test_the_loop_thread_declares_asyncio_while_serving_and_a_worker_thread_does_not() -> None:
    assert sniffio.thread_local.name is None
    async with gateway(extra_tools={"declared": declared, "nested_run": nested_run}) as url, Client(url) as client:
        on_loop = await client.call_tool("python_declared", {})
        in_worker = await client.call_tool("python_nested_run", {})
    assert on_loop.structured_content == {"result": "asyncio"}
    assert not in_worker.is_error, in_worker  # anyio.run refuses to start where a library is declared
    assert in_worker.structured_content == {"result": "asyncio"}
    assert sniffio.thread_local.name is None  # the serving's end took the declaration back
