"""Progress of the MCP calls a Python tool makes while a host follows it through ``kavalai serve`` (issue 42): an
MCP call made by the tool without a progress callback of its own sends its server's progress to the host's request
that asked, on its token, and only when it rises above what that request was sent (``kavalai.serve._progress``,
:func:`kavalai.adapters.mcp.relaying_progress`); a host that asked for none gets none, and its backend is asked for
none. The backend is a real 2026-07-28 stdio server (``tests/servers/mcp_asked_capabilities.py``: its tool ``counted``
reports 1 and 2 of 2 and says whether it was asked for progress); the hosts are the SDK's client, in process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import pytest_asyncio
from mcp.shared.message import SessionMessage
from tests.serve.test_conformance import ROOT

from kavalai import FunctionKernel, McpServer, pythontool
from kavalai.kernel import current_call
from kavalai.serve import build_mcp_server
from mcp import Client

Seen = list[tuple[float, float | None, str | None]]

pytestmark = pytest.mark.asyncio(loop_scope="module")  # one backend process for the module's tests


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel() -> AsyncIterator[FunctionKernel]:
    """A kernel with the backend and a Python tool calling its ``counted`` twice, after a progress of its own."""
    args = ["-m", "tests.servers.mcp_asked_capabilities"]
    async with FunctionKernel() as kernel:
        server = McpServer(name="asked", command=sys.executable, args=args, cwd=str(ROOT), protocol="2026-07-28")
        kernel.register_mcp_server(server)

        @pythontool
        async def twice() -> str:
            """Report 0.5 of nothing, then call the backend's counted tool twice."""
            call = current_call()
            assert call is not None
            await call.report_progress(0.5, None, "the tool's own")
            first = await kernel.call_tool("mcp://asked.counted", {}, output_type=str)
            await kernel.call_tool("mcp://asked.counted", {})  # counts from 1 again: not above 2, not sent
            return first

        kernel.register_python_tool("nested.twice", twice)
        await kernel.connect()
        yield kernel


@contextlib.asynccontextmanager
async def wired(server: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The gateway's server run on JSON-RPC message streams, as over stdio (the SDK's in-process client of the
    2026-07-28 era sends no progress token: it calls the callback directly), yielding the client's ends."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    async with to_server, server_reads, server_writes, from_server, anyio.create_task_group() as group:
        group.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())
        yield from_server, to_server
        group.cancel_scope.cancel()


async def _call(client: Client, seen: Seen | None) -> str:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        assert seen is not None
        seen.append((progress, total, message))

    callback = on_progress if seen is not None else None
    result = await client.call_tool("python_nested_twice", {}, progress_callback=callback)
    assert not result.is_error, result
    assert result.structured_content is not None
    return str(result.structured_content["result"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_python_tools_nested_mcp_calls_send_progress_to_the_host_that_asked(
    kernel: FunctionKernel, mode: str
) -> None:
    """Two hosts call the tool at once, one asking for progress: it gets the tool's own and the first nested call's
    (the second's counts from 1 again, not above 2: dropped); the other gets none, and its backend calls were asked
    for none."""
    server = build_mcp_server(kernel)
    seen: Seen = []
    texts: dict[str, str] = {}
    async with Client(wired(server), mode=mode) as asking, Client(wired(server), mode=mode) as silent:

        async def run(name: str, client: Client, into: Seen | None) -> None:
            texts[name] = await _call(client, into)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(run, "asking", asking, seen)
                group.start_soon(run, "silent", silent, None)
    assert texts == {"asking": "progress asked: True", "silent": "progress asked: False"}
    assert seen == [(0.5, None, "the tool's own"), (1, 2, "step 1"), (2, 2, "step 2")]
