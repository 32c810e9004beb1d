"""A host of ``kavalai serve`` whose session ends without unsubscribing leaves nothing subscribed behind it: the
gateway takes its subscriptions back at the backend, but those another host still holds.

Real processes throughout: ``kavalai serve`` (over streamable HTTP, or over stdio), fronting a real stdio MCP server
of the handshake era that records every ``resources/subscribe`` and ``resources/unsubscribe`` it is sent
(``tests/servers/mcp_subscribed.py``); the hosts are the official SDK's client in the handshake era (which deletes
its HTTP session when it closes), or a host writing JSON-RPC lines on the gateway's stdin and then closing it.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import mcp_types as types
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client import Client
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from tests.serve.test_serve import http_server, read, serve_command, wait_until

from kavalai import FunctionKernel, McpServer
from kavalai.cli._run import EXIT_USAGE
from kavalai.cli._serve import build_serve_parser
from kavalai.cli._serve import serve_command as serve_command_of
from kavalai.kernel import MAX_SECONDS
from kavalai.serve import build_mcp_server, http_app
from kavalai.serve._hosts import MAX_ASKING, MAX_UNSENT, HostSessions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Where the backend records the subscription requests it is sent."""
    return tmp_path / "subscriptions.log"


@pytest.fixture
def config(tmp_path: Path, log: Path) -> Path:
    """``kavalai serve``'s configuration: the recording backend over stdio, in the handshake era."""
    return _configured(tmp_path / "tools.yaml", log)


def _configured(path: Path, log: Path, **settings: Any) -> Path:
    """Write at ``path`` a configuration of the recording backend (logging to ``log``) with ``settings``."""
    backend = {
        "name": "subscribed",
        "command": sys.executable,
        "args": ["-m", "tests.servers.mcp_subscribed", str(log)],
        "cwd": str(ROOT),
        "protocol": "legacy",
        **settings,
    }
    path.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return path


def _sent(log: Path) -> list[str]:
    return read(log).splitlines()


async def _subscribe(client: Client, uri: str) -> None:
    """``resources/subscribe``, as a handshake-era host sends it."""
    request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    await client.session.send_request(request, types.EmptyResult)


async def test_a_resource_stays_subscribed_until_the_last_http_host_holding_it_has_gone(
    config: Path, log: Path
) -> None:
    with anyio.fail_after(120):
        async with http_server(config) as (url, _):
            async with Client(url, mode="legacy") as staying:
                async with Client(url, mode="legacy") as leaving:
                    await _subscribe(leaving, "mcp://subscribed/notes://a")
                    await _subscribe(leaving, "mcp://subscribed/notes://b")
                    await _subscribe(staying, "mcp://subscribed/notes://a")
                # The leaving host's session is deleted: what it alone held is unsubscribed, notes://a is kept.
                await wait_until(lambda: "unsubscribe notes://b" in _sent(log), timeout=60)
                assert "unsubscribe notes://a" not in _sent(log)
                [note] = (await staying.read_resource("mcp://subscribed/notes://a")).contents
                assert isinstance(note, types.TextResourceContents)
            # The last host holding notes://a has gone: the backend is unsubscribed.
            await wait_until(lambda: "unsubscribe notes://a" in _sent(log), timeout=60)
    assert _sent(log) == [
        "subscribe notes://a",
        "subscribe notes://b",
        "subscribe notes://a",
        "unsubscribe notes://b",
        "unsubscribe notes://a",
    ]


async def test_a_stdio_hosts_subscriptions_are_taken_back_when_it_closes_stdin(config: Path, log: Path) -> None:
    assert await _stdio_host_leaves_subscribed(config, "mcp://subscribed/notes://a") == 0
    # The gateway unsubscribed at the backend before it closed the backend.
    assert _sent(log) == ["subscribe notes://a", "unsubscribe notes://a"]


async def _stdio_host_leaves_subscribed(config: Path, uri: str) -> int:
    """A host on the stdio gateway's stdin: initializes, subscribes to ``uri``, then closes stdin without
    unsubscribing; the gateway's exit status."""
    with anyio.fail_after(120):
        process = await anyio.open_process(serve_command(config), stderr=subprocess.DEVNULL, cwd=config.parent)
        async with process:
            lines = await _initialized(process)
            await _ask(process, lines, 2, "resources/subscribe", {"uri": uri})
            await process.stdin.aclose()  # the host leaves without unsubscribing
            return await process.wait()


async def _initialized(process: Process) -> BufferedByteReceiveStream:
    """The handshake of a host on the stdio gateway's stdin; the gateway's stdout, as lines."""
    assert process.stdout is not None
    lines = BufferedByteReceiveStream(process.stdout)
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}
    await _ask(process, lines, 1, "initialize", initialize)
    await _write(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return lines


async def _write(process: Process, message: dict[str, Any]) -> None:
    assert process.stdin is not None
    await process.stdin.send(json.dumps(message).encode() + b"\n")


async def _ask(
    process: Process, lines: BufferedByteReceiveStream, request_id: int, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Send a request on the gateway's stdin; its answer (notifications before it are passed over)."""
    await _write(process, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    while True:
        message = json.loads(await lines.receive_until(b"\n", 1 << 20))
        if message.get("id") == request_id:
            assert "result" in message, message
            result: dict[str, Any] = message["result"]
            return result


async def test_a_host_that_leaves_while_its_subscription_is_asked_has_it_taken_back(config: Path, log: Path) -> None:
    """The backend recorded the subscription but has not answered when the host's session is deleted: the gateway
    held it from before it asked, so the session's end unsubscribes it (it was left subscribed for good)."""
    with anyio.fail_after(120):
        async with http_server(config) as (url, _):
            async with Client(url, mode="legacy") as leaving, anyio.create_task_group() as tg:
                tg.start_soon(_subscribe, leaving, "mcp://subscribed/notes://c")  # never answered by the backend
                await wait_until(lambda: "subscribe notes://c" in _sent(log), timeout=60)
                tg.cancel_scope.cancel()  # the host gives up and leaves: its session is deleted
            await wait_until(lambda: "unsubscribe notes://c" in _sent(log), timeout=60)
    assert _sent(log) == ["subscribe notes://c", "unsubscribe notes://c"]


async def test_a_stdio_gateway_ends_although_the_backend_never_answers_its_unsubscribe(
    tmp_path: Path, log: Path
) -> None:
    """The host closes stdin holding ``notes://d``, whose ``resources/unsubscribe`` the backend records and never
    answers: the gateway's teardown gives up after the backend's timeout and exits 0 (nothing waits for good)."""
    config = _configured(tmp_path / "hanging.yaml", log, timeout=3)
    assert await _stdio_host_leaves_subscribed(config, "mcp://subscribed/notes://d") == 0
    assert _sent(log) == ["subscribe notes://d", "unsubscribe notes://d"]


async def test_a_backend_slow_to_unsubscribe_is_waited_for_past_the_sdks_teardown_bound(
    config: Path, log: Path
) -> None:
    """The host closes stdin holding ``notes://e``, whose ``resources/unsubscribe`` the backend answers after 6.5 s
    (the SDK gives a connection's teardown 5 s): the release runs in the gateway's own task group, so the backend
    answers it (it records its answer) before the gateway exits 0 (it was cut short at 5 s and cancelled)."""
    assert await _stdio_host_leaves_subscribed(config, "mcp://subscribed/notes://e") == 0
    assert _sent(log) == ["subscribe notes://e", "unsubscribe notes://e", "answered unsubscribe notes://e"]


async def test_a_host_whose_session_has_ended_is_never_known_again() -> None:
    """A request of a host still running after its session's teardown (a subscribe whose backend fails late) used to
    register the dead connection again: now it holds nothing, and a subscription it asks for is refused (nothing
    would take it back). The host is the SDK's client of a real SDK server, in memory."""
    unsubscribed: list[str] = []
    requests: list[ServerRequestContext[Any]] = []

    async def unsubscribe(uri: str) -> None:
        unsubscribed.append(uri)

    hosts = HostSessions(lambda server, uri: uri, unsubscribe)

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        requests.append(ctx)
        assert hosts.subscribe(ctx, "notes://a", subscribe=True)
        return types.ListToolsResult(tools=[])

    with anyio.fail_after(30):
        async with Client(Server("host-ends", on_list_tools=list_tools), mode="legacy") as client:
            await client.list_tools()
            [ctx] = requests
            assert hosts.held("notes://a")
            assert not hosts.ended(ctx)
    # The session ended: its teardown took notes://a back, and the host is not known again.
    assert hosts.ended(ctx)
    assert unsubscribed == ["notes://a"]
    assert not hosts.subscribe(ctx, "notes://a", subscribe=False)  # the late failure's undoing: a no-op
    with pytest.raises(MCPError, match="session has ended"):
        hosts.subscribe(ctx, "notes://b", subscribe=True)
    assert not hosts.held("notes://a")
    assert not hosts.held("notes://b")
    assert hosts.set_level(ctx, "debug") == "debug"
    hosts.seen(ctx).subscribed.add("notes://c")  # what a late request does to its record stays with it
    assert not hosts.held("notes://c")


async def test_an_idle_expired_http_hosts_subscriptions_are_taken_back(config: Path, log: Path) -> None:
    """``--session-idle-timeout 2``: a host that subscribes and then sends nothing more, holds no event stream open
    and never deletes its session (a host whose process went) has its session ended by the gateway after 2 s idle,
    which unsubscribes at the backend what it held; the session is gone (404)."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}
    with anyio.fail_after(120):
        async with http_server(config, "--session-idle-timeout", "2") as (url, _), aiohttp.ClientSession() as http:

            async def post(message: dict[str, Any]) -> tuple[int, str]:
                async with http.post(url, headers=headers, json=message) as answer:
                    if "mcp-session-id" in answer.headers:
                        headers["mcp-session-id"] = answer.headers["mcp-session-id"]
                    return answer.status, await answer.text()

            assert (await post(_request(1, "initialize", initialize)))[0] == 200
            assert (await post({"jsonrpc": "2.0", "method": "notifications/initialized"}))[0] == 202
            status, subscribed = await post(_request(2, "resources/subscribe", {"uri": _B}))
            assert status == 200
            assert '"result":{}' in subscribed.replace(" ", "")
            # The host goes quiet: after 2 s idle the gateway ends its session and takes notes://b back.
            await wait_until(lambda: "unsubscribe notes://b" in _sent(log), timeout=60)
            assert (await post(_request(3, "resources/list", {})))[0] == 404  # the session is gone
    assert _sent(log) == ["subscribe notes://b", "unsubscribe notes://b"]


_B = "mcp://subscribed/notes://b"


def _request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (["--transport", "http", "--stateless"], "--session-idle-timeout needs --transport http without --stateless"),
        ([], "--session-idle-timeout needs --transport http without --stateless"),
    ],
)
def test_a_session_idle_timeout_without_sessions_or_not_positive_is_a_usage_error(
    config: Path, options: list[str], why: str
) -> None:
    if not any(option.startswith("--session-idle-timeout") for option in options):
        options = [*options, "--session-idle-timeout", "5"]
    args = build_serve_parser().parse_args([str(config), *options])
    err = io.StringIO()
    assert serve_command_of(args, stderr=err) == EXIT_USAGE
    assert err.getvalue() == f"kavalai serve: {why}\n"
    with pytest.raises(ValueError, match="needs sessions"):
        http_app(build_mcp_server(FunctionKernel()), stateless=True, session_idle_timeout=5)


@pytest.mark.parametrize("given", ["0", "-1", "nan", "five"])
def test_a_session_idle_timeout_that_is_not_a_positive_number_is_a_usage_error_of_the_option(
    config: Path, given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_serve_parser().parse_args([str(config), "--transport", "http", f"--session-idle-timeout={given}"])
    assert exited.value.code == EXIT_USAGE
    assert f"argument --session-idle-timeout: {given!r}" in capsys.readouterr().err


def test_a_session_idle_timeout_past_a_year_is_a_year_as_every_limit() -> None:
    args = build_serve_parser().parse_args(["c.yaml", "--transport", "http", "--session-idle-timeout=inf"])
    assert args.session_idle_timeout == MAX_SECONDS


async def test_a_host_that_does_not_read_costs_the_gateway_a_bounded_number_of_notifications(
    config: Path, log: Path
) -> None:
    """A stdio host calls a tool whose backend sends 3,000 log messages of 2,000 characters during the call, and never
    reads the gateway's stdout: the gateway holds at most ``MAX_UNSENT`` of them unsent for it and drops the rest,
    saying so on stderr (it held every one, 6 MB and 3,000 tasks, waiting for a host that does not read)."""
    errors = config.parent / "gateway.err"
    with anyio.fail_after(120), errors.open("wb") as stderr:
        process = await anyio.open_process(serve_command(config), stderr=stderr, cwd=config.parent)
        async with process:
            await _initialized(process)
            flood = {"name": "mcp_subscribed_flood", "arguments": {"count": 3000, "size": 2000}}
            await _write(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": flood})
            # The host reads nothing more: the gateway's stdout fills, and what comes for the host is dropped.
            await wait_until(lambda: "dropped" in read(errors), timeout=100)
            process.kill()
    warning = next(line for line in read(errors).splitlines() if "dropped" in line)
    assert f"a host reads too slowly ({MAX_UNSENT} notifications unsent): 1 dropped so far" in warning


async def test_a_server_asking_many_questions_at_once_gets_at_most_max_asking_put_to_the_host(
    config: Path, log: Path
) -> None:
    """During a host's call the backend puts 40 elicitations at once: the host is asked ``MAX_ASKING`` of them at once
    (it answers none until the backend has recorded the refusal of the others), the others are refused to the
    backend at once, saying why (all 40 were put to the host, each waiting for its answer)."""
    kernel = FunctionKernel()
    backend = {"command": sys.executable, "args": ["-m", "tests.servers.mcp_subscribed", str(log)], "cwd": ROOT}
    kernel.register_mcp_server(McpServer(name="subscribed", protocol="legacy", timeout=60, **backend))
    asked = 0
    most = 0

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        nonlocal asked, most
        asked += 1
        most = max(most, asked)
        # answered once the backend was refused every question the host was not put
        await wait_until(lambda: _sent(log).count("refused elicitation") >= 40 - MAX_ASKING, timeout=50)
        asked -= 1
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    try:
        server = build_mcp_server(kernel)
        await kernel.connect()
        with anyio.fail_after(60):
            async with Client(server, mode="legacy", elicitation_callback=elicit) as host:
                result = await host.call_tool("mcp_subscribed_ask_many", {"count": 40})
    finally:
        await kernel.close()
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert text.text == (
        f"accepted {MAX_ASKING}, refused {40 - MAX_ASKING}: "
        f"kavalai serve puts at most {MAX_ASKING} requests of one call to its host at once"
    )
    assert most == MAX_ASKING


def test_every_notification_to_a_host_crosses_the_unsent_bound() -> None:
    """The gate of ``MAX_UNSENT``: the gateway's one ``send_notification`` is in ``HostSessions._send``, which bounds
    every connection (a known host, a forgotten one, one whose teardown ran with a call still in flight), and every
    log message, update and list change to a host is sent through it."""
    folder = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "serve"
    sends = {path.name: path.read_text().count(".send_notification(") for path in sorted(folder.glob("*.py"))}
    assert {name: count for name, count in sends.items() if count} == {"_hosts.py": 1}
    source = (folder / "_hosts.py").read_text()
    gate = source[source.index("    async def _send(") :]
    assert gate.index(".send_notification(") > gate.index("if unsent.count >= MAX_UNSENT")
    assert "self._hosts.get(key)" not in gate[: gate.index(".send_notification(")]  # not only for known hosts
    # Progress goes by the request's own report_progress, in one place, one send at a time per call (_progress.py).
    progress = {path.name: path.read_text().count(".report_progress(") for path in sorted(folder.glob("*.py"))}
    assert {name: count for name, count in progress.items() if count} == {"_progress.py": 1}


async def test_a_2026_07_28_hosts_record_ends_with_its_request() -> None:
    """A 2026-07-28 host's connection is made for one request; its record holds the request's session, which holds
    the connection, so the weak key alone never let it go: every request of such a host used to add a record the
    gateway kept for its life (200 listings, 200 records). Now each is forgotten when its request's teardown runs,
    as a session's is when it ends. The host is the SDK's client of a real SDK server, in memory."""

    async def unsubscribe(uri: str) -> None:
        raise AssertionError("nothing was subscribed")

    hosts = HostSessions(lambda server, uri: uri, unsubscribe)
    eras: list[bool] = []

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        eras.append(ctx.protocol_version >= "2026-07-28")
        hosts.seen(ctx)
        assert len(hosts._hosts) == 1  # known within its request
        return types.ListToolsResult(tools=[])

    with anyio.fail_after(30):
        async with Client(Server("host-ends", on_list_tools=list_tools), mode="auto") as client:
            for _ in range(200):
                await client.list_tools()
            assert eras == [True] * 200
            assert len(hosts._hosts) == 0  # the client is still connected: only its requests have ended
