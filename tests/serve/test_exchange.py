"""Issue 40: a 2026-07-28 client's ``tools/call`` and ``tools/list`` over HTTP are answered in the request's own task
(``kavalai.serve._exchange``), and every answer is the SDK's: each request of a set of ordinary and hostile ones is
sent to the gateway twice, once served with the fast path and once without it (uvicorn's own protocol gives the
request no way to learn that its client is gone, so it all goes to the SDK), and the answers compared. A call's
progress, a client leaving mid-call, a call silent past the ping interval, and the SDK's and FastMCP's clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import uvicorn
from mcp.client import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from tests.test_listen import _add

from kavalai import FunctionKernel, pythontool
from kavalai._listen import listening_socket
from kavalai.kernel import current_call
from kavalai.serve import _exchange, build_mcp_server
from kavalai.serve._exchange import SingleExchange
from kavalai.serve._transports import http_app, uvicorn_config

pytestmark = pytest.mark.timeout(120)

VERSION = MODERN_PROTOCOL_VERSIONS[-1]
META = {types.PROTOCOL_VERSION_META_KEY: VERSION, types.CLIENT_CAPABILITIES_META_KEY: {}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN = {**HEADERS, "MCP-Protocol-Version": VERSION}
LISTS = {**MODERN, "Mcp-Method": "tools/list"}


def calls(name: str) -> dict[str, str]:
    """The headers of a 2026-07-28 call of ``name``."""
    return {**MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}


@pythontool
def fails(reason: str) -> str:
    """Always fail with the reason given."""
    raise ValueError(reason)


@pythontool
async def count(n: int) -> int:
    """Count to n, reporting progress at each step."""
    call = current_call()
    assert call is not None
    for i in range(n):
        await call.report_progress(i + 1, n, f"step {i + 1}")
    return n


#: What each waiting call (by its key) is at: "started", "go" (told to end), "cancelled".
MARKS: dict[str, str] = {}


@pythontool
async def wait(key: str) -> str:
    """Mark the call started; return once its mark says 'go'; mark it 'cancelled' when cancelled."""
    MARKS[key] = "started"
    try:
        while MARKS[key] != "go":  # noqa: ASYNC110 - the test's side sets the mark
            await anyio.sleep(0.01)
    except anyio.get_cancelled_exc_class():
        MARKS[key] = "cancelled"
        raise
    return "finished"


@contextlib.asynccontextmanager
async def served(*, fast: bool) -> AsyncIterator[str]:
    """The gateway's HTTP application on a free port of this loop, with its own protocol (``fast``) or uvicorn's
    (no client-gone hook: every request goes to the SDK); yields the endpoint URL."""
    kernel = FunctionKernel()
    for name, tool in {"add": _add, "fails": fails, "count": count, "wait": wait}.items():
        kernel.register_python_tool(name, tool)
    config = uvicorn_config(http_app(build_mcp_server(kernel)))
    if not fast:
        config.http = "httptools"
    server = uvicorn.Server(config)
    with listening_socket("127.0.0.1", 0) as sock:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            while not server.started:
                await asyncio.sleep(0.01)
                assert not serving.done(), serving
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            server.should_exit = True
            await serving


def call(name: str, arguments: Any, request_id: Any = 1, **meta: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": {**META, **meta}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


LISTING = {"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": META}}
#: (label, headers, body): ordinary requests, then ones the fast path must leave to the SDK or answer as it does.
CASES: list[tuple[str, dict[str, str], bytes]] = [
    ("call", calls("python_add"), json.dumps(call("python_add", {"a": 40, "b": 2})).encode()),
    ("string id", calls("python_add"), json.dumps(call("python_add", {"a": 1, "b": 2}, "x")).encode()),
    ("listing", LISTS, json.dumps(LISTING).encode()),
    ("unknown tool", calls("python_nope"), json.dumps(call("python_nope", {})).encode()),
    ("invalid arguments", calls("python_add"), json.dumps(call("python_add", {"a": "x"})).encode()),
    ("failing tool", calls("python_fails"), json.dumps(call("python_fails", {"reason": "no"})).encode()),
    ("arguments not an object", calls("python_add"), json.dumps(call("python_add", [1, 2])).encode()),
    ("not json", MODERN, b'{"jsonrpc": "2.0", "id": 1,'),
    ("batch", MODERN, json.dumps([call("python_add", {"a": 1, "b": 2})]).encode()),
    ("notification", MODERN, json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {}}).encode()),
    ("null id", calls("python_add"), json.dumps(call("python_add", {"a": 1, "b": 2}, None)).encode()),
    ("bool id", calls("python_add"), json.dumps(call("python_add", {"a": 1, "b": 2}, True)).encode()),
    (
        "wrong jsonrpc",
        calls("python_add"),
        json.dumps({**call("python_add", {"a": 1, "b": 2}), "jsonrpc": "1.0"}).encode(),
    ),
    ("no _meta", LISTS, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()),
    (
        "params not an object",
        LISTS,
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 3}).encode(),
    ),
    (
        "other method",
        {**MODERN, "Mcp-Method": "ping"},
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": META}}).encode(),
    ),
    ("no routing headers", MODERN, json.dumps(call("python_add", {"a": 1, "b": 2})).encode()),
    ("unsupported version", {**LISTS, "MCP-Protocol-Version": "2099-01-01"}, json.dumps(LISTING).encode()),
    ("version mismatch", {**LISTS, "MCP-Protocol-Version": "2026-07-29"}, json.dumps(LISTING).encode()),
    ("json only accepted", {**LISTS, "Accept": "application/json"}, json.dumps(LISTING).encode()),
    ("stream only accepted", {**LISTS, "Accept": "text/event-stream"}, json.dumps(LISTING).encode()),
    ("text content type", {**LISTS, "Content-Type": "text/plain"}, json.dumps(LISTING).encode()),
    ("foreign host", {**LISTS, "Host": "evil.example"}, json.dumps(LISTING).encode()),
    ("foreign origin", {**LISTS, "Origin": "http://evil.example"}, json.dumps(LISTING).encode()),
    ("method header disagrees", {**LISTS}, json.dumps(call("python_add", {})).encode()),
    ("name header disagrees", calls("python_fails"), json.dumps(call("python_add", {})).encode()),
    (
        "too large",
        calls("python_add"),
        json.dumps(call("python_add", {"a": 1, "b": 2, "pad": "x" * (4 * 1024 * 1024)})).encode(),
    ),
]


async def _answers(
    url: str, sending: Callable[[httpx2.AsyncClient, str, str, dict[str, str], bytes], Any]
) -> list[Any]:
    async with httpx2.AsyncClient(timeout=60) as http:
        return [await sending(http, url, label, headers, body) for label, headers, body in CASES]


async def _post(http: httpx2.AsyncClient, url: str, label: str, headers: dict[str, str], body: bytes) -> Any:
    answer = await http.post(url, content=body, headers=headers)
    kind = answer.headers.get("content-type", "")
    try:
        parsed: Any = answer.json()
    except ValueError:
        parsed = answer.text
    return label, answer.status_code, kind.split(";")[0], parsed


async def test_every_answer_of_the_fast_path_is_the_sdks(monkeypatch: pytest.MonkeyPatch) -> None:
    answered: list[str] = []
    original = SingleExchange._exchange

    async def spied(self: SingleExchange, scope: Any, receive: Any, body: bytes) -> Any:
        exchange = await original(self, scope, receive, body)
        if exchange is not None:
            answered.append(json.loads(body)["method"])
        return exchange

    monkeypatch.setattr(SingleExchange, "_exchange", spied)
    async with served(fast=False) as url:
        sdk = await _answers(url, _post)
    assert answered == []
    async with served(fast=True) as url:
        fast = await _answers(url, _post)
    for mine, theirs in zip(fast, sdk, strict=True):
        assert mine == theirs
    # the ordinary calls and listings were answered here (the unknown tool and the failing one too: dispatch)
    assert len(answered) == 7, answered
    assert {row[0]: row[1] for row in fast}["call"] == 200
    assert fast[0][3]["result"]["structuredContent"] == {"result": 42}


async def test_a_body_in_chunks_is_answered() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        body = json.dumps(call("python_add", {"a": 2, "b": 3})).encode()
        for at in range(0, len(body), 7):
            yield body[at : at + 7]

    async with served(fast=True) as url, httpx2.AsyncClient(timeout=60) as http:
        answer = await http.post(url, content=chunks(), headers=calls("python_add"))
    assert answer.status_code == 200
    assert answer.json()["result"]["structuredContent"] == {"result": 5}


def _events(text: str) -> list[Any]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


async def test_a_calls_progress_makes_its_answer_a_stream_as_the_sdks() -> None:
    body = json.dumps(call("python_count", {"n": 3}, 7, progressToken="p")).encode()
    streams = []
    for fast in (True, False):
        async with served(fast=fast) as url, httpx2.AsyncClient(timeout=60) as http:
            answer = await http.post(url, content=body, headers=calls("python_count"))
            assert answer.headers["content-type"].startswith("text/event-stream")
            streams.append(_events(answer.text))
    assert streams[0] == streams[1]
    progress = [event["params"]["progress"] for event in streams[0] if event.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]
    assert streams[0][-1]["id"] == 7
    assert streams[0][-1]["result"]["structuredContent"] == {"result": 3}


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 - a mark or a callback, no event to wait on
        await asyncio.sleep(0.01)


async def test_a_client_leaving_mid_call_cancels_the_call() -> None:
    async with served(fast=True) as url:
        host, port = url.removeprefix("http://").removesuffix("/mcp").split(":")
        body = json.dumps(call("python_wait", {"key": "leaving"})).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in calls("python_wait").items())
        request = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{head}Content-Length: {len(body)}\r\n\r\n"
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request.encode() + body)
        await writer.drain()
        await _until(lambda: MARKS.get("leaving") == "started")
        writer.close()
        await _until(lambda: MARKS["leaving"] == "cancelled")
        assert await reader.read() == b""  # nothing was answered
        async with httpx2.AsyncClient(timeout=60) as http:  # and the gateway serves on
            answer = await http.post(url, json=call("python_add", {"a": 1, "b": 1}), headers=calls("python_add"))
        assert answer.json()["result"]["structuredContent"] == {"result": 2}


async def test_a_client_leaving_with_a_call_pipelined_behind_one_in_flight_cancels_the_one_in_flight() -> None:
    async with served(fast=True) as url:
        host, port = url.removeprefix("http://").removesuffix("/mcp").split(":")
        requests = []
        for name, arguments in (("python_wait", {"key": "piped"}), ("python_add", {"a": 1, "b": 1})):
            body = json.dumps(call(name, arguments)).encode()
            head = "".join(f"{header}: {value}\r\n" for header, value in calls(name).items())
            line = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{head}Content-Length: {len(body)}\r\n\r\n"
            requests.append(line.encode() + body)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(requests[0])
        await writer.drain()
        await _until(lambda: MARKS.get("piped") == "started")
        writer.write(requests[1])  # its head read while the first call runs
        await writer.drain()
        await asyncio.sleep(0.2)  # (not a bound: the assertion below waits whatever the time)
        writer.close()
        await _until(lambda: MARKS["piped"] == "cancelled")
        assert await reader.read() == b""


async def test_a_call_silent_past_the_ping_interval_is_a_stream_that_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_exchange, "PING_SECONDS", 0.05)
    async with served(fast=True) as url, httpx2.AsyncClient(timeout=60) as http:
        body = json.dumps(call("python_wait", {"key": "silent"}, 3))
        async with http.stream("POST", url, content=body, headers=calls("python_wait")) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            text = ""
            async for chunk in answer.aiter_text():
                text += chunk
                if ": ping" in text and MARKS.get("silent") == "started":
                    MARKS["silent"] = "go"  # the ping came while the tool waited: now let it end
    assert ": ping" in text
    [event] = _events(text)
    assert (event["id"], event["result"]["structuredContent"]) == (3, {"result": "finished"})


async def test_the_sdks_client_and_fastmcps_are_answered_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import fastmcp
    from fastmcp.client.transports import StreamableHttpTransport

    answered: list[str] = []
    original = SingleExchange._exchange

    async def spied(self: SingleExchange, scope: Any, receive: Any, body: bytes) -> Any:
        exchange = await original(self, scope, receive, body)
        answered.append("fast" if exchange is not None else "sdk")
        return exchange

    monkeypatch.setattr(SingleExchange, "_exchange", spied)
    async with served(fast=True) as url:
        async with Client(url) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} >= {"python_add", "python_count"}
            result = await client.call_tool("python_add", {"a": 20, "b": 22})
            assert result.structured_content == {"result": 42}
            seen: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append(progress)

            counted = await client.call_tool("python_count", {"n": 2}, progress_callback=on_progress)
            assert counted.structured_content == {"result": 2}
            await _until(lambda: seen == [1, 2])
        sdk_answers = list(answered)
        assert sdk_answers.count("fast") >= 3, sdk_answers
        async with fastmcp.Client(StreamableHttpTransport(url)) as peer:
            added = await peer.call_tool("python_add", {"a": 1, "b": 2})
            assert added.structured_content == {"result": 3}
