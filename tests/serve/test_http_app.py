"""Issue 40: the gateway's HTTP application hands a request to its endpoint's path straight to the SDK's endpoint,
not through Starlette's middleware and router (per-request cost found by profiling under 32 sessions); every other
request (another path, the lifespan) still goes through the SDK's Starlette application.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from typing import Annotated

import httpx2
import mcp_types as types
import pytest
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from starlette.applications import Starlette
from tests.test_listen import _add, gateway

from kavalai import FunctionKernel, pythontool
from kavalai.serve import build_mcp_server
from kavalai.serve._transports import _direct, http_app, serve_http

pytestmark = pytest.mark.timeout(120)


def test_the_endpoint_is_reached_without_starlettes_router() -> None:
    """With the SDK as it is, the application is the direct dispatch around the SDK's one-route application (an
    SDK whose application has another shape gets its application unchanged, tested below)."""
    app = http_app(build_mcp_server(FunctionKernel()))
    assert not isinstance(app, Starlette)
    assert app.__qualname__ == "_direct.<locals>.direct"


def test_an_application_of_another_shape_is_left_as_it_is() -> None:
    from starlette.routing import Route

    endpoint = StreamableHTTPASGIApp(None)  # type: ignore[arg-type]  # never called
    server = build_mcp_server(FunctionKernel())
    two_routes = Starlette(routes=[Route("/mcp", endpoint=endpoint), Route("/other", endpoint=endpoint)])
    assert _direct(server, two_routes, "/mcp") is two_routes
    another_path = Starlette(routes=[Route("/elsewhere", endpoint=endpoint)])
    assert _direct(server, another_path, "/mcp") is another_path
    methods = Starlette(routes=[Route("/mcp", endpoint=lambda request: None, methods=["POST"])])
    assert _direct(server, methods, "/mcp") is methods


@pytest.mark.parametrize("stateless", [False, True])
async def test_calls_are_answered_and_other_paths_still_get_starlettes_404(stateless: bool) -> None:
    async with gateway(stateless=stateless) as url, httpx2.AsyncClient(timeout=30) as http:
        headers = {"Accept": "application/json, text/event-stream"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        answer = await http.post(url, json=init, headers=headers)
        assert answer.status_code == 200
        if not stateless:
            headers["mcp-session-id"] = answer.headers["mcp-session-id"]
            headers["mcp-protocol-version"] = "2025-06-18"
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "python_add"}}
        call["params"]["arguments"] = {"a": 40, "b": 2}
        answer = await http.post(url, json=call, headers=headers)
        assert answer.status_code == 200
        assert '"structuredContent":{"result":42}' in answer.text.replace(" ", "")
        missing = await http.get(url.removesuffix("/mcp") + "/elsewhere")
        assert (missing.status_code, missing.text) == (404, "Not Found")  # Starlette's router answered


@pythontool
def _region(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Echo the region, which a 2026-07-28 client also sends as the header ``Mcp-Param-Region``."""
    return region


def test_only_a_schema_declaring_headers_is_handed_to_the_sdks_header_check() -> None:
    """The SDK walks the schema it is handed twice per 2026-07-28 call (found by profiling under 32 sessions): a
    tool declaring no ``x-mcp-header`` hands it none, as there is nothing to check; one declaring it hands its."""
    kernel = FunctionKernel()
    kernel.register_python_tool("add", _add)
    kernel.register_python_tool("region", _region)
    lookup = build_mcp_server(kernel).get_tool_input_schema
    assert lookup is not None
    assert lookup("python_add") is None
    declared = lookup("python_region")
    assert declared is not None
    assert declared["properties"]["region"]["x-mcp-header"] == "Region"
    assert lookup("python_none") is None


@pytest.mark.parametrize(("header", "refused"), [("eu-west", False), ("us-east", True)])
async def test_a_declared_header_is_still_checked_against_the_argument(header: str, refused: bool) -> None:
    """Through the HTTP gateway, a 2026-07-28 call whose ``Mcp-Param-Region`` header disagrees with its argument is
    refused by the SDK's check (the header a router may have routed on is not what the tool is given)."""
    kernel = FunctionKernel()
    kernel.register_python_tool("region", _region)
    version = MODERN_PROTOCOL_VERSIONS[-1]
    meta = {types.PROTOCOL_VERSION_META_KEY: version, types.CLIENT_CAPABILITIES_META_KEY: {}}
    params = {"name": "python_region", "arguments": {"region": "eu-west"}, "_meta": meta}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "python_region",
        "Mcp-Param-Region": header,
    }
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_http(kernel, port=0, on_ready=ready.set_result))
    try:
        url = await asyncio.wait_for(asyncio.shield(ready), 30)
        async with httpx2.AsyncClient(timeout=30) as http:
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            answer = await http.post(url, json=call, headers=headers)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    text = answer.text.replace(" ", "")
    if refused:
        assert "Mcp-Param-Region" in answer.text, answer.text
        assert f'"code":{types.HEADER_MISMATCH}' in text, answer.text
    else:
        assert '"structuredContent":{"result":"eu-west"}' in text, answer.text


_TRACED_CHILD = """
import asyncio
from mcp.client import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from kavalai import FunctionKernel, pythontool
from kavalai.serve import build_mcp_server

@pythontool
def trace_id() -> str:
    \"\"\"The trace of the call.\"\"\"
    return format(trace.get_current_span().get_span_context().trace_id, "032x")

async def main() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("trace_id", trace_id)
    meta = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    async with Client(build_mcp_server(kernel)) as client:
        for _ in range(2):
            result = await client.call_tool("python_trace_id", {}, meta=meta)
            print(result.structured_content["result"])
            trace.set_tracer_provider(TracerProvider())  # set while serving: honoured from the next request on

asyncio.run(main())
"""


def test_the_sdks_tracing_runs_only_while_a_tracer_provider_is_set() -> None:
    """With no tracer provider the SDK's per-request tracing middleware is skipped (about 3% of the gateway's time
    under 32 sessions; it would record nothing): the client's ``traceparent`` does not become the call's context.
    Once a provider is set, while serving, the next request is traced and continues the client's trace. In a child
    process: the provider is global and set once."""
    done = subprocess.run([sys.executable, "-c", _TRACED_CHILD], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0" * 32, "4bf92f3577b34da6a3ce929d0e0e4736"]
