"""Issue 40: ``kavalai serve`` past one process. ``--stateless`` (no session id, every request alone) with real
clients (the SDK's, FastMCP's, node's ``fetch``), the probes ``/healthz`` and ``/readyz``, ``--workers N`` sharing
one port and ending with their parent, and two stateless replicas behind a real load balancer (HAProxy), one of them
killed under load.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import psutil
import pytest
from anyio.abc import Process
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from tests.serve.test_serve import stop, wait_until
from tests.servers.haproxy import haproxy, haproxy_binary

from kavalai import FunctionKernel, FunctionKernelException, McpServer
from kavalai._listen import REUSE_PORT, listening_socket

# Workers and replicas are real processes, each importing the SDK: slower than most tests on a loaded machine.
pytestmark = pytest.mark.timeout(180)

TOOLS_MODULE = '''
"""Tools that say which process answered."""

import os
from pathlib import Path

import anyio


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def pid() -> int:
    """The id of the process that answers."""
    return os.getpid()


async def count(n: int) -> int:
    """Count to n, reporting progress at each step."""
    from kavalai.kernel import current_call

    call = current_call()
    for i in range(n):
        if call is not None:
            await call.report_progress(i + 1, n, f"step {i + 1}")
    return n


async def hold(folder: str, tag: str) -> int:
    """Mark the start (a file named after this process and the tag), then wait for the file 'release'."""
    Path(folder, f"{os.getpid()}-{tag}").write_text("started")
    while not Path(folder, "release").exists():
        await anyio.sleep(0.02)
    return os.getpid()
'''

NODE_CLIENT = r"""
const [url] = process.argv.slice(2);
const results = [];
for (let i = 0; i < 3; i++) {
  const answer = await fetch(url, {
    method: "POST",
    headers: {"content-type": "application/json", accept: "application/json, text/event-stream"},
    body: JSON.stringify({jsonrpc: "2.0", id: i, method: "tools/call",
                          params: {name: "python_add", arguments: {a: i, b: 40}}}),
  });
  const text = await answer.text();
  const data = text.split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)));
  const reply = data.length ? data[data.length - 1] : JSON.parse(text);
  results.push({status: answer.status, session: answer.headers.get("mcp-session-id"),
                value: reply.result.structuredContent.result});
}
console.log(JSON.stringify(results));
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "scale_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    functions = [{"function": f"scale_tools.{name}", "name": name} for name in ("add", "pid", "count", "hold")]
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"python_functions": functions}), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def replica(
    config: Path, log_name: str, *options: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, Process]]:
    """``kavalai serve --transport http --port 0 OPTIONS``; yields its endpoint URL and process, SIGTERM at the end."""
    log = config.parent / log_name
    command = [sys.executable, "-m", "kavalai.cli._serve", str(config), "--transport", "http", "--port", "0"]
    with log.open("wb") as errlog:
        process = await anyio.open_process(
            [*command, *options],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            cwd=str(config.parent),
            env={**os.environ, "PYTHONPATH": _python_path(config.parent), **(env or {})},
        )
        try:
            yield await _announced_url(log, process), process
        finally:
            await stop(process)


def _python_path(folder: Path) -> str:
    """``folder`` (the tools' module) first on the replica's ``PYTHONPATH``, then what this process was given."""
    return os.pathsep.join(part for part in (str(folder), os.environ.get("PYTHONPATH", "")) if part)


async def _announced_url(log: Path, process: Process) -> str:
    with anyio.fail_after(30):
        while True:
            text = await anyio.Path(log).read_text(errors="replace")
            for word in text.split():
                if word.startswith("http://"):
                    return word
            if process.returncode is not None:
                raise AssertionError(f"kavalai serve exited with {process.returncode}: {text}")
            await anyio.sleep(0.05)


#: The repository (the backends' modules are run from it).
ROOT = Path(__file__).resolve().parents[2]


async def _call(url: str, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """One call on a fresh SDK client (a new connection and, in stateless mode, no session to keep)."""
    async with Client(url) as client:
        result = await client.call_tool(tool, arguments or {})
        assert not result.is_error, result
        return result.structured_content["result"]


# ------------------------------------------------------------------------------------------------- stateless


async def test_stateless_answers_every_client_without_a_session(config: Path) -> None:
    async with replica(config, "stateless.log", "--stateless") as (url, _):
        async with httpx2.AsyncClient(timeout=10) as http:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _initialize_params()}
            answer = await http.post(url, json=init, headers={"Accept": "application/json, text/event-stream"})
            assert answer.status_code == 200
            assert "mcp-session-id" not in answer.headers  # nothing to stick to
        with anyio.fail_after(30):
            async with Client(url) as client:  # one SDK session: each of its requests stands alone
                assert [
                    (await client.call_tool("python_add", {"a": i, "b": 1})).structured_content for i in (1, 2)
                ] == [
                    {"result": 2},
                    {"result": 3},
                ]
                seen: list[tuple[float, float | None, str | None]] = []

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    seen.append((progress, total, message))

                counted = await client.call_tool("python_count", {"n": 2}, progress_callback=on_progress)
                assert counted.structured_content == {"result": 2}
                await wait_until(lambda: len(seen) == 2)  # progress comes back on the request's own stream
                assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
        await _other_clients_add(url, config.parent)


async def test_json_response_answers_each_request_with_one_json_body(config: Path) -> None:
    """``--stateless --json-response``: a call is answered with an ``application/json`` body, also to a client
    that accepts nothing else (an event-stream server answers it 406); the SDK's, FastMCP's and node's clients
    call through it; a call's progress is not sent (no stream), its result is."""
    async with replica(config, "json.log", "--stateless", "--json-response") as (url, _):
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "python_add"}}
        call["params"]["arguments"] = {"a": 2, "b": 5}
        async with httpx2.AsyncClient(timeout=30) as http:
            for accept in ("application/json, text/event-stream", "application/json"):
                answer = await http.post(url, json=call, headers={"Accept": accept})
                assert answer.status_code == 200
                assert answer.headers["content-type"] == "application/json"
                assert answer.json()["result"]["structuredContent"] == {"result": 7}
        with anyio.fail_after(30):
            async with Client(url) as client:
                assert (await client.call_tool("python_add", {"a": 1, "b": 1})).structured_content == {"result": 2}
                seen: list[float] = []

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    seen.append(progress)

                counted = await client.call_tool("python_count", {"n": 2}, progress_callback=on_progress)
                assert counted.structured_content == {"result": 2}
                assert seen == []
        await _other_clients_add(url, config.parent)


@pytest.mark.parametrize(
    ("tool", "arguments", "answered"),
    [
        ("mcp_conformance_test_tool_with_logging", {}, "Tool with logging executed successfully"),
        ("mcp_conformance_test_tool_with_progress", {}, None),
        ("mcp_conformance_test_sampling", {"prompt": "hi"}, None),
    ],
)
async def test_json_response_a_backend_that_logs_reports_progress_or_asks_is_answered_once(
    tmp_path: Path, tool: str, arguments: dict[str, Any], answered: str | None
) -> None:
    """``--stateless --json-response`` fronting a real MCP server whose tool logs, reports progress or asks for a
    sampling: each call is answered with one JSON body (what the backend sent during it dropped, its question
    refused), never left hanging, to a client that accepts JSON only; the gateway still answers afterwards."""
    backend = {"name": "conformance", "command": sys.executable, "args": ["-m", "tests.servers.mcp_conformance"]}
    backend["cwd"] = str(ROOT)
    config = tmp_path / "tools.yaml"
    config.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    async with replica(config, "json-backend.log", "--stateless", "--json-response") as (url, _):
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        async with httpx2.AsyncClient(timeout=60) as http:
            for _ in range(2):
                answer = await http.post(url, json=call, headers={"Accept": "application/json"})
                assert answer.status_code == 200
                assert answer.headers["content-type"] == "application/json"
                body = answer.json()
                assert body["id"] == 9
                assert "result" in body, body
                result = body["result"]
                if answered is not None:
                    assert not result.get("isError"), result
                    assert result["content"][0]["text"] == answered
                elif tool.endswith("sampling"):
                    assert result["isError"] is True
            listed = await http.post(
                url, json={"jsonrpc": "2.0", "id": 10, "method": "tools/list"}, headers={"Accept": "application/json"}
            )
            assert tool in {listed_tool["name"] for listed_tool in listed.json()["result"]["tools"]}


def test_json_response_needs_stateless() -> None:
    from kavalai.serve import build_mcp_server
    from kavalai.serve._transports import http_app

    with pytest.raises(ValueError, match="JSON responses need stateless mode"):
        http_app(build_mcp_server(FunctionKernel()), json_response=True)


async def _other_clients_add(url: str, folder: Path) -> None:
    """FastMCP's client, and node's ``fetch`` when node is present, call ``python_add`` at ``url``."""
    import fastmcp
    from fastmcp.client.transports import StreamableHttpTransport

    with anyio.fail_after(30):
        async with fastmcp.Client(StreamableHttpTransport(url)) as client:
            assert (await client.call_tool("python_add", {"a": 20, "b": 22})).data == 42
    node = shutil.which("node")
    if node is not None:  # what the TypeScript SDK (most MCP hosts) sends: a plain fetch per request
        script = folder / "client.mjs"
        await anyio.Path(script).write_text(NODE_CLIENT, encoding="utf-8")
        done = await anyio.run_process([node, str(script), url], check=True)
        results = json.loads(done.stdout)
        assert [(r["status"], r["session"], r["value"]) for r in results] == [(200, None, 40 + i) for i in range(3)]


def _asking_backend(tmp_path: Path) -> Path:
    from tests.serve.test_relay import ROOT

    backend = {
        "name": "features",
        "command": sys.executable,
        "args": ["-m", "tests.servers.mcp_features"],
        "cwd": str(ROOT),
        "protocol": "legacy",
    }
    config = tmp_path / "asking.yaml"
    config.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return config


#: The backend's tools that ask the host, and what each asks for.
_ASKING = {"consult": "sampling", "greet": "elicitation", "folders": "roots"}


async def test_stateless_refuses_a_backends_request_to_a_handshake_host_as_the_tools_error(tmp_path: Path) -> None:
    """A backend (a real stdio MCP server) asks for sampling, elicitation and roots during a handshake-era host's
    call through a ``--stateless`` gateway: the host, which offers all three, is never asked (a request to it would
    need the session stateless serving does not keep); each call that needed an answer fails with an error naming
    its tool and saying ``--stateless`` has no back channel; a tool that handles the refusal itself gets the same
    reason."""
    from tests.serve.test_relay import Host

    host = Host()
    async with replica(_asking_backend(tmp_path), "asking.log", "--stateless") as (url, _):
        with anyio.fail_after(60):
            async with host.client(url, mode="legacy") as client:
                for tool, capability in _ASKING.items():
                    result = await client.call_tool(
                        f"mcp_features_{tool}", {"question": "?"} if tool == "consult" else {}
                    )
                    assert result.is_error, result
                    text = result.content[0].text  # type: ignore[union-attr]
                    assert f"mcp://features.{tool} failed" in text
                    assert "kavalai serve --stateless has no back channel to the host" in text
                    assert f"'features' asked for {capability}" in text
                    assert text.endswith("(the server refused the call, or passed on a refusal of a request it made)")
                handled = await client.call_tool("mcp_features_ask_model", {"question": "?"})
                assert not handled.is_error
                assert "--stateless has no back channel" in handled.content[0].text  # type: ignore[union-attr]
    assert (host.sampled, host.elicited) == ([], [])


async def test_stateless_asks_a_2026_host_in_the_calls_input_required_rounds(tmp_path: Path) -> None:
    """The same backend through the same ``--stateless`` gateway, asked by a 2026-07-28 host: its requests become
    the call's input-required rounds (``serve/_rounds.py``), which need no session, so the host is asked and each
    call ends with the backend's answer built from the host's."""
    from tests.serve.test_relay import Host

    host = Host()
    async with replica(_asking_backend(tmp_path), "asking.log", "--stateless") as (url, _):
        with anyio.fail_after(60):
            async with host.client(url, mode="auto") as client:
                for tool in _ASKING:
                    result = await client.call_tool(
                        f"mcp_features_{tool}", {"question": "?"} if tool == "consult" else {}
                    )
                    assert not result.is_error, result
                    assert "no back channel" not in str(result.content)
    assert (len(host.sampled), len(host.elicited)) == (1, 1)


async def test_a_round_reaching_another_replica_is_refused_saying_to_route_or_retry(tmp_path: Path) -> None:
    """Two ``--stateless`` replicas of the asking backend's gateway: a 2026-07-28 host's call started on one gets an
    input-required round; the round sent to the other replica (as a balancer without stickiness would) is refused
    with ``INVALID_PARAMS`` saying to route rounds to one process or retry the call; the same round sent back to the
    replica that holds the call finishes it."""
    from tests.serve.test_relay import Host

    from kavalai.serve._rounds import ELSEWHERE

    host = Host()
    config = _asking_backend(tmp_path)
    async with (
        replica(config, "a.log", "--stateless") as (url_a, _),
        replica(config, "b.log", "--stateless") as (url_b, _),
    ):
        with anyio.fail_after(60):
            async with host.client(url_a, mode="auto") as a, host.client(url_b, mode="auto") as b:
                await a.list_tools()
                await b.list_tools()
                round_one = await a.session.call_tool("mcp_features_greet", {}, allow_input_required=True)
                assert isinstance(round_one, types.InputRequiredResult), round_one
                answers = {
                    key: await host.elicit(None, request.params) for key, request in round_one.input_requests.items()
                }
                with pytest.raises(MCPError) as refused:
                    await b.call_tool(
                        "mcp_features_greet", {}, input_responses=answers, request_state=round_one.request_state
                    )
                assert refused.value.code == types.INVALID_PARAMS
                assert refused.value.message == ELSEWHERE.format(tool="mcp_features_greet")
                done = await a.call_tool(
                    "mcp_features_greet", {}, input_responses=answers, request_state=round_one.request_state
                )
                assert not done.is_error, done
                assert "hello Ada" in str(done.content)


def _initialize_params() -> dict[str, Any]:
    return {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}


async def test_the_probes_answer_without_the_token(config: Path) -> None:
    env = {"SCALE_TOKEN": "scale-token-0123456789"}
    async with replica(config, "probes.log", "--bearer-token-env", "SCALE_TOKEN", env=env) as (url, _):
        base = url.removesuffix("/mcp")
        async with httpx2.AsyncClient(timeout=10) as http:
            assert (await http.get(f"{base}/healthz")).text == "ok"
            ready = await http.get(f"{base}/readyz")
            assert (ready.status_code, ready.text) == (200, "ready")
            assert (await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})).status_code == 401


async def test_readiness_is_503_until_the_kernel_is_connected_and_once_stopping() -> None:
    from kavalai.serve._transports import _Readiness

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    readiness = _Readiness()
    transport = httpx2.ASGITransport(app=readiness.wrap(app))
    async with httpx2.AsyncClient(transport=transport, base_url="http://replica") as http:
        assert (await http.get("/readyz")).status_code == 503  # starting: the kernel is not connected yet
        assert (await http.get("/healthz")).status_code == 200  # alive all the same
        readiness.ready = True
        assert (await http.get("/readyz")).status_code == 200
        readiness.ready = False  # what serve_http does once stopping begins
        assert (await http.get("/readyz")).status_code == 503
        assert (await http.post("/mcp")).status_code == 204
    assert reached == ["/mcp"]  # the probes never reach the application


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--stateless"], "--stateless needs --transport http"),
        (["--transport", "http", "--workers", "2"], "--workers needs --stateless"),
        (["--transport", "http", "--json-response"], "--json-response needs --stateless"),
        (["--transport", "http", "--stateless", "--workers", "0"], "--workers 0: give 1 to 256"),
        (["--transport", "http", "--stateless", "--workers", "2", "--worker-restarts", "-1"], "give 0 or more"),
    ],
)
def test_stateless_and_workers_need_http_and_workers_need_stateless(
    config: Path, options: list[str], message: str
) -> None:
    command = [sys.executable, "-m", "kavalai.cli._serve", str(config), *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert message in done.stderr


# --------------------------------------------------------------------------------------------------- workers


async def test_workers_share_the_port_and_end_with_their_parent(config: Path) -> None:
    async with replica(config, "workers.log", "--stateless", "--workers", "2") as (url, parent):
        workers = psutil.Process(parent.pid).children()
        assert len(workers) == 2
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                answered: list[int] = []

                async def caller() -> None:
                    for _ in range(8):
                        answered.append(await _call(url, "python_pid"))

                for _ in range(4):
                    group.start_soon(caller)
        assert set(answered) == {worker.pid for worker in workers}  # both took connections
        await _other_clients_add(url, config.parent)
        parent.kill()  # no SIGTERM to pass on: the lifeline's end stops the workers
        gone, alive = psutil.wait_procs(workers, timeout=20)
        assert alive == []
        assert len(gone) == 2


def test_a_worker_is_given_every_option_of_its_parent_but_where_to_listen() -> None:
    """The enumeration: every option of ``kavalai serve`` (each given a value other than its default here)
    reaches the workers' command line unchanged, except those that say where and how many to run. An option
    added to the parser fails here until it is given below and passed on (or named as the parent's own)."""
    from kavalai.cli._serve import build_serve_parser
    from kavalai.cli._serve_workers import _worker_command

    parents_own = {"help", "host", "port", "workers", "worker_restarts", "worker_fds"}
    # Workers are stateless, and --session-idle-timeout is refused with --stateless (tests/serve/test_host_ends.py):
    # no worker can be given one, so it is not carried.
    parents_own |= {"session_idle_timeout"}
    given = ["my.yaml", "--transport", "http", "--stateless", "--json-response", "--keep-alive", "30"]
    given += ["--limit-connections", "7", "--loop", "uvloop"]
    given += ["--path", "/tools", "--name", "gw", "--names", "own", "--bearer-token-env", "TOKEN"]
    given += ["--allow", "python.*", "--allow", "mcp.*", "--deny", "mcp.x.*", "--no-lazy", "--tracing"]
    given += ["--tasks", "mcp://x.slow", "--tasks", "python://y.*", "--tasks-required", "mcp://x.job"]
    given += ["--host", "0.0.0.0", "--port", "9000", "--workers", "3", "--worker-restarts", "2"]
    parser = build_serve_parser()
    parent, defaults = vars(parser.parse_args(given)), vars(parser.parse_args(["tools.yaml"]))
    carried = {dest for dest in parent if dest not in parents_own}
    assert {dest for dest in carried if parent[dest] == defaults[dest]} == set()  # each option given a value
    command = _worker_command(parser.parse_args(given))
    assert command[1:3] == ["-m", "kavalai.cli._serve"]
    worker = vars(parser.parse_args(command[3:]))
    assert {dest: worker[dest] for dest in carried} == {dest: parent[dest] for dest in carried}


@pytest.mark.skipif(not REUSE_PORT, reason="SO_REUSEPORT spreads connections over sockets only on Linux")
async def test_each_worker_accepts_on_a_socket_of_its_own_and_all_end_at_sigterm(config: Path) -> None:
    """With ``SO_REUSEPORT`` every worker listens on its own socket bound to the port (the parent's socket only
    holds it: it listens on none), connections reach all of them, and at SIGTERM the parent and every worker exit
    and no socket listens on the port any more (it can be listened on again)."""
    async with replica(config, "reuseport.log", "--stateless", "--workers", "3") as (url, parent):
        port = int(url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)[1])
        workers = psutil.Process(parent.pid).children()
        assert len(workers) == 3
        listening = _listening_inodes(port)
        owned = {worker.pid: _socket_inodes(worker.pid) & listening for worker in workers}
        assert all(len(inodes) == 1 for inodes in owned.values()), owned  # one listening socket each
        assert len(set().union(*owned.values())) == 3  # three sockets, not one shared
        assert listening == set().union(*owned.values())  # and no other: the parent's does not listen
        assert not _socket_inodes(parent.pid) & listening
        answered: list[int] = []
        with anyio.fail_after(120):
            for _ in range(50):  # new connections, spread by the kernel, until every worker has taken some
                async with anyio.create_task_group() as group:
                    for _ in range(6):
                        group.start_soon(lambda: _answer_into(answered, url))
                if set(answered) == set(owned):
                    break
        assert set(answered) == set(owned)
        await stop(parent)
        assert parent.returncode == 0
        gone, alive = psutil.wait_procs(workers, timeout=30)
        assert (alive, len(gone)) == ([], 3)
    assert _listening_inodes(port) == set()
    listening_socket("127.0.0.1", port).close()  # the port is free


def _listening_inodes(port: int) -> set[int]:
    """The inodes of the TCP sockets listening on ``port`` (``/proc/net/tcp`` and ``tcp6``; state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(int(fields[9]))
    return found


def _socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                found.add(int(link.removeprefix("socket:[").removesuffix("]")))
    return found


async def test_a_dead_worker_is_replaced_until_the_restart_limit(config: Path) -> None:
    """SIGKILL a worker: the parent starts another, and calls go on (none fails, the new worker answers some); kill
    one again past ``--worker-restarts 1``: the parent stops the others and exits 1 saying why."""
    options = ("--stateless", "--workers", "2", "--worker-restarts", "1")
    log = config.parent / "restarts.log"
    async with replica(config, log.name, *options) as (url, parent):
        first = psutil.Process(parent.pid).children()
        assert len(first) == 2
        first[0].kill()
        await wait_until(lambda: "started" in log.read_text(), timeout=60)
        now = psutil.Process(parent.pid).children()
        [new] = [worker.pid for worker in now if worker.pid not in {old.pid for old in first}]
        assert sorted(worker.pid for worker in now) == sorted([first[1].pid, new])
        answered: list[int] = []
        with anyio.fail_after(120):
            for _ in range(50):  # until the new worker, once ready, takes connections too
                async with anyio.create_task_group() as group:
                    for _ in range(4):
                        group.start_soon(lambda: _answer_into(answered, url))
                if new in answered:
                    break
        assert new in answered
        assert set(answered) == {first[1].pid, new}  # every call answered (a failure raises), by the two alive
        psutil.Process(new).kill()  # a second death: one more than --worker-restarts 1 allows
        with anyio.fail_after(60):
            await parent.wait()
        assert parent.returncode == 1
        _, alive = psutil.wait_procs([first[1]], timeout=30)
        assert alive == []
    text = log.read_text()
    assert f"worker {first[0].pid} exited with status -9; starting another" in text
    assert f"worker {new} exited with status -9; stopping the others: --worker-restarts allows 1 restart" in text


async def _answer_into(answered: list[int], url: str) -> None:
    answered.append(await _call(url, "python_pid"))


# ------------------------------------------------------------------------------------------ a load balancer


@pytest.mark.timeout(960)  # a first run may install haproxy: three apt-get runs of at most 300 s each
async def test_a_load_balancer_spreads_calls_and_routes_around_a_dead_replica(config: Path, tmp_path: Path) -> None:
    binary = haproxy_binary()
    async with (
        replica(config, "a.log", "--stateless") as (url_a, process_a),
        replica(config, "b.log", "--stateless") as (url_b, process_b),
    ):
        replicas = {process_a.pid: (url_a, process_a), process_b.pid: (url_b, process_b)}
        async with haproxy(binary, [_host_port(url_a), _host_port(url_b)], workdir=tmp_path) as base:
            url = f"{base}/mcp"
            async with httpx2.AsyncClient(timeout=30) as http:  # one keep-alive connection, one request a call
                with anyio.fail_after(60):
                    spread = [await _raw_call(http, url, "python_pid") for _ in range(4)]
                assert sorted(spread) == sorted([process_a.pid, process_b.pid] * 2)  # round robin, call by call
                survivor = await _kill_a_replica_under_load(url, tmp_path / "held", replicas)
                with anyio.fail_after(60):  # new calls: only the survivor answers
                    after = [await _raw_call(http, url, "python_pid") for _ in range(4)]
                assert after == [survivor] * 4


@pytest.mark.timeout(960)  # a first run may install haproxy (see above)
async def test_a_sticky_load_balancer_keeps_each_session_on_the_replica_that_made_it(
    config: Path, tmp_path: Path
) -> None:
    """Two stateful replicas (sessions, the default) behind HAProxy sticking on ``mcp-session-id``, and clients of
    the handshake era (those of the 2026-07-28 era hold no session, any balancing serves them): every call of a
    session reaches the replica that made it, and the sessions spread over both. The same replicas behind the same
    balancer without stickiness: a session's requests reach the other replica, which does not know it."""
    binary = haproxy_binary()
    async with (
        replica(config, "a.log") as (url_a, process_a),
        replica(config, "b.log") as (url_b, process_b),
    ):
        backends = [_host_port(url_a), _host_port(url_b)]
        (tmp_path / "sticky").mkdir()
        async with haproxy(binary, backends, workdir=tmp_path / "sticky", sticky=True) as base:
            with anyio.fail_after(120):
                sessions = [await _session_pids(f"{base}/mcp") for _ in range(4)]
        assert [len(set(pids)) for pids in sessions] == [1, 1, 1, 1]  # each session on one replica ...
        assert {pids[0] for pids in sessions} == {process_a.pid, process_b.pid}  # ... and both replicas used
        (tmp_path / "plain").mkdir()
        async with haproxy(binary, backends, workdir=tmp_path / "plain") as base:
            with anyio.fail_after(120):
                lost = [await _session_pids(f"{base}/mcp", lost=True) for _ in range(2)]
        assert lost == [None, None]  # without stickiness the session is lost at its second request


async def _session_pids(url: str, *, lost: bool = False) -> list[int] | None:
    """One SDK session of the handshake era (the 2026-07-28 era has no sessions) calling ``python_pid`` 4 times: the
    pids that answered; with ``lost``, ``None`` when the session fails with "Session not found" (its request
    reached a replica that did not make it)."""
    try:
        async with Client(url, mode="legacy") as client:
            return [(await client.call_tool("python_pid", {})).structured_content["result"] for _ in range(4)]
    except Exception as exc:
        if lost and "Session not found" in repr(exc):
            return None
        raise


def test_the_load_balancer_tests_skip_saying_why_where_haproxy_cannot_be_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where neither ``haproxy`` nor ``apt-get`` can be found (an empty ``PATH`` here), the tests above are skipped
    with the reason, not failed and not run against nothing."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="haproxy is not installed and cannot be: no apt-get, or not root"):
        haproxy_binary()


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    return host, int(port)


async def _raw_call(http: httpx2.AsyncClient, url: str, tool: str) -> Any:
    """A stateless ``tools/call`` as one plain POST; the result from the answer's SSE event."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    answer = await http.post(url, json=body, headers={"Accept": "application/json, text/event-stream"})
    assert answer.status_code == 200, answer.text
    data = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])["result"]["structuredContent"]["result"]


async def _kill_a_replica_under_load(url: str, folder: Path, replicas: dict[int, tuple[str, Process]]) -> int:
    """Start 8 calls of ``hold`` through the balancer (SDK clients) and wait until all run; pick as the victim the
    replica holding the most, start one more call from a kavalai kernel straight to it, SIGKILL it, then release
    the calls. Every call is bounded (one that hangs fails the test); the calls on the victim must fail, those on
    the survivor finish there. Returns the survivor's pid."""
    await anyio.Path(folder).mkdir()
    failed: list[str] = []
    held: list[int] = []
    kernel_errors: list[FunctionKernelException] = []

    async def through_a_kernel(victim_url: str) -> None:
        async with FunctionKernel() as kernel:
            kernel.register_mcp_server(McpServer(name="victim", url=victim_url))
            try:
                await kernel.call_tool("mcp://victim.python_hold", arguments={"folder": str(folder), "tag": "kernel"})
            except FunctionKernelException as exc:
                kernel_errors.append(exc)

    async def one(tag: int) -> None:
        try:
            held.append(await _call(url, "python_hold", {"folder": str(folder), "tag": str(tag)}))
        except Exception as exc:  # what a client sees when its replica dies mid-call
            failed.append(f"{type(exc).__name__}: {exc!r}")

    def started() -> dict[int, int]:
        pids = [int(path.name.split("-")[0]) for path in folder.iterdir() if path.name.split("-")[-1].isdigit()]
        return {pid: pids.count(pid) for pid in replicas}

    with anyio.fail_after(90):
        async with anyio.create_task_group() as group:
            for tag in range(8):
                group.start_soon(one, tag)
            await wait_until(lambda: sum(started().values()) == 8, timeout=60)
            on = started()
            victim = max(on, key=lambda pid: on[pid])
            survivor = next(pid for pid in replicas if pid != victim)
            group.start_soon(through_a_kernel, replicas[victim][0])
            await wait_until(lambda: (folder / f"{victim}-kernel").exists(), timeout=60)
            process = replicas[victim][1]
            process.send_signal(signal.SIGKILL)
            await process.wait()
            (folder / "release").write_text("go")
    assert len(failed) == on[victim]  # the calls held on the dead replica ended in an error ...
    assert held == [survivor] * on[survivor]  # ... and those held on the other one finished there
    assert [exc.uri for exc in kernel_errors] == ["mcp://victim.python_hold"]  # the kernel's error, naming the tool
    return survivor
