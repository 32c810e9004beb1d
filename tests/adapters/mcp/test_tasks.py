"""MCP's tasks extension (io.modelcontextprotocol/tasks) against a real task-running server: FastMCP with the
``fastmcp-tasks`` package, installed by this test's set-up into a virtual environment of its own (it pins its own
FastMCP release), on the 2026-07-28 protocol."""

from __future__ import annotations

import fcntl
import logging
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.adapters.mcp.conftest import wait_until

from kavalai import FunctionKernel, McpServer, ToolExecutionError, ToolTimeoutError
from kavalai.adapters.mcp import McpElicitation

VERSION = "4.1.4"
SERVER = Path(__file__).resolve().parents[2] / "servers" / "mcp_tasks.py"


@pytest.fixture(scope="session")
def tasks_python() -> Path:
    """The Python of a virtual environment holding fastmcp-tasks, made once in the temp dir (reused across runs)."""
    folder = Path(tempfile.gettempdir()) / f"kavalai-test-fastmcp-tasks-{VERSION}"
    python, done = folder / "bin" / "python", folder / ".installed"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs at once install it once
        if not done.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, timeout=120)
            subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    f"fastmcp-tasks=={VERSION}",
                ],
                check=True,
                timeout=600,
            )
            done.touch()
    return python


@pytest.fixture
async def kernel(tasks_python: Path) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    yield kernel
    await kernel.close()


def _server(python: Path, **options: Any) -> McpServer:
    env = {"FASTMCP_SHOW_CLI_BANNER": "false", "FASTMCP_CHECK_FOR_UPDATES": "off", "FASTMCP_LOG_LEVEL": "WARNING"}
    return McpServer(name="tasks", command=str(python), args=[str(SERVER)], env=env, **options)


async def test_a_call_run_as_a_task_is_followed_to_its_result(
    kernel: FunctionKernel, tasks_python: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kernel.register_mcp_server(_server(tasks_python))
    with caplog.at_level(logging.DEBUG, logger="kavalai.mcp"):
        result = await kernel.call_tool("mcp://tasks.crunch", {"n": 7})
    assert result.result == 49  # type: ignore[attr-defined]
    assert kernel.get_mcp_server_state("tasks").protocol_version == "2026-07-28"
    assert any("runs as task" in r.getMessage() for r in caplog.records)  # it was a task, polled to its end
    assert (await kernel.call_tool("mcp://tasks.quick", {"text": "hi"})).result == "HI"  # type: ignore[attr-defined]


async def test_a_failed_task_fails_the_call_naming_the_tool(kernel: FunctionKernel, tasks_python: Path) -> None:
    kernel.register_mcp_server(_server(tasks_python))
    with pytest.raises(ToolExecutionError, match=r"mcp://tasks\.explode.*boom at step 3") as info:
        await kernel.call_tool("mcp://tasks.explode", {"message": "boom at step 3"})
    assert info.value.uri == "mcp://tasks.explode"


async def test_a_timed_out_call_cancels_the_task_on_the_server(
    kernel: FunctionKernel, tasks_python: Path, tmp_path: Path
) -> None:
    kernel.register_mcp_server(_server(tasks_python))
    marker = tmp_path / "linger"
    # Connected first: a first call's timeout bounds its server's start too, and this test is about the task the
    # tool runs, so the 1.5 s must be the tool's own, not spent starting the server on a loaded machine.
    await kernel.connect_mcp_servers()
    with pytest.raises(ToolTimeoutError):
        await kernel.call_tool("mcp://tasks.linger", {"marker": str(marker)}, timeout=1.5)
    await wait_until(lambda: marker.exists() and marker.read_text() == "cancelled")


async def test_a_background_call_cancelled_cancels_the_task(
    kernel: FunctionKernel, tasks_python: Path, tmp_path: Path
) -> None:
    kernel.register_mcp_server(_server(tasks_python))
    marker = tmp_path / "linger"
    task = kernel.start_tool("mcp://tasks.linger", {"marker": str(marker)})
    await wait_until(marker.exists)
    await task.cancel()
    assert task.status == "cancelled"
    await wait_until(lambda: marker.read_text() == "cancelled")


async def test_a_task_asking_for_input_is_answered_by_the_elicitation_handler(
    kernel: FunctionKernel, tasks_python: Path
) -> None:
    asked: list[McpElicitation] = []

    async def user(request: McpElicitation) -> dict[str, Any]:
        asked.append(request)
        return {"approved": True}

    kernel.register_mcp_server(_server(tasks_python, elicitation=user))
    with anyio.fail_after(60):
        assert (await kernel.call_tool("mcp://tasks.needs_approval")).result == "approved"  # type: ignore[attr-defined]
    assert [a.message for a in asked] == ["Go on?"]


async def test_without_a_handler_a_task_asking_for_input_fails_clearly(
    kernel: FunctionKernel, tasks_python: Path
) -> None:
    kernel.register_mcp_server(_server(tasks_python))
    with pytest.raises(ToolExecutionError, match=r"mcp://tasks\.needs_approval failed: it asked for input"):
        await kernel.call_tool("mcp://tasks.needs_approval", timeout=30)


async def test_the_handshake_era_runs_the_same_tools_without_tasks(kernel: FunctionKernel, tasks_python: Path) -> None:
    kernel.register_mcp_server(_server(tasks_python, protocol="legacy"))
    assert (await kernel.call_tool("mcp://tasks.crunch", {"n": 3})).result == 9  # type: ignore[attr-defined]


def _hostile(mode: str, tmp_path: Path, **options: Any) -> McpServer:
    env = {name: str(tmp_path / name.split("_")[0].lower()) for name in ("CANCEL_LOG", "GET_LOG", "STARTED_LOG")}
    args = ["-m", "tests.servers.mcp_tasks_hostile", mode]
    return McpServer(name="bad", command=sys.executable, args=args, cwd=ROOT, env=env, **options)


ROOT = Path(__file__).resolve().parents[3]


async def test_a_task_working_for_ever_ends_at_the_timeout_and_is_cancelled(tmp_path: Path) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_hostile("forever", tmp_path))
    try:
        with anyio.fail_after(10), pytest.raises(ToolTimeoutError, match=r"mcp://bad\.work"):
            await kernel.call_tool("mcp://bad.work", timeout=2)
        await wait_until(lambda: (tmp_path / "cancel").exists())
        assert (tmp_path / "cancel").read_text() == "t-1\n"
        gets = len((tmp_path / "get").read_text().splitlines())
        assert 3 <= gets <= 60  # polled, backing off: pollIntervalMs 0 does not make it spin
    finally:
        await kernel.close()


async def test_a_call_left_before_its_task_id_arrives_still_cancels_the_task(tmp_path: Path) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_hostile("late", tmp_path))
    try:
        await kernel.connect_mcp_servers()  # connected, so the call below is sent at once
        task = kernel.start_tool("mcp://bad.work")
        await wait_until(lambda: (tmp_path / "started").exists())  # the work began; its task id is a second away
        with anyio.fail_after(5):
            await task.cancel()
        assert task.status == "cancelled"
        assert (tmp_path / "cancel").read_text() == "t-1\n"  # asked to cancel before cancel() returned
    finally:
        await kernel.close()


async def test_a_malformed_task_state_fails_the_call_clearly(tmp_path: Path) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_hostile("garbage", tmp_path))
    try:
        with pytest.raises(ToolExecutionError, match=r"mcp://bad\.work.*tasks/get answer malformed.*status"):
            await kernel.call_tool("mcp://bad.work", timeout=10)
    finally:
        await kernel.close()


async def test_a_task_asking_without_end_is_stopped(tmp_path: Path) -> None:
    async def yes(request: McpElicitation) -> dict[str, Any]:
        return {}

    kernel = FunctionKernel()
    kernel.register_mcp_server(_hostile("asks", tmp_path, elicitation=yes))
    try:
        with pytest.raises(ToolExecutionError, match=r"mcp://bad\.work.*asked for input too many times"):
            await kernel.call_tool("mcp://bad.work", timeout=20)
    finally:
        await kernel.close()


async def test_a_thousand_questions_at_once_are_refused_without_asking_one(tmp_path: Path) -> None:
    asked: list[McpElicitation] = []

    async def user(request: McpElicitation) -> dict[str, Any]:
        asked.append(request)
        return {}

    kernel = FunctionKernel()
    kernel.register_mcp_server(_hostile("floods", tmp_path, elicitation=user))
    try:
        with pytest.raises(ToolExecutionError, match=r"mcp://bad\.work.*1000 requests at once, more than the 16"):
            await kernel.call_tool("mcp://bad.work", timeout=20)
        assert asked == []
    finally:
        await kernel.close()
