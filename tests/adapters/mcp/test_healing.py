"""Connections that heal: after a reconnect (a stdio server killed and started again, an HTTP session the server
forgot, a 2026-07-28 change stream the server closed) what the caller set up is set up again, and what changed or
could not be restored reaches ``on_change``. Counted events only; each wait is bounded and generous."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.adapters.mcp.conftest import StdioFactory, collect_sse_server_streams, wait_until
from tests.servers.mcp_healing import build_server
from tests.servers.mcp_http import SessionForgettingApp
from tests.servers.uvicorn_server import ServerThread, serve

from kavalai import FunctionKernel, FunctionKernelException, McpServer
from kavalai.adapters.mcp import McpChange

ERAS = ["legacy", "2026-07-28"]
WAIT = 60.0  # generous: a restart spawns a Python process that imports the SDK


def _write(path: Path, version: int = 1, refuse: tuple[str, ...] = (), refuse_level: bool = False) -> None:
    path.write_text(json.dumps({"version": version, "refuse": list(refuse), "refuse_level": refuse_level}))


def _spoil(path: Path) -> None:
    path.write_text("not json: the server fails at its start from now on")


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    path = tmp_path / "healing.json"
    _write(path)
    return path


def _updates(changes: list[McpChange], uri: str) -> int:
    return sum(1 for c in changes if c.kind == "resource" and c.uri == uri and c.reason is None)


def _kernel(
    stdio_server: StdioFactory, state_file: Path, protocol: str, changes: list[McpChange], **options: Any
) -> FunctionKernel:
    """A kernel with the healing server over stdio as ``heal``, telling ``changes``."""
    kernel = FunctionKernel()
    env = {"HEALING_STATE": str(state_file)}
    server = stdio_server(
        "heal", module="tests.servers.mcp_healing", protocol=protocol, on_change=changes.append, env=env, **options
    )
    kernel.register_mcp_server(server)
    return kernel


async def _kill(kernel: FunctionKernel, name: str) -> None:
    pid = kernel.get_mcp_server_state(name).pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: kernel.get_mcp_server_state(name).status == "failed", WAIT)


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_subscription_and_the_logging_level_are_set_up_again_after_the_server_is_killed(
    stdio_server: StdioFactory, state_file: Path, protocol: str
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, protocol, changes, log_level="warning")
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        await kernel.call_tool("mcp://heal.touch", {"uri": uri})
        await wait_until(lambda: _updates(changes, uri) == 1, WAIT)
        await _kill(kernel, "heal")

        await kernel.call_tool("mcp://heal.touch", {"uri": uri})  # starts the server again, then touches
        await wait_until(lambda: _updates(changes, uri) == 2, WAIT)
        state = kernel.get_mcp_server_state("heal")
        assert state.connects == 2
        assert state.lost == 0
        if protocol == "legacy":  # resources/subscribe and logging/setLevel, both sent again
            assert state.restored == 2
            assert (await kernel.call_tool("mcp://heal.level_now")).result == "warning"
        else:  # the listen stream with the same filter (a 2026-07-28 server is asked its level on each request)
            assert state.restored == 1
        assert not [c for c in changes if c.kind == "lost"]
        # Updates sent while it was down are not replayed: the subscriber is told to read the resource again.
        rereads = [c for c in changes if c.kind == "resource" and c.reason is not None]
        assert [c.uri for c in rereads] == [uri]
        assert "reconnect" in (rereads[0].reason or "")
    finally:
        await kernel.close()


async def test_the_logging_level_asked_for_at_run_time_is_asked_again_after_a_restart(
    stdio_server: StdioFactory, state_file: Path
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, "legacy", changes, log_level="warning")
    try:
        await kernel.adapter("mcp").set_log_level("heal", "error")  # type: ignore[attr-defined]  # as a gateway's host
        assert (await kernel.call_tool("mcp://heal.level_now")).result == "error"
        await _kill(kernel, "heal")

        assert (await kernel.call_tool("mcp://heal.level_now")).result == "error"  # not the configured "warning"
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.restored, state.lost) == (2, 1, 0)
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_killed_server_with_subscriptions_is_started_again_without_waiting_for_a_call(
    stdio_server: StdioFactory, state_file: Path, protocol: str
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, protocol, changes)
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        old_pid = kernel.get_mcp_server_state("heal").pid
        await _kill(kernel, "heal")

        await wait_until(lambda: kernel.get_mcp_server_state("heal").connects == 2, WAIT)  # no call made
        state = kernel.get_mcp_server_state("heal")
        assert state.restored == 1
        assert (state.status, state.connects, state.lost) == ("connected", 2, 0)
        assert state.pid not in (None, old_pid)
        await kernel.call_tool("mcp://heal.touch", {"uri": uri})
        await wait_until(lambda: _updates(changes, uri) == 1, WAIT)
    finally:
        await kernel.close()


async def test_a_server_that_cannot_be_started_again_has_its_subscriptions_reported_lost(
    stdio_server: StdioFactory, state_file: Path, tmp_path: Path
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, "legacy", changes, connect_timeout=15)  # room for a loaded first start
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        _spoil(state_file)
        await _kill(kernel, "heal")

        await wait_until(lambda: any(c.kind == "lost" for c in changes), WAIT)
        [lost] = [c for c in changes if c.kind == "lost"]
        assert lost.uri == uri
        assert "could not be connected again" in (lost.reason or "")
        state = kernel.get_mcp_server_state("heal")
        assert (state.status, state.connects, state.restored, state.lost) == ("failed", 1, 0, 1)
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_tool_removed_and_a_schema_changed_across_a_restart_reach_on_change(
    stdio_server: StdioFactory, state_file: Path, protocol: str
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, protocol, changes)
    try:
        [before] = await kernel.describe_tools(["mcp://heal.shape"])
        assert set(before["inputSchema"]["properties"]) == {"a"}
        _write(state_file, version=2)
        await _kill(kernel, "heal")

        await kernel.connect_mcp_servers()
        tools = McpChange(server="heal", kind="tools", removed=("gone",), changed=("shape",))
        prompts = McpChange(server="heal", kind="prompts", removed=("greet",))
        await wait_until(lambda: tools in changes and prompts in changes, WAIT)
        [after] = await kernel.describe_tools(["mcp://heal.shape"])
        assert set(after["inputSchema"]["properties"]) == {"a", "b"}
        assert "mcp://heal.gone" not in kernel.list_tools()
        assert (await kernel.call_tool("mcp://heal.shape", {"a": 1, "b": "x"})).result == "1x"
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_subscription_the_new_server_refuses_is_reported_lost_and_restored_once_a_later_one_accepts_it(
    stdio_server: StdioFactory, state_file: Path, protocol: str
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, protocol, changes)
    kept, refused = "notes://kept", "notes://refused"
    try:
        await kernel.subscribe_resource("heal", kept)
        await kernel.subscribe_resource("heal", refused)
        _write(state_file, refuse=(refused,))
        await _kill(kernel, "heal")

        await kernel.call_tool("mcp://heal.touch", {"uri": refused})
        await kernel.call_tool("mcp://heal.touch", {"uri": kept})
        await wait_until(lambda: _updates(changes, kept) == 1, WAIT)
        lost = [c for c in changes if c.kind == "lost"]
        assert [c.uri for c in lost] == [refused]
        assert lost[0].reason
        assert _updates(changes, refused) == 0
        state = kernel.get_mcp_server_state("heal")
        assert (state.restored, state.lost) == (1, 1)

        _write(state_file)  # the next server accepts it again
        await _kill(kernel, "heal")
        await kernel.call_tool("mcp://heal.touch", {"uri": refused})  # connected again: refused is restored
        await wait_until(lambda: _updates(changes, refused) == 1, WAIT)
        await kernel.call_tool("mcp://heal.touch", {"uri": kept})
        await wait_until(lambda: _updates(changes, kept) == 2, WAIT)
        await wait_until(lambda: any(c.kind == "restored" for c in changes), WAIT)
        told = [c for c in changes if c.kind in ("lost", "restored")]
        assert [(c.kind, c.uri) for c in told] == [("lost", refused), ("restored", refused)]
        assert "lost" in (told[1].reason or "")
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.restored, state.lost) == (3, 3, 1)  # kept twice, refused once; lost once
    finally:
        await kernel.close()


async def test_a_change_stream_the_server_closes_is_opened_again_with_the_same_filter(
    stdio_server: StdioFactory, state_file: Path
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, "2026-07-28", changes)
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        for round_ in range(1, 4):
            await kernel.call_tool("mcp://heal.drop_streams")
            await wait_until(lambda round_=round_: kernel.get_mcp_server_state("heal").restored == round_, WAIT)
            await kernel.call_tool("mcp://heal.touch", {"uri": uri})
            await wait_until(lambda round_=round_: _updates(changes, uri) == round_, WAIT)
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.lost) == (1, 0)  # the same process and session throughout
    finally:
        await kernel.close()


@pytest.mark.parametrize(
    ("transport", "protocol"), [("sse", "legacy"), ("streamable-http", "legacy"), ("streamable-http", "2026-07-28")]
)
async def test_an_http_server_stopped_and_started_again_sends_the_updates_again(
    state_file: Path, monkeypatch: pytest.MonkeyPatch, transport: str, protocol: str
) -> None:
    monkeypatch.setenv("HEALING_STATE", str(state_file))
    path = "sse" if transport == "sse" else "mcp"

    def app() -> Any:  # a new server each time: it knows nothing of the sessions of the one before
        built = build_server()
        return built.sse_app() if transport == "sse" else built.streamable_http_app()

    first = ServerThread(app(), shutdown_timeout=1)
    base_url = first.start()
    again = ServerThread(app(), port=first.port, shutdown_timeout=1)
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    url = f"{base_url}/{path}"
    kernel.register_mcp_server(
        McpServer(name="heal", url=url, transport=transport, protocol=protocol, on_change=changes.append)  # type: ignore[arg-type]
    )
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        await kernel.call_tool("mcp://heal.touch", {"uri": uri})
        await wait_until(lambda: _updates(changes, uri) == 1, WAIT)
        await anyio.to_thread.run_sync(first.stop)
        collect_sse_server_streams()
        await anyio.to_thread.run_sync(again.start)

        if (transport, protocol) != ("streamable-http", "legacy"):
            # The event stream (SSE) or the change stream (2026-07-28) ended with the server: the kernel connects
            # again by itself, subscribed again, with no call to start it.
            await wait_until(lambda: kernel.get_mcp_server_state("heal").restored == 1, WAIT)
        # Over the handshake's streamable HTTP the call is refused for the forgotten session and sent again on a
        # new one, subscribed again first.
        await kernel.call_tool("mcp://heal.touch", {"uri": uri})
        await wait_until(lambda: _updates(changes, uri) == 2, WAIT)
        state = kernel.get_mcp_server_state("heal")
        assert (state.restored, state.lost) == (1, 0)
    finally:
        await kernel.close()
        first.stop()
        again.stop()


@pytest.fixture
def forgetting(state_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, SessionForgettingApp]]:
    monkeypatch.setenv("HEALING_STATE", str(state_file))
    app = SessionForgettingApp(build_server().streamable_http_app())
    with serve(app) as base_url:
        yield f"{base_url}/mcp", app


async def test_over_streamable_http_a_forgotten_session_gets_its_subscription_back(
    forgetting: tuple[str, SessionForgettingApp],
) -> None:
    url, app = forgetting
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(McpServer(name="heal", url=url, protocol="legacy", on_change=changes.append))
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        await kernel.call_tool("mcp://heal.touch", {"uri": uri})
        await wait_until(lambda: _updates(changes, uri) == 1, WAIT)
        app.forget()  # as a restarted server: HTTP 404 for the session

        await kernel.call_tool("mcp://heal.touch", {"uri": uri})  # refused, then sent again on a new session
        await wait_until(lambda: _updates(changes, uri) == 2, WAIT)
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.restored, state.lost) == (2, 1, 0)
    finally:
        await kernel.close()


async def test_over_streamable_http_a_2026_change_stream_closed_by_the_server_is_opened_again(
    forgetting: tuple[str, SessionForgettingApp],
) -> None:
    url, _ = forgetting
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(McpServer(name="heal", url=url, protocol="2026-07-28", on_change=changes.append))
    uri = "notes://a"
    try:
        await kernel.subscribe_resource("heal", uri)
        await kernel.call_tool("mcp://heal.drop_streams")
        await wait_until(lambda: kernel.get_mcp_server_state("heal").restored == 1, WAIT)
        await kernel.call_tool("mcp://heal.touch", {"uri": uri})
        await wait_until(lambda: _updates(changes, uri) == 1, WAIT)
        assert kernel.get_mcp_server_state("heal").lost == 0
    finally:
        await kernel.close()


@pytest.mark.parametrize(
    ("message", "heals"),
    [("Bad Request: No valid session ID provided", True), ("Bad Request: malformed arguments", False)],
)
async def test_an_http_400_that_names_the_session_starts_a_new_session_and_another_400_does_not(
    state_file: Path, monkeypatch: pytest.MonkeyPatch, message: str, heals: bool
) -> None:
    monkeypatch.setenv("HEALING_STATE", str(state_file))
    app = SessionForgettingApp(build_server().streamable_http_app(), status=400, message=message)
    kernel = FunctionKernel()
    with serve(app) as base_url:
        kernel.register_mcp_server(McpServer(name="heal", url=f"{base_url}/mcp", protocol="legacy"))
        try:
            assert (await kernel.call_tool("mcp://heal.shape", {"a": 1})).result == 1
            app.forget()
            if heals:  # refused for the unknown session (so it ran nowhere), sent again on a new one
                assert (await kernel.call_tool("mcp://heal.shape", {"a": 2})).result == 2
                assert kernel.get_mcp_server_state("heal").connects == 2
            else:
                with pytest.raises(FunctionKernelException, match="heal.shape"):
                    await kernel.call_tool("mcp://heal.shape", {"a": 2})
                assert kernel.get_mcp_server_state("heal").connects == 1
        finally:
            await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_subscription_refused_at_once_is_an_error_not_a_loss(
    stdio_server: StdioFactory, state_file: Path, protocol: str
) -> None:
    refused = "notes://refused"
    _write(state_file, refuse=(refused,))
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, protocol, changes)
    try:
        with pytest.raises(FunctionKernelException, match="notes://refused"):
            await kernel.subscribe_resource("heal", refused)
        await kernel.subscribe_resource("heal", "notes://kept")  # the connection goes on
        state = kernel.get_mcp_server_state("heal")
        assert (state.restored, state.lost) == (0, 0)
        assert [c for c in changes if c.kind == "lost"] == []
    finally:
        await kernel.close()


async def test_a_logging_level_the_new_server_refuses_is_reported_lost(
    stdio_server: StdioFactory, state_file: Path
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, "legacy", changes, log_level="error")
    try:
        assert (await kernel.call_tool("mcp://heal.level_now")).result == "error"
        _write(state_file, refuse_level=True)
        await _kill(kernel, "heal")

        assert (await kernel.call_tool("mcp://heal.level_now")).result == "unset"  # connected again, level refused
        await wait_until(lambda: any(c.kind == "lost" for c in changes), WAIT)
        [lost] = [c for c in changes if c.kind == "lost"]
        assert lost.uri is None
        assert "logging/setLevel 'error'" in (lost.reason or "")
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.restored, state.lost) == (2, 0, 1)
    finally:
        await kernel.close()


async def test_after_a_restart_a_server_is_told_that_the_roots_may_have_changed(
    stdio_server: StdioFactory, state_file: Path, tmp_path: Path
) -> None:
    changes: list[McpChange] = []
    kernel = _kernel(stdio_server, state_file, "legacy", changes, roots=[str(tmp_path)])
    try:
        assert (await kernel.call_tool("mcp://heal.roots_told_now")).result == 0  # a first session asks by itself
        await _kill(kernel, "heal")

        # The new process is told, so a server that keeps roots per client asks roots/list again.
        assert (await kernel.call_tool("mcp://heal.roots_told_now")).result == 1
        assert kernel.get_mcp_server_state("heal").connects == 2
    finally:
        await kernel.close()
