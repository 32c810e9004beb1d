"""Hostile round 9 of issue 36 (``tests/kernel/hostile_cases_ninth.md``): limits from a configuration file and its
``${VAR}`` (cases 8-9), ``close()`` racing lazy MCP connects, a REST call and a sampling callback (28-30), and the
REST ``deadline_header`` (41-42), each against real servers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.adapters.test_threads import _until
from tests.kernel.test_ownership import deadline_server
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, McpServer, RestServer
from kavalai.config import KernelConfig, build_kernel
from kavalai.errors import ConfigurationError, KernelClosedError
from kavalai.kernel import MAX_SECONDS, deadline

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
"""A tool for the configuration cases."""


def hello() -> str:
    """Answer."""
    return "hello"
'''


def _config(tmp_path: Path, entry: dict[str, Any]) -> KernelConfig:
    (tmp_path / "edge_tools_ninth.py").write_text(TOOLS, encoding="utf-8")
    return KernelConfig.from_dict({**entry}, base_dir=tmp_path)


# ---------------------------------------------------------------------------------------- 8-9: config files


@pytest.mark.parametrize(("value", "seconds"), [("5", 5.0), ("inf", MAX_SECONDS)])
def test_case_8_a_python_function_timeout_written_as_text_is_read_as_the_number(
    tmp_path: Path, value: str, seconds: float
) -> None:
    config = _config(
        tmp_path, {"python_functions": [{"function": "edge_tools_ninth.hello", "name": "hi", "timeout": "${T}"}]}
    )
    kernel = build_kernel(config, env={"T": value})
    assert kernel.get_tool_definition("python://hi").timeout == seconds


def test_case_8_a_python_function_timeout_that_is_no_number_is_a_configuration_error(tmp_path: Path) -> None:
    config = _config(
        tmp_path, {"python_functions": [{"function": "edge_tools_ninth.hello", "name": "hi", "timeout": "${T}"}]}
    )
    with pytest.raises(ConfigurationError, match=r"python_functions\[0\]"):
        build_kernel(config, env={"T": "abc"})


@pytest.mark.parametrize("value", ["nan", "-1", "0"])
def test_case_9_a_rest_server_timeout_from_a_variable_is_checked(tmp_path: Path, value: str) -> None:
    config = _config(tmp_path, {"rest_servers": [{"name": "r", "url": "http://127.0.0.1:9", "timeout": "${T}"}]})
    with pytest.raises(ConfigurationError, match=r"rest_servers\[0\]"):
        build_kernel(config, env={"T": value})


def test_case_9_a_rest_server_timeout_of_1e999_is_clamped(tmp_path: Path) -> None:
    config = _config(tmp_path, {"rest_servers": [{"name": "r", "url": "http://127.0.0.1:9", "timeout": "${T}"}]})
    build_kernel(config, env={"T": "1e999"})  # registered: the server's timeout clamped to the maximum
    assert RestServer(name="r", url="http://127.0.0.1:9", timeout="1e999").timeout == MAX_SECONDS  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------- 28-30: close() racing


def _children(module: str) -> set[int]:
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.cmdline()[1:3] == ["-m", module]:
                found.add(child.pid)
        except psutil.Error:  # ended meanwhile
            continue
    return found


async def test_case_28_close_while_first_calls_of_a_lazy_server_connect() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server())
    try:
        calls = [asyncio.create_task(kernel.call_tool("mcp://d.echo", {"text": "x"})) for _ in range(10)]
        await asyncio.sleep(0.05)  # the server is starting for them
        with anyio.fail_after(30):
            await kernel.close()
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
        errors = [each for each in outcomes if isinstance(each, BaseException)]
        assert all(isinstance(each, KernelClosedError) for each in errors), errors
        assert kernel.calls_in_flight() == []
        await _until(lambda: not _children("tests.servers.mcp_deadline"), timeout=10)
        reply = await kernel.call_tool("mcp://d.echo", {"text": "again"})
        assert reply.result == "again"  # type: ignore[attr-defined]
        assert len(_children("tests.servers.mcp_deadline")) == 1
    finally:
        await kernel.close()


async def test_case_29_close_while_a_rest_call_waits_on_a_slow_server() -> None:
    async def answer(request: Request) -> JSONResponse:
        await asyncio.sleep(float(request.query_params.get("wait", "0")))
        return JSONResponse({"waited": request.query_params.get("wait", "0")})

    app = Starlette(routes=[Route("/answer", answer)])
    with serve(app) as url:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        kernel = FunctionKernel()
        kernel.register_rest_server(RestServer(name="s", url=url))
        kernel.register_rest_tool("s", "slow", "GET", path="/answer?wait=5")
        kernel.register_rest_tool("s", "fast", "GET", path="/answer")
        try:
            call = asyncio.create_task(kernel.call_tool("rest://s.slow"))
            await _until(lambda: len(kernel.calls_in_flight()) == 1)
            await asyncio.sleep(0.1)  # the request is on the wire
            with anyio.fail_after(20):
                await kernel.close()
                with pytest.raises(KernelClosedError) as info:
                    await call
            assert info.value.uri == "rest://s.slow"
            ours = [
                each
                for each in psutil.Process().net_connections(kind="tcp")
                if each.raddr and each.raddr.port == port and each.status == psutil.CONN_ESTABLISHED
            ]
            assert ours == [], ours
            assert (await kernel.call_tool("rest://s.fast")).result == {"waited": "0"}  # type: ignore[attr-defined]
        finally:
            await kernel.close()


async def test_case_30_close_while_a_sampling_callback_hangs() -> None:
    asked = asyncio.Event()

    async def never(request: Any) -> str:
        asked.set()
        await asyncio.Event().wait()
        return "never"

    kernel = FunctionKernel()
    features = {"name": "feat", "command": sys.executable, "args": ["-m", "tests.servers.mcp_features"]}
    # the tool asks on the session, as handshake-era servers do: the handshake's protocol
    kernel.register_mcp_server(McpServer(**features, cwd=str(ROOT), sampling=never, protocol="legacy", timeout=60))
    try:
        call = asyncio.create_task(kernel.call_tool("mcp://feat.ask_model", {"question": "?"}))
        with anyio.fail_after(30):
            await asked.wait()
            await kernel.close()
            with pytest.raises(KernelClosedError) as info:
                await call
        assert info.value.uri == "mcp://feat.ask_model"
        assert kernel.calls_in_flight() == []
        await _until(lambda: not _children("tests.servers.mcp_features"), timeout=10)
    finally:
        await kernel.close()


# ------------------------------------------------------------------------------ 41-42: the deadline header


@pytest.mark.parametrize(
    "header",
    ["keep-alive", "TE", "Upgrade", "Trailer", "Proxy-Connection", "AUTHORIZATION", "Set-Cookie", "X Deadline",
     "X-Deadline\r\n"],
)  # fmt: skip
def test_case_41_hop_by_hop_framing_and_malformed_deadline_headers_are_refused(header: str) -> None:
    with pytest.raises(ValidationError, match="deadline_header"):
        RestServer(name="s", url="http://127.0.0.1:9", deadline_header=header)


async def test_case_42_the_deadline_header_round_trip() -> None:
    seen: list[str | None] = []

    async def echo(request: Request) -> JSONResponse:
        seen.append(request.headers.get("x-deadline-ms"))
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/echo", echo)])
    with serve(app) as url:
        kernel = FunctionKernel()
        kernel.register_rest_server(RestServer(name="s", url=url, deadline_header="X-Deadline-Ms"))
        kernel.register_rest_tool("s", "echo", "GET", path="/echo")
        try:
            with deadline(2):
                await kernel.call_tool("rest://s.echo")
            await kernel.call_tool("rest://s.echo", timeout=0.5)
            await kernel.call_tool("rest://s.echo", timeout=None)
        finally:
            await kernel.close()
    in_block, with_timeout, without = seen
    for sent, most in ((in_block, 2000), (with_timeout, 500)):
        assert sent is not None
        assert sent.isdigit(), sent
        assert 0 <= int(sent) <= most, sent
    assert without is None
