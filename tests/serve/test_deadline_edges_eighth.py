"""Hostile round 8 of issue 36 (``tests/kernel/hostile_cases_eighth.md``), the gateway's cases 11-16: deadlines a
host sends in ``_meta`` as odd values, over stateless HTTP, through the tasks extension, ``tasks/cancel``, a host
leaving over stdio, and the SDK client's own timeout shorter than the gateway's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.streamable_http import streamable_http_client
from tests.serve.test_serve import http_server, serve_command, stdio_session, wait_until
from tests.serve.test_stdio import _OPENING, _lines
from tests.serve.test_tasks import _call, _host, _send, _until

from kavalai import FunctionKernel, pythontool
from kavalai.serve import build_mcp_server
from mcp import Client

GATEWAY_TOOLS = '''
"""The gateway's tools for the hostile cases."""

from pathlib import Path

import anyio


async def nap(seconds: float) -> str:
    """Sleep, then answer (a long sleep says it started, in started.txt)."""
    if seconds > 100:
        Path("started.txt").write_text("started")
    await anyio.sleep(seconds)
    return "slept"
'''


def _config(tmp_path: Path) -> Path:
    (tmp_path / "edge_tools.py").write_text(GATEWAY_TOOLS, encoding="utf-8")
    path = tmp_path / "edges.yaml"
    path.write_text(json.dumps({"python_functions": [{"function": "edge_tools.nap", "name": "nap"}]}))
    return path


def _text(result: Any) -> str:
    return str(result.content[0].text)


async def test_case_11_odd_wire_deadlines_never_fail_the_request(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with stdio_session(config) as client:
        [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
        as_text = await client.call_tool(name, {"seconds": 0}, meta={"io.kavalai/deadline": "5000"})
        as_bool = await client.call_tool(name, {"seconds": 0}, meta={"io.kavalai/deadline": True})
        subnormal = await client.call_tool(name, {"seconds": 5}, meta={"io.kavalai/deadline": 1e-320})
        after = await client.call_tool(name, {"seconds": 0})
    assert "slept" in _text(as_text)
    assert not as_text.is_error
    assert "slept" in _text(as_bool)
    assert not as_bool.is_error
    assert subnormal.is_error
    assert "deadline" in _text(subnormal), _text(subnormal)
    assert "slept" in _text(after)
    log = (tmp_path / "stdio.log").read_text()
    assert "Traceback" not in log, log
    ignored = [line for line in log.splitlines() if "is not a number" in line]
    assert len(ignored) == 2, log


async def test_case_12_a_wire_deadline_over_stateless_http(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with (
        http_server(config, "--stateless", "--no-lazy") as (url, _process),
        Client(streamable_http_client(url), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
        with anyio.fail_after(25):  # a hang's bound: the tool sleeps 30 s
            cut = await client.call_tool(name, {"seconds": 30}, meta={"io.kavalai/deadline": 300})
        after = await client.call_tool(name, {"seconds": 0})
    assert cut.is_error
    assert "deadline" in _text(cut), _text(cut)
    assert "slept" in _text(after)


@pythontool
async def sleepy(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "slept"


async def test_case_13_a_tasks_call_keeps_the_hosts_wire_deadline() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("x.sleepy", sleepy)
    served = build_mcp_server(kernel, tasks=["python://*"])
    async with _host(served) as client:
        created = await _send(
            client,
            "tools/call",
            {"name": "python_x_sleepy", "arguments": {"seconds": 30}, "_meta": {"io.kavalai/deadline": 300}},
        )
        assert created["resultType"] == "task"
        done = await _until(client, created["taskId"])  # within its 30 s bound, not the tool's 30 s
    assert done["status"] in {"completed", "failed"}, done
    text = json.dumps(done)
    assert "deadline" in text, text
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_14_tasks_cancel_of_a_hung_task_ends_its_call() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("x.sleepy", sleepy)
    served = build_mcp_server(kernel, tasks=["python://*"])
    async with _host(served) as client:
        created = await _call(client, "python_x_sleepy", {"seconds": 600})
        await wait_until(lambda: len(kernel.calls_in_flight()) == 1)
        await _send(client, "tasks/cancel", {"taskId": created["taskId"]})
        state = await _send(client, "tasks/get", {"taskId": created["taskId"]})
        again = await _send(client, "tasks/cancel", {"taskId": created["taskId"]})
        await wait_until(lambda: kernel.calls_in_flight() == [])
    assert state["status"] == "cancelled"
    assert again["resultType"] == "complete"
    await kernel.close()


async def test_case_15_a_host_closing_stdin_mid_call_ends_the_gateway(tmp_path: Path) -> None:
    config = _config(tmp_path)
    command = serve_command(config)
    with (tmp_path / "stdio.log").open("wb") as errlog:
        process = await anyio.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, cwd=tmp_path
        )
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send(_lines(_OPENING[0]))
            await process.stdout.receive()
            await process.stdin.send(_lines(_OPENING[1]))
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "python_nap", "arguments": {"seconds": 600}},
            }
            await process.stdin.send((json.dumps(call) + "\n").encode())
            await wait_until((tmp_path / "started.txt").exists, timeout=30)  # the call is running: the host leaves
            await process.stdin.aclose()
            with anyio.fail_after(30):  # a hang's bound: the tool sleeps 600 s
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    log = (tmp_path / "stdio.log").read_text()
    assert "Traceback" not in log, log
    assert code == 0, (code, log)


async def test_case_16_the_sdk_clients_own_timeout_cuts_the_gateways_call() -> None:
    started: list[str] = []

    @pythontool
    async def watched(seconds: float) -> str:
        """Sleep, then answer; say it started."""
        started.append("started")
        await anyio.sleep(seconds)
        return "slept"

    kernel = FunctionKernel()
    kernel.register_python_tool("x.watched", watched)
    kernel.register_python_tool("x.sleepy", sleepy)
    served = build_mcp_server(kernel)
    async with Client(served) as client:
        with pytest.raises(Exception, match="(?i)time"):
            await client.call_tool("python_x_watched", {"seconds": 30}, read_timeout_seconds=0.3)
        await wait_until(lambda: kernel.calls_in_flight() == [], timeout=20)
        after = await client.call_tool("python_x_sleepy", {"seconds": 0})
    assert started == ["started"]
    assert "slept" in _text(after)
    await kernel.close()


async def test_case_37_a_wire_deadline_of_zero_is_refused_as_not_started(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with stdio_session(config) as client:
        [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
        zero = await client.call_tool(name, {"seconds": 200}, meta={"io.kavalai/deadline": 0})
        after = await client.call_tool(name, {"seconds": 0})
    assert zero.is_error
    assert "deadline" in _text(zero), _text(zero)
    assert not (tmp_path / "started.txt").exists()  # the tool never ran
    assert "slept" in _text(after)


async def test_case_38_raw_json_deadlines_python_reads_as_inf_and_nan(tmp_path: Path) -> None:
    config = _config(tmp_path)
    params = '"params":{"name":"python_nap","arguments":{"seconds":0},"_meta":{"io.kavalai/deadline":%s}}'
    call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call",' + params + "}\n"
    sent = [(2, "1e400"), (3, "NaN"), (4, "-1e400"), (5, "5000")]
    answers: dict[int, dict[str, Any]] = {}
    with (tmp_path / "stdio.log").open("wb") as errlog:
        process = await anyio.open_process(
            serve_command(config), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, cwd=tmp_path
        )
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send(_lines(*_OPENING) + "".join(call % pair for pair in sent).encode())
            received = b""
            with anyio.fail_after(60):  # a hang's bound
                while len(answers) < 5:
                    received += await process.stdout.receive()
                    *whole, received = received.split(b"\n")
                    answers.update((answer["id"], answer) for answer in map(json.loads, whole))
            await process.stdin.aclose()
            with anyio.fail_after(30):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    stderr = (tmp_path / "stdio.log").read_text()
    assert "Traceback" not in stderr, stderr
    assert "slept" in json.dumps(answers[2]), answers[2]  # clamped: the call ran
    assert answers[3].get("error") or "slept" in json.dumps(answers[3]), answers[3]  # refused as JSON, or ignored
    assert answers[4]["result"]["isError"], answers[4]  # -inf: a deadline already passed
    assert "slept" in json.dumps(answers[5]), answers[5]
