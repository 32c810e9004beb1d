"""MCP servers over HTTP on 127.0.0.1: streamable HTTP (the default) and legacy SSE."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from tests.adapters.mcp.conftest import collect_sse_server_streams, wait_until
from tests.servers.mcp_http import SessionForgettingApp, sse_app, streamable_http_app
from tests.servers.uvicorn_server import ServerThread, serve

from kavalai import (
    FunctionKernel,
    FunctionKernelException,
    McpServer,
    ServerConnectionError,
    ToolExecutionError,
    ToolTimeoutError,
)


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_http_server_tools(kernel: FunctionKernel, http_url: str, sse_url: str, transport: str) -> None:
    url = sse_url if transport == "sse" else http_url
    server = McpServer(
        name="web", url=url, transport="sse" if transport == "sse" else None, headers={"X-Kavalai-Test": "hdr-1"}
    )
    kernel.register_mcp_server(server)
    await kernel.connect_mcp_servers()
    state = kernel.get_mcp_server_state("web")
    assert (state.status, state.transport, state.pid) == ("connected", transport, None)

    assert (await kernel.call_tool("mcp://web.add", {"a": 20, "b": "22"})).model_dump() == {"result": 42}
    weather = await kernel.call_tool("mcp://web.weather", {"city": "Rome"})
    assert weather.model_dump()["conditions"] == ["sunny", "breezy"]
    header = await kernel.call_tool("mcp://web.header", {"name": "x-kavalai-test"})
    assert header.model_dump() == {"result": "hdr-1"}  # configured headers reach the server
    with pytest.raises(ToolExecutionError, match="refused: nope"):
        await kernel.call_tool("mcp://web.fail", {"reason": "nope"})

    await kernel.close()
    assert kernel.get_mcp_server_state("web").status == "closed"
    assert (await kernel.call_tool("mcp://web.echo", {"text": "again"})).model_dump() == {"result": "again"}


async def test_http_call_times_out(kernel: FunctionKernel, http_url: str) -> None:
    kernel.register_mcp_server(McpServer(name="web", url=http_url, timeout=0.3))
    with pytest.raises(ToolTimeoutError, match=r"mcp://web.sleep timed out after 0.3 s"):
        await kernel.call_tool("mcp://web.sleep", {"seconds": 30})
    assert (await kernel.call_tool("mcp://web.add", {"a": 1, "b": 1})).model_dump() == {"result": 2}


async def test_unreachable_url_names_the_server_without_secrets(kernel: FunctionKernel) -> None:
    server = McpServer(
        name="gone",
        url="http://127.0.0.1:9/mcp?api_key=qs-secret-1",
        headers={"Authorization": "Bearer hdr-secret-2"},
        connect_timeout=5,
    )
    kernel.register_mcp_server(server)
    with anyio.fail_after(20), pytest.raises(ServerConnectionError) as info:
        await kernel.connect_mcp_servers()
    message = str(info.value)
    assert info.value.server == "gone"
    assert "MCP server 'gone' (streamable-http: http://127.0.0.1:9/mcp)" in message
    assert "cannot reach it" in message
    state_text = repr(kernel.mcp_server_states())
    for secret in ("qs-secret-1", "hdr-secret-2"):
        assert secret not in message
        assert secret not in state_text


async def test_http_error_status_is_explained(kernel: FunctionKernel, http_url: str) -> None:
    kernel.register_mcp_server(McpServer(name="wrong", url=http_url.replace("/mcp", "/nothing-here")))
    with pytest.raises(ServerConnectionError, match="'wrong'") as info:
        await kernel.connect_mcp_servers()
    assert "Not Found" in str(info.value)  # the SDK turns the HTTP 404 into an MCP error


async def test_server_going_away_fails_the_call_in_flight(kernel: FunctionKernel, tmp_path: Path) -> None:
    server = ServerThread(streamable_http_app(), shutdown_timeout=1)
    base_url = server.start()
    marker = tmp_path / "marker"
    failures: list[ServerConnectionError] = []

    async def slow_call() -> None:
        try:
            await kernel.call_tool("mcp://web.sleep", {"seconds": 10, "marker": str(marker)})
        except ServerConnectionError as exc:
            failures.append(exc)

    try:
        # The handshake era: one session, whose loss fails the call in flight (see the 2026-07-28 case below).
        kernel.register_mcp_server(McpServer(name="web", url=f"{base_url}/mcp", protocol="legacy"))
        await kernel.connect_mcp_servers()
        with anyio.fail_after(20):  # a hang guard
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                await wait_until(marker.exists)  # the call is running on the server
                await anyio.to_thread.run_sync(server.stop)
        [error] = failures
        assert "closed the connection during a call to mcp://web.sleep" in str(error)
        assert (error.server, error.uri) == ("web", "mcp://web.sleep")
        with pytest.raises(ServerConnectionError, match="cannot reach it"):
            await kernel.call_tool("mcp://web.add", {"a": 1, "b": 1})
        assert kernel.get_mcp_server_state("web").status == "failed"
    finally:
        server.stop()


async def test_a_forgotten_session_is_replaced_and_the_call_goes_through(kernel: FunctionKernel) -> None:
    # A restarted server (or one whose session timed out) answers 404 for the old session id; the MCP
    # specification then asks for a new session. The refused call ran nowhere, so it is sent again on the new one.
    # Sessions are of the handshake era (2026-07-28 has none), so it is pinned.
    app = SessionForgettingApp(streamable_http_app())
    with serve(app) as base_url:
        kernel.register_mcp_server(McpServer(name="web", url=f"{base_url}/mcp", protocol="legacy"))
        assert (await kernel.call_tool("mcp://web.add", {"a": 1, "b": 1})).model_dump() == {"result": 2}
        app.forget()
        assert (await kernel.call_tool("mcp://web.add", {"a": 2, "b": 2})).model_dump() == {"result": 4}
        state = kernel.get_mcp_server_state("web")
        assert (state.status, state.connects) == ("connected", 2)
        assert (await kernel.call_tool("mcp://web.echo", {"text": "still"})).model_dump() == {"result": "still"}
        await kernel.close()


async def test_stateless_server_going_away_fails_the_call_in_flight(kernel: FunctionKernel, tmp_path: Path) -> None:
    server = ServerThread(streamable_http_app(), shutdown_timeout=1)
    base_url = server.start()
    marker = tmp_path / "marker"
    try:
        kernel.register_mcp_server(McpServer(name="web", url=f"{base_url}/mcp"))
        await kernel.connect_mcp_servers()
        assert kernel.get_mcp_server_state("web").protocol_version == "2026-07-28"
        with anyio.fail_after(20):  # a hang guard
            async with anyio.create_task_group() as tg:

                async def stop_when_running() -> None:
                    await wait_until(marker.exists)
                    await anyio.to_thread.run_sync(server.stop)

                tg.start_soon(stop_when_running)
                with pytest.raises(FunctionKernelException, match=r"mcp://web\.sleep") as info:
                    await kernel.call_tool("mcp://web.sleep", {"seconds": 10, "marker": str(marker)})
        assert info.value.uri == "mcp://web.sleep"
        with pytest.raises(FunctionKernelException, match="'web'"):
            await kernel.call_tool("mcp://web.add", {"a": 1, "b": 1})
    finally:
        server.stop()


async def test_sse_server_going_away_while_idle_is_noticed(kernel: FunctionKernel) -> None:
    server = ServerThread(sse_app(), shutdown_timeout=1)
    base_url = server.start()
    try:
        kernel.register_mcp_server(McpServer(name="old", url=f"{base_url}/sse", transport="sse"))
        await kernel.connect_mcp_servers()
        await anyio.to_thread.run_sync(server.stop)
        collect_sse_server_streams()
        # No call is in flight: the end of the event stream alone tells that the connection is gone.
        await wait_until(lambda: kernel.get_mcp_server_state("old").status == "failed")
        assert "MCP server 'old' (sse: " in (kernel.get_mcp_server_state("old").error or "")
        with pytest.raises(ServerConnectionError, match="cannot reach it"):
            await kernel.call_tool("mcp://old.add", {"a": 1, "b": 1})
    finally:
        server.stop()


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_closing_after_timed_out_calls_logs_no_error(
    http_url: str, sse_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The answer to a call that timed out may arrive while the session closes; it must be dropped quietly, not
    # hit a closed stream (which the SDK logs as "Error parsing SSE message" with a traceback).
    url, kind = (sse_url, "sse") if transport == "sse" else (http_url, None)
    caplog.set_level(logging.WARNING)
    for _ in range(3):  # the late answer races the close: a few rounds make the race likely
        kernel = FunctionKernel()
        kernel.register_mcp_server(McpServer(name="web", url=url, transport=kind, timeout=0.2))
        with pytest.raises(ToolTimeoutError):
            await kernel.call_tool("mcp://web.sleep", {"seconds": 0.4})
        await kernel.close()
    client_errors = [r for r in caplog.records if r.name.startswith("mcp.client") and r.levelno >= logging.ERROR]
    assert client_errors == []
    assert kernel.get_mcp_server_state("web").status == "closed"


async def test_a_url_without_a_transport_reaches_a_legacy_sse_server(kernel: FunctionKernel, sse_url: str) -> None:
    # Streamable HTTP first; the SSE-only server refuses it, so the kernel falls back to SSE, as the spec says.
    kernel.register_mcp_server(McpServer(name="old", url=sse_url))
    with anyio.fail_after(30):
        result = await kernel.call_tool("mcp://old.add", {"a": 2, "b": 3})
    assert result.model_dump() == {"result": 5}
    assert kernel.get_mcp_server_state("old").transport == "sse"  # the transport found, not the first one tried
    assert kernel.get_tool_definition("mcp://old.add").metadata["transport"] == "sse"
    await kernel.close_mcp_servers()
    with anyio.fail_after(30):  # the transport found is kept: the next connect goes straight to SSE
        assert (await kernel.call_tool("mcp://old.add", {"a": 1, "b": 1})).model_dump() == {"result": 2}
    assert kernel.get_mcp_server_state("old").transport == "sse"


async def test_a_pinned_transport_is_not_second_guessed(kernel: FunctionKernel, sse_url: str) -> None:
    kernel.register_mcp_server(McpServer(name="old", url=sse_url, transport="streamable-http"))
    with anyio.fail_after(30), pytest.raises(ServerConnectionError, match="'old'"):
        await kernel.connect_mcp_servers()
