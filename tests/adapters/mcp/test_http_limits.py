"""Byte limits on what a streamable-HTTP MCP server sends: each refused message fails its own call, at once,
with the limit named, and the connection stays usable."""

from __future__ import annotations

import resource
from collections.abc import AsyncIterator, Iterator

import pytest
from tests.servers.mcp_http_hostile import hostile_http_app
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, FunctionKernelException, McpServer

LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def hostile_url() -> Iterator[str]:
    with serve(hostile_http_app(), lifespan="off") as url:
        yield f"{url}/mcp"


@pytest.fixture
async def kernel(hostile_url: str) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="hostile", url=hostile_url, transport="streamable-http", max_message_bytes=LIMIT, timeout=20)
    )
    yield kernel
    await kernel.close()


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_a_json_answer_over_the_limit_fails_its_call_and_is_not_read_whole(kernel: FunctionKernel) -> None:
    assert (await kernel.call_tool("mcp://hostile.small")).model_dump()  # connected, and a small answer passes
    before = _peak_rss_mib()
    with pytest.raises(FunctionKernelException, match="larger than 1,048,576 bytes .max_message_bytes") as caught:
        await kernel.call_tool("mcp://hostile.big_json", {"size": 300 * 1024 * 1024})
    assert caught.value.uri == "mcp://hostile.big_json"
    # Refused as it came: the error names the byte limit, not the 20 s timeout, and 300 MiB were never buffered.
    assert _peak_rss_mib() - before < 100  # 300 MiB were never buffered
    assert (await kernel.call_tool("mcp://hostile.small")).model_dump()  # the connection is still up


async def test_an_answer_just_under_the_limit_passes(kernel: FunctionKernel) -> None:
    result = await kernel.call_tool("mcp://hostile.big_json", {"size": LIMIT - 200})
    assert len(result.model_dump_json()) > LIMIT - 200


async def test_a_compressed_answer_is_refused_unread(kernel: FunctionKernel) -> None:
    with pytest.raises(FunctionKernelException, match="gzip'-compressed body although asked for an uncompressed"):
        await kernel.call_tool("mcp://hostile.gzipped", {"size": 10})
    assert (await kernel.call_tool("mcp://hostile.small")).model_dump()


async def test_an_event_over_the_limit_fails_its_call(kernel: FunctionKernel) -> None:
    with pytest.raises(FunctionKernelException, match="1048576 byte limit.*max_message_bytes") as caught:
        await kernel.call_tool("mcp://hostile.big_event", {"size": 50 * 1024 * 1024})
    assert caught.value.uri == "mcp://hostile.big_event"  # the limit's error, not the 20 s timeout's
    assert (await kernel.call_tool("mcp://hostile.small")).model_dump()
