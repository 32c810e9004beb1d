"""A person answering an elicitation relayed by ``kavalai serve`` is not the tool's time: the call's own timeout
(the backend's ``McpServer(timeout=...)``) stops while the host's person answers (``kavalai.kernel.deadline_paused``,
as the durable runs' operator questions do), and runs again after. The backend is a real stdio MCP server
(``tests/servers/mcp_features.py``) in either era; the host is the official SDK's client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from tests.serve.test_relay import ROOT, _text

from kavalai import FunctionKernel, McpServer
from kavalai.serve import build_mcp_server

pytestmark = pytest.mark.timeout(120)

OWN_TIMEOUT = 1.0  # the backend's calls' own timeout; the person takes longer to answer
ANSWER_AFTER = 2.5


@pytest.fixture(params=["legacy", "auto"])
async def kernel(request: pytest.FixtureRequest) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    backend = McpServer(
        name="features",
        command=sys.executable,
        args=["-m", "tests.servers.mcp_features"],
        cwd=ROOT,
        timeout=OWN_TIMEOUT,
        protocol=request.param,
    )
    kernel.register_mcp_server(backend)
    yield kernel
    await kernel.close()


async def test_a_person_answering_a_relayed_elicitation_is_not_the_calls_own_time(kernel: FunctionKernel) -> None:
    asked: list[str] = []

    async def slow_person(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        await anyio.sleep(ANSWER_AFTER)  # longer than the call's own timeout
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    server = build_mcp_server(kernel, names="own")
    await kernel.connect()
    async with Client(server, mode="legacy", elicitation_callback=slow_person) as client:
        first = await client.call_tool("greet", {})
        second = await client.call_tool("greet", {})  # the clock of the first call is not left paused
    assert asked == ["Who are you?", "Who are you?"]
    assert first.is_error is not True, _text(first)
    assert _text(first) == "hello Ada"
    assert _text(second) == "hello Ada"
