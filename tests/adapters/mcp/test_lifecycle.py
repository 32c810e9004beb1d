"""Lifecycle of stdio MCP servers: lazy and concurrent connecting, crashes, hangs, closing from anywhere, leaks.

The autouse leak check of ``conftest.py`` runs after every test here: no server process, and no child a server
started, may outlive the test.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from tests.adapters.mcp.conftest import MARK_VAR, StdioFactory, live_processes_marked, open_fds, wait_until

from kavalai import (
    FunctionKernel,
    KernelClosedError,
    McpServer,
    ServerConnectionError,
    ToolNotFoundError,
    ToolTimeoutError,
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _environ(pid: int | None) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


async def test_get_tool_descriptions_connects_lazily(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    assert kernel.get_mcp_server_state("tools").status == "registered"
    names = [d["name"] for d in await kernel.get_tool_descriptions(["mcp://tools.*"])]
    assert "mcp://tools.add" in names
    assert kernel.get_mcp_server_state("tools").status == "connected"
    assert kernel.get_mcp_server_state("tools").protocol_version == "2026-07-28"  # server/discover, not a handshake


async def test_concurrent_first_calls_open_one_connection(
    kernel: FunctionKernel, stdio_server: StdioFactory, mark: str
) -> None:
    kernel.register_mcp_server(stdio_server())
    results: list[int] = []

    async def call(i: int) -> None:
        result = await kernel.call_tool("mcp://tools.add", {"a": i, "b": 1})
        results.append(result.result)  # type: ignore[attr-defined]

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(call, i)
    assert sorted(results) == list(range(1, 11))
    state = kernel.get_mcp_server_state("tools")
    assert state.connects == 1
    assert state.pid in live_processes_marked(mark)  # one server (the shim it runs under on Linux aside)
    assert len(live_processes_marked(mark)) == (2 if sys.platform == "linux" else 1)


async def test_close_from_another_task_than_connect(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    async with anyio.create_task_group() as tg:
        tg.start_soon(kernel.connect_mcp_servers)
    assert kernel.get_mcp_server_state("tools").status == "connected"

    async def call_and_close() -> None:
        assert (await kernel.call_tool("mcp://tools.echo", {"text": "hi"})).model_dump() == {"result": "hi"}
        await kernel.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(call_and_close)
    assert kernel.get_mcp_server_state("tools").status == "closed"
    assert kernel.list_tools("mcp://*") == []


async def test_close_after_a_cancelled_call(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    await kernel.connect_mcp_servers()
    with anyio.move_on_after(0.2) as scope:
        await kernel.call_tool("mcp://tools.sleep", {"seconds": 30})
    assert scope.cancelled_caught
    # The connection survived the caller's cancellation, and closes cleanly afterwards.
    assert (await kernel.call_tool("mcp://tools.add", {"a": 1, "b": 1})).model_dump() == {"result": 2}
    await kernel.close()
    assert kernel.get_mcp_server_state("tools").status == "closed"


async def test_hung_call_times_out_and_is_cancelled_on_the_server(
    kernel: FunctionKernel, stdio_server: StdioFactory, tmp_path: Path
) -> None:
    kernel.register_mcp_server(stdio_server(timeout=0.5))
    marker = tmp_path / "cancelled"
    with pytest.raises(ToolTimeoutError, match=r"mcp://tools.sleep timed out after 0.5 s") as info:
        await kernel.call_tool("mcp://tools.sleep", {"seconds": 60, "marker": str(marker)})
    assert info.value.timeout == 0.5
    # The server got notifications/cancelled and stopped the work.
    await wait_until(lambda: marker.exists() and marker.read_text() == "cancelled")
    assert (await kernel.call_tool("mcp://tools.add", {"a": 1, "b": 2}, timeout=None)).model_dump() == {"result": 3}


async def test_crash_fails_calls_in_flight_then_restarts(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    await kernel.connect_mcp_servers()
    first_pid = kernel.get_mcp_server_state("tools").pid
    failures: list[BaseException] = []

    async def slow_call() -> None:
        try:
            await kernel.call_tool("mcp://tools.sleep", {"seconds": 60})
        except ServerConnectionError as exc:
            failures.append(exc)

    with anyio.fail_after(10):  # a hang guard, not a timing assertion
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            with pytest.raises(ServerConnectionError) as info:
                await kernel.call_tool("mcp://tools.crash", {"code": 3})
    error = info.value
    assert (error.server, error.exit_code, error.uri) == ("tools", 3, "mcp://tools.crash")
    assert "crashing on purpose with code 3" in (error.stderr_tail or "")
    assert "MCP server 'tools'" in str(error)
    assert "exited with code 3" in str(error)
    assert len(failures) == 1  # the call in flight failed too, instead of hanging
    state = kernel.get_mcp_server_state("tools")
    assert state.status == "failed"
    assert "exited with code 3" in (state.error or "")

    result = await kernel.call_tool("mcp://tools.add", {"a": 2, "b": 2})
    assert result.model_dump() == {"result": 4}
    state = kernel.get_mcp_server_state("tools")
    assert (state.status, state.error, state.connects) == ("connected", None, 2)
    assert state.pid != first_pid
    await kernel.close()
    assert (kernel.get_mcp_server_state("tools").status, kernel.get_mcp_server_state("tools").error) == ("closed", None)


async def test_a_server_killed_while_idle_is_noticed_and_restarted(
    kernel: FunctionKernel, stdio_server: StdioFactory
) -> None:
    kernel.register_mcp_server(stdio_server())
    await kernel.connect_mcp_servers()
    pid = kernel.get_mcp_server_state("tools").pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    # No call is in flight: the server's exit alone shows in its state, with the signal named.
    await wait_until(lambda: kernel.get_mcp_server_state("tools").status == "failed")
    assert "was killed by SIGKILL (exit code -9) while connected" in (kernel.get_mcp_server_state("tools").error or "")
    assert (await kernel.call_tool("mcp://tools.add", {"a": 1, "b": 1})).model_dump() == {"result": 2}
    assert kernel.get_mcp_server_state("tools").connects == 2


async def test_startup_failures_say_what_went_wrong(kernel: FunctionKernel, mark: str, tmp_path: Path) -> None:
    env = {MARK_VAR: mark}
    chatty = "print('Server starting on stdio...', flush=True); import sys; sys.exit(2)"
    kernel.register_mcp_server(McpServer(name="chatty", command=sys.executable, args=["-c", chatty], env=env))
    kernel.register_mcp_server(McpServer(name="echo", command="cat", env=env))  # not an MCP server at all
    kernel.register_mcp_server(McpServer(name="nowhere", command=sys.executable, cwd=tmp_path / "missing", env=env))
    kernel.register_mcp_server(McpServer(name="unknown", command="kavalai-no-such-command", env=env))
    with pytest.raises(ServerConnectionError, match="4 MCP servers failed to connect") as info:
        await kernel.connect_mcp_servers()
    errors = {state.name: state.error or "" for state in kernel.mcp_server_states()}
    assert "exited with code 2 while connecting" in errors["chatty"]
    assert "not JSON-RPC to stdout" in errors["chatty"]
    assert errors["chatty"].endswith("\nServer starting on stdio...")
    # cat ends because the kernel closed its stdin, so its exit code is not the story: the protocol error is.
    assert "failed while connecting: MCP error" in errors["echo"]
    assert "exited" not in errors["echo"]
    assert f"cannot start it in {str(tmp_path / 'missing')!r} (cwd)" in errors["nowhere"]
    assert "cannot start 'kavalai-no-such-command'" in errors["unknown"]
    assert "on the PATH" in errors["unknown"]
    assert all(error in str(info.value) for error in errors.values())


def test_the_end_of_the_event_loop_closes_the_servers(stdio_server: StdioFactory) -> None:
    # asyncio.run cancels the kernel's tasks when it ends: the servers stop (the leak check runs after this test),
    # the state says closed rather than failed, and a later event loop connects again.
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server())
    asyncio.run(kernel.connect_mcp_servers())
    state = kernel.get_mcp_server_state("tools")
    assert (state.status, state.error, state.pid) == ("closed", None, None)
    result = asyncio.run(kernel.call_tool("mcp://tools.add", {"a": 1, "b": 2}))
    assert result.model_dump() == {"result": 3}
    asyncio.run(kernel.close())
    assert kernel.get_mcp_server_state("tools").connects == 2


async def test_close_kills_the_servers_own_children(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    child = (await kernel.call_tool("mcp://tools.spawn_child")).result  # type: ignore[attr-defined]
    detached = (await kernel.call_tool("mcp://tools.spawn_child", {"detach": True})).result  # type: ignore[attr-defined]
    assert _alive(child)
    assert os.getpgid(detached) == detached != kernel.get_mcp_server_state("tools").pid  # outside the server's group
    await kernel.close()
    assert not _alive(child)
    assert not _alive(detached)


async def test_close_is_idempotent_and_the_kernel_reconnects(
    kernel: FunctionKernel, stdio_server: StdioFactory
) -> None:
    kernel.register_mcp_server(stdio_server())
    await kernel.connect_mcp_servers()
    await kernel.close()
    await kernel.close()
    assert kernel.get_mcp_server_state("tools").status == "closed"
    assert (await kernel.call_tool("mcp://tools.add", {"a": 1, "b": 2})).model_dump() == {"result": 3}
    state = kernel.get_mcp_server_state("tools")
    assert (state.status, state.connects) == ("connected", 2)


async def test_no_descriptor_or_task_survives_close(stdio_server: StdioFactory) -> None:
    async def cycle() -> None:
        kernel = FunctionKernel()
        kernel.register_mcp_server(stdio_server())
        await kernel.call_tool("mcp://tools.echo", {"text": "x"})
        await kernel.close()

    await cycle()  # warm up: the first cycle may open lasting descriptors of the event loop itself
    before = open_fds()
    await cycle()
    await cycle()
    assert open_fds() == before
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_four_servers_connect_concurrently_one_broken(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    for name in ("one", "two", "three"):
        kernel.register_mcp_server(stdio_server(name))
    kernel.register_mcp_server(stdio_server("broken", env={"MCP_TEST_STARTUP_FAIL": "sk-secret-42"}))
    with pytest.raises(ServerConnectionError) as info:
        await kernel.connect_mcp_servers()
    error = info.value
    assert (error.server, error.exit_code) == ("broken", 7)
    assert "MCP server 'broken'" in str(error)
    assert "exited with code 7" in str(error)
    assert "configuration error: bad token ***" in str(error)
    assert "sk-secret-42" not in str(error) + repr(kernel.mcp_server_states())

    states = {state.name: state for state in kernel.mcp_server_states()}
    assert [states[name].status for name in ("one", "two", "three", "broken")] == ["connected"] * 3 + ["failed"]
    assert "exited with code 7" in (states["broken"].error or "")
    for name in ("one", "two", "three"):
        result = await kernel.call_tool(f"mcp://{name}.add", {"a": 1, "b": 1})
        assert result.model_dump() == {"result": 2}
    with pytest.raises(ServerConnectionError, match="'broken'") as info:
        await kernel.call_tool("mcp://broken.add", {"a": 1, "b": 1})
    assert info.value.uri == "mcp://broken.add"
    with pytest.raises(ToolNotFoundError, match="Its server failed: MCP server 'broken'"):
        kernel.get_tool_definition("mcp://broken.add")


async def test_several_failures_are_reported_together(kernel: FunctionKernel, mark: str) -> None:
    kernel.register_mcp_server(McpServer(name="nothing", command="/nonexistent/kavalai-mcp-server"))
    kernel.register_mcp_server(McpServer(name="false", command="false", env={MARK_VAR: mark}))
    with pytest.raises(ServerConnectionError, match="2 MCP servers failed to connect") as info:
        await kernel.connect_mcp_servers()
    message = str(info.value)
    assert "MCP server 'nothing'" in message
    assert "cannot start '/nonexistent/kavalai-mcp-server'" in message
    assert "MCP server 'false'" in message
    assert "exited with code 1" in message


async def test_connect_timeout_stops_a_silent_server(kernel: FunctionKernel, mark: str) -> None:
    silent = McpServer(
        name="silent",
        command=sys.executable,
        args=["-c", "import time; time.sleep(60)"],
        env={MARK_VAR: mark},
        connect_timeout=0.5,
    )
    kernel.register_mcp_server(silent)
    with pytest.raises(ServerConnectionError, match=r"did not finish connecting within 0.5 s"):
        await kernel.connect_mcp_servers()
    assert live_processes_marked(mark) == []
    assert kernel.get_mcp_server_state("silent").status == "failed"


async def test_close_while_connecting(kernel: FunctionKernel, stdio_server: StdioFactory, mark: str) -> None:
    kernel.register_mcp_server(stdio_server())
    outcome: list[BaseException | None] = []

    async def connect() -> None:
        try:
            await kernel.connect_mcp_servers()
            outcome.append(None)
        except ServerConnectionError as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(connect)
        await wait_until(lambda: kernel.get_mcp_server_state("tools").status == "connecting")
        await kernel.close()
    assert kernel.get_mcp_server_state("tools").status == "closed"
    assert len(outcome) == 1
    assert live_processes_marked(mark) == []


async def test_server_environment_is_only_what_was_given(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    os.environ["KAVALAI_TEST_PARENT_SECRET"] = "not-for-servers"
    try:
        kernel.register_mcp_server(stdio_server(env={"GIVEN": "yes"}))
        await kernel.connect_mcp_servers()
        pid = kernel.get_mcp_server_state("tools").pid
        environ = _environ(pid)
    finally:
        del os.environ["KAVALAI_TEST_PARENT_SECRET"]
    assert b"GIVEN=yes" in environ
    assert not any(item.startswith(b"KAVALAI_TEST_PARENT_SECRET=") for item in environ)


async def test_close_fails_calls_in_flight(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    await kernel.connect_mcp_servers()
    failures: list[ServerConnectionError] = []

    async def slow_call() -> None:
        try:
            await kernel.call_tool("mcp://tools.sleep", {"seconds": 60})
        except ServerConnectionError as exc:
            failures.append(exc)

    with anyio.fail_after(20):  # a hang guard
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await kernel.call_tool("mcp://tools.echo", {"text": "the slow call is on its way"})
            await kernel.close()
    [error] = failures
    assert isinstance(error, KernelClosedError)
    assert str(error) == "The kernel was closed while mcp://tools.sleep was running."
    assert error.uri == "mcp://tools.sleep"


async def test_servers_are_started_concurrently(kernel: FunctionKernel, mark: str) -> None:
    # Four servers that never answer: if connecting went one by one, only one process would ever run at a time.
    for i in range(4):
        kernel.register_mcp_server(
            McpServer(
                name=f"silent{i}",
                command=sys.executable,
                args=["-c", "import time; time.sleep(60)"],
                env={MARK_VAR: mark},
            )
        )
    outcome: list[ServerConnectionError] = []

    async def connect() -> None:
        try:
            await kernel.connect_mcp_servers()
        except ServerConnectionError as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(connect)
        # Each server, and on Linux the shim it runs under: all four started at once, not one after another.
        await wait_until(lambda: len(live_processes_marked(mark)) == (8 if sys.platform == "linux" else 4))
        assert {state.status for state in kernel.mcp_server_states()} == {"connecting"}
        await kernel.close()
    [error] = outcome
    assert "4 MCP servers failed to connect" in str(error)
    assert "was closed while connecting" in str(error)


async def test_stderr_is_drained_and_only_its_tail_kept(kernel: FunctionKernel, stdio_server: StdioFactory) -> None:
    kernel.register_mcp_server(stdio_server())
    result = await kernel.call_tool("mcp://tools.noisy", {"lines": 20_000})  # ~1 MB: far more than a pipe holds
    assert result.model_dump() == {"result": 20_000}
    with pytest.raises(ServerConnectionError) as info:
        await kernel.call_tool("mcp://tools.crash", {"code": 5})
    tail = (info.value.stderr_tail or "").splitlines()
    assert len(tail) <= 20
    assert tail[-1] == "crashing on purpose with code 5"
    assert tail[-2].startswith("noise line 019999")


async def test_a_background_mcp_call_runs_and_its_cancel_reaches_the_server(
    kernel: FunctionKernel, stdio_server: StdioFactory, tmp_path: Path
) -> None:
    kernel.register_mcp_server(stdio_server())
    quick = kernel.start_tool("mcp://tools.sleep", {"seconds": 0.01})
    assert (await quick.result()).model_dump() == {"result": "slept"}
    marker = tmp_path / "background"
    task = kernel.start_tool("mcp://tools.sleep", {"seconds": 60, "marker": str(marker)})
    await wait_until(lambda: marker.exists() and marker.read_text() == "started")
    assert task.status == "running"
    await task.cancel()
    assert task.status == "cancelled"
    await wait_until(lambda: marker.read_text() == "cancelled")  # notifications/cancelled reached the server
    assert (await kernel.call_tool("mcp://tools.add", {"a": 2, "b": 2})).model_dump() == {"result": 4}
