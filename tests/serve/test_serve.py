"""``kavalai serve``: the kernel of a configuration file served as one MCP server.

The server runs as a real subprocess (``python -m kavalai.cli._serve``) with a configuration holding Python tools
(a module next to the file), the demo bookshop's REST API (its OpenAPI document) and the demo MCP server. It is
driven over stdio and streamable HTTP by the official SDK's client and, when it is installed, by FastMCP's client.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import Process
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from kavalai import FunctionKernel, pythontool
from kavalai.demo.rest_app import serve_demo_app
from kavalai.serve import ExposedTools, build_mcp_server, mcp_output_schema

ROOT = Path(__file__).resolve().parents[2]
TOKEN_VAR = "KAVALAI_SERVE_TEST_TOKEN"
TOKEN = "serve-test-token-0123456789"
NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

TOOLS_MODULE = '''
"""Python tools for the served kernel."""

from pathlib import Path

import anyio

from kavalai.kernel import current_call


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fail(reason: str) -> str:
    """Always fail with the reason given."""
    raise ValueError(reason)


async def count(n: int) -> int:
    """Count to n, reporting progress at each step."""
    call = current_call()
    for i in range(n):
        if call is not None:
            await call.report_progress(i + 1, n, f"step {i + 1}")
    return n


async def wait(marker: str) -> str:
    """Write 'started' to the marker file, sleep, and write 'cancelled' there when cancelled."""
    Path(marker).write_text("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        Path(marker).write_text("cancelled")
        raise
    return "finished"
'''


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
async def rest_url() -> AsyncIterator[str]:
    """The demo bookshop, served by this test's event loop."""
    async with serve_demo_app() as url:
        yield url


@pytest.fixture
def config(tmp_path: Path, rest_url: str) -> Path:
    """A configuration with Python tools, the bookshop's OpenAPI tools and the demo MCP server."""
    (tmp_path / "serve_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    document = {
        "python_functions": [
            {"function": "serve_tools.add", "name": "math.add"},
            {"function": "serve_tools.add", "name": "math_add"},  # the same provider name as math.add
            {"function": "serve_tools.fail", "name": "fail"},
            {"function": "serve_tools.count", "name": "count"},
            {"function": "serve_tools.wait", "name": "wait"},
        ],
        "rest_servers": [{"name": "shop", "url": rest_url, "openapi": "/openapi.json", "timeout": 10}],
        "mcp_servers": [{"name": "demo", "command": sys.executable, "args": ["-m", "kavalai.demo.mcp_server"]}],
    }
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")  # JSON is YAML
    return path


def serve_command(config: Path, *options: str) -> list[str]:
    """The command line of ``kavalai serve``."""
    return [sys.executable, "-m", "kavalai.cli._serve", str(config), *options]


@contextlib.asynccontextmanager
async def stdio_session(config: Path, *options: str) -> AsyncIterator[Client]:
    """The official SDK's client on ``kavalai serve`` over stdio (the SDK ends the process on exit)."""
    command = serve_command(config, *options)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(config.parent))
    with (config.parent / "stdio.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


@contextlib.asynccontextmanager
async def http_server(config: Path, *options: str) -> AsyncIterator[tuple[str, Process]]:
    """``kavalai serve --transport http`` on a free port; yields its endpoint URL and process. The process is
    stopped with SIGTERM at the end (killed if it does not stop)."""
    log = anyio.Path(config.parent / "http.log")
    env = {**os.environ, TOKEN_VAR: TOKEN}
    command = serve_command(config, "--transport", "http", "--port", "0", *options)
    with (config.parent / "http.log").open("wb") as errlog:
        process = await anyio.open_process(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog, env=env
        )
        try:
            yield await _endpoint(log, process), process
        finally:
            await stop(process)


async def _endpoint(log: anyio.Path, process: Process) -> str:
    # A hang's bound, not a speed: the gateway's start (importing the SDK, starting its servers) took past 20 s at
    # load 11-20 on 2 cores; a process that exits is reported at once below. Within the suite's 60 s a test.
    with anyio.fail_after(45):
        while True:
            found = re.search(r"at (http://\S+)", await log.read_text(encoding="utf-8", errors="replace"))
            if found:
                return found.group(1)
            if process.returncode is not None:
                raise AssertionError(f"kavalai serve exited with {process.returncode}: {await log.read_text()}")
            await anyio.sleep(0.05)


async def stop(process: Process) -> None:
    """SIGTERM, then SIGKILL when the process has not ended within 10 s."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    with anyio.move_on_after(10):
        await process.wait()
    if process.returncode is None:
        process.kill()
        with anyio.move_on_after(5):
            await process.wait()
    await process.aclose()


async def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Poll ``condition`` until it holds, at most ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 - files and callbacks, no event to wait on
            await anyio.sleep(0.02)


def read(path: Path) -> str:
    """The file's text, or ``""`` when it does not exist yet."""
    return path.read_text() if path.exists() else ""


# ------------------------------------------------------------------------------------------- the SDK's client


def _check_result(result: Any, expected: Any) -> None:
    """A successful result: ``structuredContent`` is ``expected`` and the text content is the same JSON."""
    assert result.is_error is False, result.content
    assert result.structured_content == expected
    assert json.loads(result.content[0].text) == expected


async def _check_tool_kinds(client: Client) -> None:
    """List the tools, call one of each kind and a failing one, through ``client``."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert all(NAME_RULE.match(name) for name in listed)
    assert {"python_fail", "rest_shop_getBook", "rest_shop_listBooks", "mcp_demo_text_stats"} <= set(listed)
    assert listed["rest_shop_getBook"].title == "rest://shop.getBook"
    assert listed["python_fail"].input_schema["properties"]["reason"]["type"] == "string"
    assert listed["mcp_demo_text_stats"].output_schema is not None
    # python://math.add and python://math_add would both be python_math_add: each gets a hashed name
    adders = sorted(name for name, tool in listed.items() if tool.title in {"python://math.add", "python://math_add"})
    assert len(adders) == 2
    assert all(re.fullmatch(r"python_math_add_[0-9a-f]{8}", name) for name in adders)

    for name in adders:
        _check_result(await client.call_tool(name, {"a": 1, "b": "2"}), {"result": 3})
    _check_result(
        await client.call_tool("rest_shop_getBook", {"book_id": 3}),
        {"id": 3, "title": "Kindred", "author": "Octavia E. Butler", "year": 1979},
    )
    books = await client.call_tool("rest_shop_listBooks", {"author": "Ursula K. Le Guin"})
    assert [book["id"] for book in books.structured_content["result"]] == [1, 2]
    _check_result(
        await client.call_tool("mcp_demo_text_stats", {"text": "to be or not"}),
        {"words": 4, "characters": 12, "longest_word": "not"},
    )
    failed = await client.call_tool("python_fail", {"reason": "out of coffee"})
    assert failed.is_error is True
    assert "out of coffee" in failed.content[0].text
    refused = await client.call_tool("rest_shop_getBook", {"book_id": 99})
    assert refused.is_error is True
    assert "404" in refused.content[0].text
    invalid = await client.call_tool("python_fail", {})  # the kernel's input validation: a tool error too
    assert invalid.is_error is True
    assert "reason" in invalid.content[0].text


async def test_stdio_serves_every_kind_of_tool(config: Path) -> None:
    with anyio.fail_after(30):
        async with stdio_session(config) as client:
            await _check_tool_kinds(client)
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("python_nope", {})


async def test_progress_and_cancellation_pass_through(config: Path) -> None:
    marker = config.parent / "marker.txt"
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(30):
        async with stdio_session(config) as client:
            counted = await client.call_tool("python_count", {"n": 3}, progress_callback=on_progress)
            _check_result(counted, {"result": 3})
            await wait_until(lambda: len(seen) == 3)
            assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "python_wait", {"marker": str(marker)})
                await wait_until(lambda: read(marker) == "started")
                group.cancel_scope.cancel()  # the client gives up: the kernel call is cancelled
            await wait_until(lambda: read(marker) == "cancelled")
            _check_result(
                await client.call_tool("python_math_add_" + _hash("python://math.add"), {"a": 2, "b": 2}), {"result": 4}
            )


def _hash(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:8]


async def test_http_needs_the_bearer_token_and_serves_every_kind_of_tool(config: Path) -> None:
    with anyio.fail_after(30):
        async with http_server(config, "--bearer-token-env", TOKEN_VAR) as (url, process):
            async with httpx2.AsyncClient(timeout=10) as http:
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                assert (await http.post(url, json=ping)).status_code == 401
                wrong = await http.post(url, json=ping, headers={"Authorization": "Bearer nope"})
                assert wrong.status_code == 401
                assert wrong.headers["www-authenticate"].startswith("Bearer")
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                await _check_tool_kinds(client)
            await stop(process)
            assert process.returncode == 0
        log = await anyio.Path(config.parent / "http.log").read_text()
        assert "stopped (SIGTERM)" in log
        assert "Traceback" not in log


async def test_allow_and_deny_filter_the_tools(config: Path) -> None:
    filters = ("--allow", "python://*", "--allow", "mcp://demo.text_*", "--deny", "*fail")
    with anyio.fail_after(30):
        async with http_server(config, *filters) as (url, _), Client(url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {
                "python_count",
                "python_wait",
                "python_math_add_" + _hash("python://math.add"),
                "python_math_add_" + _hash("python://math_add"),
                "mcp_demo_text_stats",
            }
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("python_fail", {"reason": "denied"})


def test_a_bad_configuration_exits_with_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("python_functions: [nowhere.to_be_found]\n", encoding="utf-8")
    result = subprocess.run(serve_command(bad), capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert "python_functions[0]" in result.stderr
    missing_token = subprocess.run(
        serve_command(bad, "--transport", "http", "--bearer-token-env", "KAVALAI_SERVE_UNSET_VARIABLE"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "KAVALAI_SERVE_UNSET_VARIABLE"},
    )
    assert missing_token.returncode == 2
    assert "KAVALAI_SERVE_UNSET_VARIABLE" in missing_token.stderr


# -------------------------------------------------------------------------------------------- FastMCP's client


async def test_fastmcp_client_over_stdio_and_http(config: Path) -> None:
    import fastmcp  # a dev dependency: the FastMCP client is one of the real clients served
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

    command = serve_command(config)
    stdio = StdioTransport(command=command[0], args=command[1:], cwd=str(config.parent), keep_alive=False)
    with anyio.fail_after(30):
        async with fastmcp.Client(stdio) as client:
            await _check_with_fastmcp(client)
        async with http_server(config, "--bearer-token-env", TOKEN_VAR) as (url, _):
            async with fastmcp.Client(StreamableHttpTransport(url, auth=TOKEN)) as client:
                await _check_with_fastmcp(client)
            with pytest.raises(MCPError, match="error response"):  # the 401, as FastMCP reports it
                async with fastmcp.Client(StreamableHttpTransport(url, auth="wrong-token")) as client:
                    await client.list_tools()


async def _check_with_fastmcp(client: Any) -> None:
    names = {tool.name for tool in await client.list_tools()}
    assert {"python_fail", "rest_shop_getBook", "mcp_demo_text_stats"} <= names
    book = await client.call_tool("rest_shop_getBook", {"book_id": 1})
    assert book.structured_content["title"] == "The Left Hand of Darkness"
    stats = await client.call_tool("mcp_demo_text_stats", {"text": "a bb ccc"})
    assert stats.structured_content == {"words": 3, "characters": 8, "longest_word": "ccc"}
    added = await client.call_tool("python_math_add_" + _hash("python://math.add"), {"a": 40, "b": 2})
    assert added.structured_content == {"result": 42}
    assert added.data == 42  # the schema's "x-fastmcp-wrap-result" mark: FastMCP's client unwraps the value
    assert stats.data.words == 3  # an object stays the object
    books = await client.call_tool("rest_shop_listBooks", {"author": "Ursula K. Le Guin"})
    assert [book.id for book in books.data] == [1, 2]  # a list, its items typed by the schema
    failed = await client.call_tool("python_fail", {"reason": "no"}, raise_on_error=False)
    assert failed.is_error is True


# ------------------------------------------------------------------------------------ names and schemas, in-process


@pythontool
def _echo(text: str) -> str:
    """Echo the text."""
    return text


async def test_names_are_provider_safe_reversible_and_filtered(kernel: FunctionKernel) -> None:
    for name in ("fs.ls", "fs_ls", "a" * 80, "dots.and-dashes"):
        kernel.register_python_tool(name, _echo)
    exposed = ExposedTools(kernel, deny=["python://dots*"])
    names = exposed.names()
    assert sorted(names.values()) == ["python://" + "a" * 80, "python://fs.ls", "python://fs_ls"]
    for name, uri in names.items():
        assert NAME_RULE.match(name)
        assert exposed.uri_of(name) == uri
        assert exposed.name_of(uri) == name
    assert ExposedTools(kernel).name_of("python://dots.and-dashes") == "python_dots_and-dashes"
    assert exposed.uri_of("python_dots_and-dashes") is None
    # the names are settled among the tools offered: alone, python://fs.ls needs no hash
    assert ExposedTools(kernel, allow=["python://fs.*"]).names() == {"python_fs_ls": "python://fs.ls"}


class _CountingKernel(FunctionKernel):
    """A kernel that counts how often its tools are listed."""

    listings = 0

    def list_tools(self, pattern: str | None = None) -> list[str]:
        self.listings += 1
        return super().list_tools(pattern)


async def test_the_names_are_remade_only_when_the_kernels_tools_changed() -> None:
    kernel = _CountingKernel()
    kernel.register_python_tool("fs.ls", _echo)
    exposed = ExposedTools(kernel)
    async with Client(build_mcp_server(kernel)) as client:
        for _ in range(3):
            assert [tool.name for tool in (await client.list_tools()).tools] == ["python_fs_ls"]
            assert (await client.call_tool("python_fs_ls", {"text": "hi"})).structured_content == {"result": "hi"}
            assert exposed.names() == {"python_fs_ls": "python://fs.ls"}
        assert kernel.listings == 2  # once by the server, once by exposed: not a listing per request
        kernel.register_python_tool("fs.cat", _echo)
        assert {tool.name for tool in (await client.list_tools()).tools} == {"python_fs_ls", "python_fs_cat"}
        kernel.remove_tool("python://fs.ls")
        assert [tool.name for tool in (await client.list_tools()).tools] == ["python_fs_cat"]
        assert exposed.uri_of("python_fs_ls") is None
    assert kernel.listings == 5  # the server after each of the two changes, exposed once after both


async def test_a_wrapped_output_schema_describes_the_structured_content(kernel: FunctionKernel) -> None:
    schema = {"type": "array", "items": {"$ref": "#/$defs/Book"}, "$defs": {"Book": {"type": "object"}}}
    kernel.register_rest_server(_rest_server())
    kernel.register_rest_tool("shop", "books", "GET", path="/books", output_schema=schema)
    wrapped = mcp_output_schema(kernel.get_tool_definition("rest://shop.books"))
    assert wrapped == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Book"}}},
        "required": ["result"],
        "$defs": {"Book": {"type": "object"}},
        "x-fastmcp-wrap-result": True,
    }
    kernel.register_python_tool("echo", _echo)
    async with Client(build_mcp_server(kernel, allow=["python://*"])) as client:
        (tool,) = (await client.list_tools()).tools
        assert tool.output_schema is not None
        assert tool.output_schema["properties"]["result"]["type"] == "string"
        assert tool.output_schema["x-fastmcp-wrap-result"] is True
        _check_result(await client.call_tool(tool.name, {"text": "hi"}), {"result": "hi"})


def _rest_server() -> Any:
    from kavalai import RestServer

    return RestServer(name="shop", url="http://127.0.0.1:9")


async def test_a_fastmcp_servers_marked_values_are_served_marked(kernel: FunctionKernel) -> None:
    from kavalai import McpServer

    args = ["-m", "tests.servers.fastmcp_server"]
    kernel.register_mcp_server(McpServer(name="fast", command=sys.executable, args=args, cwd=ROOT))
    await kernel.connect()
    async with Client(build_mcp_server(kernel, allow=["mcp://fast.word_count", "mcp://fast.text_stats"])) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        counting = listed["mcp_fast_word_count"].output_schema
        assert counting is not None
        assert counting["x-fastmcp-wrap-result"] is True
        assert counting["properties"]["result"]["type"] == "integer"
        stats = listed["mcp_fast_text_stats"].output_schema
        assert stats is not None
        assert "x-fastmcp-wrap-result" not in stats
        counted = await client.call_tool("mcp_fast_word_count", {"text": "two words"})
        # Passed through as the FastMCP server sent it: its structuredContent, and its own text of the value.
        assert counted.structured_content == {"result": 2}
        assert counted.content[0].text == "2"
