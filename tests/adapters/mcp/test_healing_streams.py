"""Connections that heal, part two: a handshake-era streamable HTTP session's event stream (HTTP GET) cut or refused
while the server lives is opened again, with a notice to read the subscribed resources again; a server that dies
right after every restart is not started again for ever (a crash loop); the logging level last asked for at run time
is asked again after a reconnect. Counted events only; each wait is bounded and generous."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests.adapters.mcp.conftest import StdioFactory, wait_until
from tests.servers.mcp_healing import build_server
from tests.servers.mcp_http import EventStreamSpoiler, MemoryEventStore
from tests.servers.uvicorn_server import ServerThread, serve

from kavalai import FunctionKernel, McpServer, ServerConnectionError
from kavalai.adapters.mcp import McpChange

WAIT = 60.0  # generous: a loaded machine; every wait ends as soon as its count is reached
URI = "notes://a"


def _updates(changes: list[McpChange]) -> int:
    """The server's own updates of URI (a kernel's notice to read it again carries a reason)."""
    return sum(1 for c in changes if c.kind == "resource" and c.uri == URI and c.reason is None)


def _rereads(changes: list[McpChange]) -> list[McpChange]:
    return [c for c in changes if c.kind == "resource" and c.uri == URI and c.reason is not None]


@pytest.fixture
def spoiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, EventStreamSpoiler]]:
    state = tmp_path / "healing.json"
    state.write_text(json.dumps({"version": 1, "refuse": []}))
    monkeypatch.setenv("HEALING_STATE", str(state))
    app = EventStreamSpoiler(build_server().streamable_http_app())
    with serve(app) as base_url:
        yield f"{base_url}/mcp", app


async def test_an_event_stream_cut_then_refused_is_opened_again_on_the_same_session(
    spoiled: tuple[str, EventStreamSpoiler],
) -> None:
    url, app = spoiled
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(McpServer(name="heal", url=url, protocol="legacy", on_change=changes.append))
    try:
        await kernel.subscribe_resource("heal", URI)
        await wait_until(lambda: app.opened == 1, WAIT)
        await kernel.call_tool("mcp://heal.touch", {"uri": URI})
        await wait_until(lambda: _updates(changes) == 1, WAIT)
        await kernel.call_tool("mcp://heal.grow")  # a tool added whose notice never comes (as if sent meanwhile)

        # The SDK alone tries twice after an error, then stops for good: the cut and one 503 would end it.
        app.refuse(4)
        app.cut()
        await wait_until(lambda: app.opened == 2, WAIT)
        assert app.refused == 4
        await wait_until(lambda: len(_rereads(changes)) == 1, WAIT)  # what was sent meanwhile is lost: re-read
        assert "down" in (_rereads(changes)[0].reason or "")
        # The lists are compared again after the gap: the tool added meanwhile is told and published.
        await wait_until(lambda: any(c.kind == "tools" and c.added == ("extra",) for c in changes), WAIT)
        assert "mcp://heal.extra" in kernel.get_mcp_server_state("heal").tools

        await kernel.call_tool("mcp://heal.touch", {"uri": URI})
        await wait_until(lambda: _updates(changes) == 2, WAIT)
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.restored, state.lost) == (1, 0, 0)
    finally:
        await kernel.close()


async def test_an_event_stream_resumed_with_its_events_replayed_is_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "healing.json"
    state.write_text(json.dumps({"version": 1, "refuse": []}))
    monkeypatch.setenv("HEALING_STATE", str(state))
    store = MemoryEventStore()
    app = EventStreamSpoiler(build_server().streamable_http_app(event_store=store))
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    with serve(app) as base_url:
        server = McpServer(name="heal", url=f"{base_url}/mcp", protocol="legacy", on_change=changes.append)
        kernel.register_mcp_server(server)
        try:
            await kernel.subscribe_resource("heal", URI)
            await wait_until(lambda: app.opened == 1, WAIT)
            await kernel.call_tool("mcp://heal.touch", {"uri": URI})
            await wait_until(lambda: _updates(changes) == 1, WAIT)

            app.refuse(1000)  # kept down until the update below is sent
            app.cut()
            await wait_until(lambda: app.refused >= 1, WAIT)
            await kernel.call_tool("mcp://heal.touch", {"uri": URI})  # sent while the stream is down: stored
            app.refuse(0)
            await wait_until(lambda: _updates(changes) == 2, WAIT)  # replayed on the resumed stream
            assert (app.opened, store.replays) == (2, 1)

            await kernel.call_tool("mcp://heal.touch", {"uri": URI})  # the resumed stream carries the next ones
            await wait_until(lambda: _updates(changes) == 3, WAIT)
            assert _rereads(changes) == []  # nothing was lost: no notice to read it again
            state_now = kernel.get_mcp_server_state("heal")
            assert (state_now.connects, state_now.restored, state_now.lost) == (1, 0, 0)
        finally:
            await kernel.close()


async def test_an_event_stream_refused_past_connect_timeout_gets_a_new_session(
    spoiled: tuple[str, EventStreamSpoiler],
) -> None:
    url, app = spoiled
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    server = McpServer(name="heal", url=url, protocol="legacy", on_change=changes.append, connect_timeout=4)
    kernel.register_mcp_server(server)
    try:
        await kernel.subscribe_resource("heal", URI)
        await wait_until(lambda: app.opened == 1, WAIT)
        app.refuse(10**9)
        app.cut()
        # Refused for the whole connect_timeout: the session is given up and a new one made, subscribed again.
        await wait_until(lambda: kernel.get_mcp_server_state("heal").connects >= 2, WAIT)
        app.refuse(0)
        await wait_until(lambda: app.opened >= 2, WAIT)
        await wait_until(lambda: kernel.get_mcp_server_state("heal").status == "connected", WAIT)

        await kernel.call_tool("mcp://heal.touch", {"uri": URI})
        await wait_until(lambda: _updates(changes) == 1, WAIT)
        state = kernel.get_mcp_server_state("heal")
        assert state.restored >= 1
        assert state.lost == 0
        assert _rereads(changes)  # subscribed again after the reconnect: told to read it again
    finally:
        await kernel.close()


async def test_an_event_stream_no_session_can_open_loses_the_subscription_but_keeps_the_calls(
    spoiled: tuple[str, EventStreamSpoiler],
) -> None:
    url, app = spoiled
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    server = McpServer(name="heal", url=url, protocol="legacy", on_change=changes.append, connect_timeout=2)
    kernel.register_mcp_server(server)
    try:
        await kernel.subscribe_resource("heal", URI)
        await wait_until(lambda: app.opened == 1, WAIT)
        app.refuse(10**9)  # as a proxy that answers every GET with 503
        app.cut()

        # One new session; when it cannot open the stream either, the subscription is lost and the session kept.
        await wait_until(lambda: any(c.kind == "lost" for c in changes), WAIT)
        [lost] = [c for c in changes if c.kind == "lost"]
        assert lost.uri == URI
        assert "event stream" in (lost.reason or "")
        assert (await kernel.call_tool("mcp://heal.shape", {"a": 7})).result == 7
        state = kernel.get_mcp_server_state("heal")
        assert (state.connects, state.status, state.lost) == (2, "connected", 1)
        assert app.opened == 1
    finally:
        await kernel.close()


async def test_a_server_that_dies_after_every_restart_is_not_started_again_past_the_limit(
    stdio_server: StdioFactory,
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("loop", crash_window=3600))  # the default limit; a window no load outlasts
    try:
        calls = 0
        while calls < 12:  # bounded: the limit is 5
            calls += 1
            with pytest.raises(ServerConnectionError) as raised:
                await kernel.call_tool("mcp://loop.crash")
            if "crash loop" in str(raised.value):
                break
        state = kernel.get_mcp_server_state("loop")
        assert calls == 6  # five crashes after connecting, then refused without starting it
        assert state.connects == 5
        assert state.status == "failed"
        assert "'loop'" in (state.error or "")
        assert "lost 5 times within 3600 s" in (state.error or "")
        assert "crash loop: crash_limit=5, crash_window=3600" in (state.error or "")
        assert raised.value.server == "loop"

        with pytest.raises(ServerConnectionError, match="crash loop"):  # still refused, still not started
            await kernel.call_tool("mcp://loop.echo", {"text": "x"})
        assert kernel.get_mcp_server_state("loop").connects == 5
    finally:
        await kernel.close()


async def test_a_server_killed_after_every_background_reconnect_ends_in_a_crash_loop_and_its_subscription_lost(
    stdio_server: StdioFactory, tmp_path: Path
) -> None:
    state = tmp_path / "healing.json"
    state.write_text(json.dumps({"version": 1, "refuse": []}))
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kills = [0]

    def on_change(change: McpChange) -> None:
        changes.append(change)
        if change.kind == "resource" and change.reason is not None:  # told once it is connected again: kill it
            pid = kernel.get_mcp_server_state("heal").pid
            if pid is not None:
                kills[0] += 1
                os.kill(pid, signal.SIGKILL)

    env = {"HEALING_STATE": str(state)}
    server = stdio_server(
        "heal",
        module="tests.servers.mcp_healing",
        protocol="legacy",
        on_change=on_change,
        env=env,
        crash_limit=3,
        crash_window=3600,  # no load outlasts it: the losses are counted, not timed
    )
    kernel.register_mcp_server(server)
    try:
        await kernel.subscribe_resource("heal", URI)
        pid = kernel.get_mcp_server_state("heal").pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the first loss; each reconnect in the background is killed at once

        await wait_until(lambda: any(c.kind == "lost" for c in changes), WAIT)
        [lost] = [c for c in changes if c.kind == "lost"]
        assert lost.uri == URI
        assert "crash loop" in (lost.reason or "")
        state_now = kernel.get_mcp_server_state("heal")
        assert (state_now.connects, kills[0]) == (3, 2)  # 3 losses after connecting (crash_limit), then no start
        assert state_now.status == "failed"
        assert state_now.lost == 1
    finally:
        await kernel.close()


async def test_a_2026_change_stream_that_cannot_reach_its_restarting_server_is_opened_again_on_the_same_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "healing.json"
    state.write_text(json.dumps({"version": 1, "refuse": []}))
    monkeypatch.setenv("HEALING_STATE", str(state))
    caplog.set_level(logging.INFO, logger="kavalai.mcp")
    first = ServerThread(build_server().streamable_http_app(), shutdown_timeout=1)
    base_url = first.start()
    again = ServerThread(build_server().streamable_http_app(), port=first.port, shutdown_timeout=1)
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="heal", url=f"{base_url}/mcp", protocol="2026-07-28", on_change=changes.append)
    )
    try:
        await kernel.subscribe_resource("heal", URI)
        await kernel.call_tool("mcp://heal.touch", {"uri": URI})
        await wait_until(lambda: _updates(changes) == 1, WAIT)
        await anyio.to_thread.run_sync(first.stop)  # the change stream ends; opening it again cannot connect

        def refused() -> bool:
            return any("change stream could not be opened" in r.getMessage() for r in caplog.records)

        await wait_until(refused, WAIT)  # sent again, the SDK's transport still alive
        await anyio.to_thread.run_sync(again.start)
        await wait_until(lambda: kernel.get_mcp_server_state("heal").restored == 1, WAIT)
        await kernel.call_tool("mcp://heal.touch", {"uri": URI})
        await wait_until(lambda: _updates(changes) == 2, WAIT)
        state_now = kernel.get_mcp_server_state("heal")
        assert (state_now.connects, state_now.restored, state_now.lost) == (1, 1, 0)  # healed, not reconnected
    finally:
        await kernel.close()
        first.stop()
        again.stop()
