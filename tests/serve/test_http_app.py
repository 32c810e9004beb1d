"""Issue 40: the gateway's HTTP application hands a request to its endpoint's path straight to the SDK's endpoint,
not through Starlette's middleware and router (per-request cost found by profiling under 32 sessions); every other
request (another path, the lifespan) still goes through the SDK's Starlette application.
"""

from __future__ import annotations

import httpx2
import pytest
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.applications import Starlette
from tests.test_listen import gateway

from kavalai import FunctionKernel
from kavalai.serve import build_mcp_server
from kavalai.serve._transports import _direct, http_app

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
    two_routes = Starlette(routes=[Route("/mcp", endpoint=endpoint), Route("/other", endpoint=endpoint)])
    assert _direct(two_routes, "/mcp") is two_routes
    another_path = Starlette(routes=[Route("/elsewhere", endpoint=endpoint)])
    assert _direct(another_path, "/mcp") is another_path
    methods = Starlette(routes=[Route("/mcp", endpoint=lambda request: None, methods=["POST"])])
    assert _direct(methods, "/mcp") is methods


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
