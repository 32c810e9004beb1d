"""Hostile stdio servers: every call ends with a clear error, memory stays bounded, the loop stays responsive."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from kavalai import FunctionKernel, McpServer, ServerConnectionError, ToolExecutionError, ToolTimeoutError

HOSTILE = Path(__file__).resolve().parents[2] / "servers" / "mcp_hostile.py"


def hostile(mode: str, **options: object) -> McpServer:
    return McpServer(name="bad", command=sys.executable, args=[str(HOSTILE), mode], **options)  # type: ignore[arg-type]


async def test_an_unreadable_response_that_names_its_request_fails_that_call() -> None:
    for mode in ("badutf8", "deep"):
        kernel = FunctionKernel()
        kernel.register_mcp_server(hostile(mode))
        with anyio.fail_after(20):
            with pytest.raises(ToolExecutionError, match="could not be read") as info:
                await kernel.call_tool("mcp://bad.t0", {"x": "a"})
        assert info.value.uri == "mcp://bad.t0"
        await kernel.close()


async def test_an_unreadable_line_that_names_no_request_is_dropped_and_counted_not_fatal() -> None:
    # It answers no request, so the call it stands in for stays unanswered until its timeout; the session lives on.
    kernel = FunctionKernel()
    kernel.register_mcp_server(hostile("noid"))
    await kernel.connect_mcp_servers()  # the short timeout is the call's, not the server's start
    with anyio.fail_after(20):
        with pytest.raises(ToolTimeoutError):
            await kernel.call_tool("mcp://bad.t0", {"x": "a"}, timeout=0.5)
    state = kernel.get_mcp_server_state("bad")
    assert state.stray_messages == 1
    assert state.status == "connected"
    await kernel.close()


async def test_a_message_over_the_limit_fails_the_connection_naming_the_limit() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(hostile("huge", max_message_bytes=1024 * 1024))
    with anyio.fail_after(30):
        with pytest.raises(ServerConnectionError, match=r"over the limit of 1,048,576 bytes \(max_message_bytes\)"):
            await kernel.call_tool("mcp://bad.t0", {"x": "a"})
    await kernel.close()


def test_a_1_5_gib_line_is_refused_with_peak_memory_under_the_limit_plus_100_mb() -> None:
    # The victim kernel runs in a child process under RLIMIT_AS, so a regression cannot hurt the machine. The peak is
    # read against the same process's peak after a first, well-formed call (which loads the interpreter, pydantic, the
    # SDK and the connection machinery: 130-180 MiB depending on the Python and the machine), so the bound is on what
    # the hostile line itself costs, not on the size of the libraries.
    script = textwrap.dedent(
        f"""
        import asyncio, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
        from kavalai import FunctionKernel, McpServer, ServerConnectionError
        def peak_mib():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        async def main():
            kernel = FunctionKernel()
            kernel.register_mcp_server(McpServer(name="good", command=sys.executable, args=[{str(HOSTILE)!r}, "fine"]))
            kernel.register_mcp_server(McpServer(name="bad", command=sys.executable, args=[{str(HOSTILE)!r}, "huge"]))
            await kernel.call_tool("mcp://good.t0", {{"x": "a"}})
            before = peak_mib()
            try:
                await kernel.call_tool("mcp://bad.t0", {{"x": "a"}})
            except ServerConnectionError as exc:
                print("refused:", "max_message_bytes" in str(exc))
            await kernel.close()
            print(f"peak RSS {{peak_mib():.0f}} MiB, {{before:.0f}} MiB before the hostile call")
        asyncio.run(main())
        """
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "refused: True"
    words = lines[1].split()
    peak, before = float(words[2]), float(words[4])
    print(f"1.5 GiB stdio line: {lines[1]} (limit 32 MiB + 100 MB allowed), {time.monotonic() - started:.1f} s")
    assert peak - before < 32 + 100


async def test_listing_10000_tools_does_not_stall_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured without a clock: the listing's line is parsed on a worker thread, and a ticker that is ready at
    every event-loop iteration runs between each batch of at most 500 tools the connection describes."""
    from kavalai.adapters.mcp import _connection, _stdio

    ticks = 0
    parsed_on: list[int] = []  # the threads that parsed the big lines (the 10,000-tool listing)
    ticks_seen: list[int] = []  # the ticker's count when each tool was described
    parse, describe = _stdio._parse, _connection.McpConnection._lazy_tool

    def parse_and_note(info: _stdio.StdioProcess, line: bytes) -> object:
        if len(line) > _stdio._PARSE_OFF_LOOP:
            parsed_on.append(threading.get_ident())
        return parse(info, line)

    def describe_and_note(self: _connection.McpConnection, tool: object, *rest: bool) -> object:
        ticks_seen.append(ticks)
        return describe(self, tool, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(_stdio, "_parse", parse_and_note)
    monkeypatch.setattr(_connection.McpConnection, "_lazy_tool", describe_and_note)
    kernel = FunctionKernel()
    kernel.register_mcp_server(hostile("many"))
    stop = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            await anyio.lowlevel.checkpoint()  # ready again at the next iteration of the loop
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        with anyio.fail_after(120):
            await kernel.connect_mcp_servers()
        stop.set()
    assert len(kernel.list_tools("mcp://bad.*")) == 10_000
    assert (await kernel.call_tool("mcp://bad.t9999", {"x": "abc"})).result == "fine"  # type: ignore[attr-defined]
    loop_thread = threading.get_ident()
    assert parsed_on  # the listing was one big line
    assert all(thread != loop_thread for thread in parsed_on)  # parsed off the loop
    assert len(ticks_seen) == 10_000
    longest_batch = max(Counter(ticks_seen).values())  # tools described with no loop iteration in between
    print(f"10,000 tools described in batches of at most {longest_batch}, the loop free in between")
    assert longest_batch <= 500
    await kernel.close()


@pytest.mark.parametrize("mode", ["daemon", "daemon-scrubbed"])
async def test_a_grandchild_that_double_forks_into_its_own_session_is_ended_on_close(tmp_path: Path, mode: str) -> None:
    """daemon-scrubbed also empties its environment, so only the shim's subreaper can still find it."""
    import os

    pid_file = tmp_path / "daemon.pid"
    kernel = FunctionKernel()
    kernel.register_mcp_server(hostile(mode, env={"DAEMON_PID_FILE": str(pid_file)}))
    with anyio.fail_after(20):
        assert (await kernel.call_tool("mcp://bad.t0", {"x": "a"})).result == "fine"  # type: ignore[attr-defined]
        while not pid_file.exists() or not pid_file.read_text():  # noqa: ASYNC110 - a file, no event to wait on
            await anyio.sleep(0.02)
    grandchild = int(pid_file.read_text())
    server_pid = kernel.get_mcp_server_state("bad").pid
    assert server_pid is not None
    assert os.getsid(grandchild) != server_pid  # it left the server's session and process group
    assert os.getpgid(grandchild) != server_pid
    await kernel.close()

    def alive() -> bool:
        try:
            state = Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return False
        return state not in ("Z", "X")

    with anyio.fail_after(10):
        while alive():  # noqa: ASYNC110 - /proc, no event to wait on
            await anyio.sleep(0.05)


async def test_a_listing_that_pages_for_ever_is_refused_by_its_totals(tmp_path: Path) -> None:
    # On main the client asked for 1,000 pages (2 million tools, gigabytes) before connect_timeout stopped it.
    pages = tmp_path / "pages"
    server = hostile("paging", env={"PAGES_FILE": str(pages)}, connect_timeout=120)
    kernel = FunctionKernel()
    kernel.register_mcp_server(server)
    try:
        with pytest.raises(ServerConnectionError, match=r"listed more than 50,000 items in its tools/list pages"):
            await kernel.connect_mcp_servers()
    finally:
        await kernel.close()
    served = pages.read_text().split()
    assert len(served) == 26  # 25 pages of 2,000 reach the limit, the 26th passes it: no page more is asked for


class _Refused(logging.Handler):
    """Sets ``event`` when the connection logs that refreshing the tool list failed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = anyio.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if "refreshing the tool list failed" in self.messages[-1]:
            self.event.set()


async def test_a_refresh_that_pages_for_ever_is_refused_and_the_listed_tools_kept(tmp_path: Path) -> None:
    pages = tmp_path / "pages"
    kernel = FunctionKernel()
    kernel.register_mcp_server(hostile("pages-later", env={"PAGES_FILE": str(pages)}, connect_timeout=120))
    refused = _Refused()
    logger = logging.getLogger("kavalai.mcp")
    logger.addHandler(refused)
    try:
        await kernel.connect_mcp_servers()
        await kernel.call_tool("mcp://bad.t0", {"x": "a"})  # the server then says its list changed
        with anyio.fail_after(60):  # liveness only: the refresh runs in the background
            await refused.event.wait()
        assert len(pages.read_text().split()) == 26  # no page past the totals
        assert "listed more than 50,000 items" in refused.messages[-1]
        assert kernel.list_tools() == ["mcp://bad.t0"]  # the tools listed before, kept
    finally:
        logger.removeHandler(refused)
        await kernel.close()


@pytest.mark.parametrize(("field", "method"), [("resources", "list_resources"), ("prompts", "list_prompts")])
async def test_a_resources_or_prompts_listing_that_pages_for_ever_on_refresh_is_refused(
    tmp_path: Path, field: str, method: str
) -> None:
    pages = tmp_path / "pages"
    kernel = FunctionKernel()
    kernel.register_mcp_server(hostile("extras-later", env={"PAGES_FILE": str(pages)}, connect_timeout=120))
    try:
        listed = await getattr(kernel, method)("bad")
        assert [item.name for item in listed] == ["first"]  # listed whole at first
        await kernel.call_tool("mcp://bad.t0", {"x": "a"})  # from now on the server pages for ever
        with pytest.raises(ServerConnectionError, match=rf"listed more than 50,000 items in its {field}/list pages"):
            await getattr(kernel, method)("bad")
        served = [line for line in pages.read_text().splitlines() if line.startswith(field)]
        assert len(served) == 26  # 25 pages of 2,000 reach the limit, the 26th passes it: no page more is asked for
        assert kernel.list_tools() == ["mcp://bad.t0"]  # the connection and its tools are kept
    finally:
        await kernel.close()


async def test_the_catalogue_an_on_change_compares_is_bounded_by_the_listing_totals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``on_change``, resources and prompts are listed on connect (to compare after a reconnect): a server
    paging them for ever is refused by the totals, not after the comparison's 100 pages; the connection stands."""
    pages = tmp_path / "pages"
    server = hostile("extras-paging", env={"PAGES_FILE": str(pages)}, connect_timeout=120, on_change=lambda c: None)
    kernel = FunctionKernel()
    kernel.register_mcp_server(server)
    try:
        with caplog.at_level(logging.INFO, logger="kavalai.mcp"):
            await kernel.connect_mcp_servers()
        served = pages.read_text().splitlines()
        assert len([line for line in served if line.startswith("resources")]) == 26
        assert not [line for line in served if line.startswith("prompts")]  # the listing stopped at the refusal
        assert "listed more than 50,000 items in its resources/list pages" in caplog.text
        assert kernel.list_tools() == ["mcp://bad.t0"]
    finally:
        await kernel.close()
