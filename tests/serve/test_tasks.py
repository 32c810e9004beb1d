"""The tasks extension through ``kavalai serve`` (``src/kavalai/serve/_tasks.py``): a 2026-07-28 host that declared
it gets a task for a call of a tool served as task-supporting, follows it with ``tasks/get``, answers what the
backend asks with ``tasks/update`` and cancels it with ``tasks/cancel``; a host that did not declare it is told so
(-32021) and gets plain results.

The backend is a real stdio MCP server of the 2026-07-28 era (``tests/servers/mcp_conformance_rounds.py``, its task
fixtures); the host is the official SDK's client in that era, speaking the extension's methods as they are on the
wire (the SDK has no tasks client).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp.client.extension import advertise
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter
from starlette.requests import Request
from tests.adapters.mcp.test_tasks import _server as fastmcp_tasks_server
from tests.adapters.mcp.test_tasks import tasks_python
from tests.serve.test_progress_nested import wired
from tests.serve.test_relay import _backend
from tests.serve.test_rounds import rounds_config
from tests.serve.test_serve import TOKEN, TOKEN_VAR, http_server, read, serve_command, wait_until

from kavalai import FunctionKernel, McpServer, pythontool
from kavalai.secrets import register_secret
from kavalai.serve import build_mcp_server
from kavalai.serve._rounds import RoundsCall
from kavalai.serve._tasks import EXTENSION, MAX_TASKS_PER_HOST, HostTasks, host_of
from mcp import Client

_ANY = TypeAdapter(dict[str, Any])
TASKS = ["mcp://rounds.slow_compute", "mcp://rounds.multi_input", "mcp://rounds.protocol_error_job"]
REQUIRED = ["mcp://rounds.failing_job"]
__all__ = ["rounds_config", "tasks_python"]  # fixtures


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_conformance_rounds", "rounds", protocol="2026-07-28"))
    served = build_mcp_server(kernel, names="own", tasks=TASKS, tasks_required=REQUIRED)
    await kernel.connect()
    yield served
    await kernel.close()


@contextlib.asynccontextmanager
async def _host(server: Any, *, tasks: bool = True, mode: str = "auto") -> AsyncIterator[Client]:
    extensions = [advertise(EXTENSION)] if tasks else None
    async with Client(
        server,
        mode=mode,  # type: ignore[arg-type]
        extensions=extensions,
        elicitation_callback=_never_asked,  # declares elicitation: a task's questions come by tasks/get
    ) as client:
        yield client


async def _never_asked(context: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("a task's questions are read with tasks/get, never sent to the host")


async def _send(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    request = types.Request[dict[str, Any], str](method=method, params=params)
    return await client.session.send_request(request, _ANY)


async def _call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return await _send(client, "tools/call", {"name": name, "arguments": arguments or {}})


async def _until(client: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    """``tasks/get`` until the task's status is one of ``statuses`` (or it has ended)."""
    with anyio.fail_after(30):
        while True:
            state = await _send(client, "tasks/get", {"taskId": task_id})
            if state["status"] in {*statuses, "completed", "failed", "cancelled"}:
                return state
            await anyio.sleep(0.02)


async def test_a_host_with_the_extension_follows_a_task_to_its_result(server: Any) -> None:
    async with _host(server) as client:
        created = await _call(client, "slow_compute", {"seconds": 0.05, "label": "one"})
        assert created["resultType"] == "task"
        assert {"result", "error", "inputRequests", "requestState", "task"}.isdisjoint(created)
        assert created["ttlMs"] == 3_600_000
        assert created["pollIntervalMs"] == 500
        first = await _send(client, "tasks/get", {"taskId": created["taskId"]})  # found right away
        assert first["taskId"] == created["taskId"]
        assert first["resultType"] == "complete"
        done = await _until(client, created["taskId"])
        greeted = await _call(client, "greet", {"name": "Ada"})  # not served as a task: its result at once
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "one: done after 0.05 s"}]
    assert "error" not in done
    assert greeted["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert "taskId" not in greeted


async def test_what_the_backend_asks_is_the_tasks_input_answered_one_key_at_a_time(server: Any) -> None:
    async with _host(server) as client:
        created = await _call(client, "multi_input")
        task_id = created["taskId"]
        with anyio.fail_after(30):
            while len((state := await _until(client, task_id, "input_required")).get("inputRequests", {})) < 2:
                assert state["status"] == "input_required", state
                await anyio.sleep(0.02)  # the backend's two questions, asked together
        assert state["status"] == "input_required"
        assert {request["method"] for request in state["inputRequests"].values()} == {"elicitation/create"}
        first, second = sorted(state["inputRequests"])
        answer = {"action": "accept", "content": {"name": "Ada"}}
        with pytest.raises(MCPError, match="The answer to 'first' is not an input response") as refused:
            await _send(client, "tasks/update", {"taskId": task_id, "inputResponses": {first: "yes"}})
        assert refused.value.error.code == types.INVALID_PARAMS
        ack = await _send(client, "tasks/update", {"taskId": task_id, "inputResponses": {first: answer, "nope": {}}})
        assert {"taskId", "status", "result", "inputRequests"}.isdisjoint(ack)
        assert ack["resultType"] == "complete"
        partly = await _send(client, "tasks/get", {"taskId": task_id})
        assert partly["status"] == "input_required"
        assert list(partly["inputRequests"]) == [second]
        await _send(client, "tasks/update", {"taskId": task_id, "inputResponses": {first: answer}})  # answered: no-op
        await _send(client, "tasks/update", {"taskId": task_id, "inputResponses": {second: answer}})
        done = await _until(client, task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "both answered"


async def test_cancel_ends_a_running_task_and_leaves_an_ended_one_as_it_ended(server: Any) -> None:
    async with _host(server) as client:
        running = await _call(client, "slow_compute", {"seconds": 600})
        ack = await _send(client, "tasks/cancel", {"taskId": running["taskId"]})
        assert ack["resultType"] == "complete"
        assert "status" not in ack
        cancelled = await _send(client, "tasks/get", {"taskId": running["taskId"]})
        again = await _send(client, "tasks/cancel", {"taskId": running["taskId"]})
        finished = await _call(client, "slow_compute", {"seconds": 0})
        await _until(client, finished["taskId"])
        await _send(client, "tasks/cancel", {"taskId": finished["taskId"]})
        still = await _send(client, "tasks/get", {"taskId": finished["taskId"]})
    assert cancelled["status"] == "cancelled"
    assert "result" not in cancelled
    assert again["resultType"] == "complete"
    assert still["status"] == "completed"


async def test_a_protocol_error_fails_the_task_and_a_tools_error_completes_it(server: Any) -> None:
    async with _host(server) as client:
        crashed = await _until(client, (await _call(client, "protocol_error_job"))["taskId"])
        erred = await _until(client, (await _call(client, "failing_job"))["taskId"])
    assert crashed["status"] == "failed"
    assert "result" not in crashed
    assert crashed["error"]["code"] == types.INTERNAL_ERROR
    assert "the job's worker crashed" in crashed["error"]["message"]
    assert erred["status"] == "completed"
    assert erred["result"]["isError"] is True


async def test_a_host_without_the_extension_is_told_it_must_declare_it(server: Any) -> None:
    async with _host(server, tasks=False) as client:
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            with pytest.raises(MCPError) as raised:
                await _send(client, method, {"taskId": "x", "inputResponses": {}})
            assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert raised.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
        plain = await _call(client, "slow_compute", {"seconds": 0, "label": "sync"})
        with pytest.raises(MCPError, match="the tool failing_job runs only as a task") as required:
            await _call(client, "failing_job")
    assert plain["content"] == [{"type": "text", "text": "sync: done after 0 s"}]
    assert "taskId" not in plain
    assert required.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_handshake_host_neither_sees_the_extension_nor_its_methods(server: Any) -> None:
    async with _host(server, mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await _send(client, "tasks/get", {"taskId": "x"})
        plain = await client.call_tool("slow_compute", {"seconds": 0})
    assert raised.value.error.code == types.METHOD_NOT_FOUND
    assert not plain.is_error
    assert plain.content


async def test_an_unknown_or_foreign_task_id_is_refused(server: Any) -> None:
    async with _host(server) as client:
        known = await _call(client, "slow_compute", {"seconds": 0})
        mark = known["taskId"].split(".")[0]
        foreign = ("0" if mark[0] != "0" else "1") + mark[1:] + ".abc"
        refused = []
        for task_id in ("tasks-conformance-nonexistent-12345", f"{mark}.forged", foreign):
            with pytest.raises(MCPError) as raised:
                await _send(client, "tasks/get", {"taskId": task_id})
            refused.append(raised.value.error)
    assert [error.code for error in refused] == [types.INVALID_PARAMS] * 3
    assert "Unknown or expired taskId" in refused[1].message
    assert "another kavalai serve process" in refused[2].message


async def test_a_tasks_protocol_error_holding_a_secret_is_masked(server: Any) -> None:
    register_secret("the job's worker crashed")
    async with _host(server) as client:
        crashed = await _until(client, (await _call(client, "protocol_error_job"))["taskId"])
    assert crashed["status"] == "failed"
    assert "worker crashed" not in crashed["error"]["message"]


async def _forever(call: RoundsCall) -> types.CallToolResult:
    await anyio.sleep_forever()
    raise AssertionError("not reached")


async def test_the_table_is_bounded_in_number_and_time_and_ends_with_the_serving() -> None:
    ctx = cast(Any, None)  # a task keeps its host's request for what the backend asks: none is asked here
    tasks = HostTasks(max_tasks=2, ttl_seconds=0.5)
    assert not tasks.can_start()  # not serving
    async with tasks.running():
        first = tasks.start("a", ctx, _forever)["taskId"]
        tasks.start("b", ctx, _forever)
        assert len(tasks) == 2
        assert not tasks.can_start()
        await wait_until(lambda: len(tasks) == 0)  # the TTL passed: cancelled and forgotten
        assert tasks.can_start()
        tasks.start("c", ctx, _forever)
        kept = tasks._tasks[next(iter(tasks._tasks))]
    assert len(tasks) == 0
    assert kept.status == "cancelled"
    assert first not in tasks._tasks


def _text_of(size: int) -> Callable[[RoundsCall], Awaitable[types.CallToolResult]]:
    async def run(call: RoundsCall) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="x" * size)])

    return run


async def test_the_results_ended_tasks_keep_are_bounded_in_bytes_the_first_ended_forgotten_first() -> None:
    ctx = cast(Any, None)
    tasks = HostTasks(max_kept_bytes=25_000)
    async with tasks.running():
        first = tasks.start("a", ctx, _text_of(10_000))["taskId"]
        await wait_until(lambda: tasks._tasks[first].status == "completed")
        second = tasks.start("b", ctx, _text_of(10_000))["taskId"]
        await wait_until(lambda: tasks._tasks[second].status == "completed")
        assert {first, second} <= set(tasks._tasks)  # 20,000 bytes and a little JSON: both kept
        third = tasks.start("c", ctx, _text_of(10_000))["taskId"]
        await wait_until(lambda: first not in tasks._tasks)  # past 25,000 bytes: the first to end is forgotten
        assert tasks._tasks[third].status == "completed"
        assert tasks._tasks[second].status == "completed"
        whole = tasks.start("d", ctx, _text_of(30_000))["taskId"]
        await wait_until(lambda: tasks._tasks[whole].status == "failed")
        error = tasks._tasks[whole].error
        assert error is not None
        assert "larger than kavalai serve keeps for a task (25000 bytes)" in error["message"]
        assert tasks._tasks[whole].result is None
        assert {second, third} <= set(tasks._tasks)  # a result too large alone forgets no other
    assert len(tasks) == 0


def test_a_tasks_byte_bound_is_a_positive_number_of_bytes() -> None:
    for bad in (0, -1, 1.5, True, "5", None):
        with pytest.raises(ValueError, match="max_kept_bytes must be a positive number of bytes"):
            HostTasks(max_kept_bytes=bad)  # type: ignore[arg-type]


def test_a_tasks_limits_follow_the_one_rule() -> None:
    for bad in (0, -1, float("nan"), "5", None):
        with pytest.raises(ValueError, match="ttl_seconds must be positive"):
            HostTasks(ttl_seconds=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="answer_window must be positive"):
            HostTasks(answer_window=bad)  # type: ignore[arg-type]


async def test_a_backends_own_task_is_followed_and_what_it_asks_is_the_hosts_tasks_input(
    tasks_python: Path, tmp_path: Path
) -> None:
    """A backend that runs the call as a task of its own (FastMCP with ``fastmcp-tasks``): the gateway's kernel
    follows it, what it asks (parked ``input_required`` at the backend) is the host's task's ``inputRequests`` under
    the backend's own key (``tasks/update`` answers it there), and the host's cancellation cancels the backend's
    task."""
    kernel = FunctionKernel()
    kernel.register_mcp_server(fastmcp_tasks_server(tasks_python))
    served = build_mcp_server(kernel, names="own", tasks=["mcp://tasks.*"])
    await kernel.connect()
    marker = tmp_path / "marker"
    try:
        async with _host(served) as client:
            crunched = await _until(client, (await _call(client, "crunch", {"n": 7}))["taskId"])
            asked = (await _call(client, "needs_approval"))["taskId"]
            parked = await _until(client, asked, "input_required")
            [key] = parked["inputRequests"]  # the backend's own key for its question
            answer = {"action": "accept", "content": {"approved": True}}
            await _send(client, "tasks/update", {"taskId": asked, "inputResponses": {key: answer}})
            approved = await _until(client, asked)
            lingering = (await _call(client, "linger", {"marker": str(marker)}))["taskId"]
            await wait_until(lambda: read(marker) == "started", timeout=30)
            await _send(client, "tasks/cancel", {"taskId": lingering})
            await wait_until(lambda: read(marker) == "cancelled", timeout=30)  # cancelled at the backend too
    finally:
        await kernel.close()
    assert crunched["status"] == "completed"
    assert crunched["result"]["structuredContent"] == {"result": 49}
    assert parked["inputRequests"][key]["params"]["message"] == "Go on?"
    assert approved["status"] == "completed"
    assert approved["result"]["content"][0]["text"] == "approved"


async def test_kavalai_as_the_host_follows_the_gateways_tasks_over_stdio_and_http(
    rounds_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kernel's own client as the host of ``kavalai serve`` (a process, over stdio and streamable HTTP): it
    declares the extension, gets the gateway's task, polls it to its result, and answers what it asks with its
    elicitation handler (``tasks/update``)."""
    options = ["--names", "own", "--tasks", "mcp://rounds.slow_compute", "--tasks", "mcp://rounds.confirm_delete"]
    asked: list[str] = []

    async def user(request: Any) -> dict[str, Any]:
        asked.append(request.message)
        return {"confirm": True}

    command = serve_command(rounds_config, *options)
    stdio = McpServer(name="gw", command=command[0], args=command[1:], protocol="2026-07-28", elicitation=user)
    with caplog.at_level(logging.DEBUG, logger="kavalai.mcp"):
        answers = [await _through(stdio)]
        async with http_server(rounds_config, *options, "--bearer-token-env", TOKEN_VAR) as (url, _):
            auth = {"Authorization": f"Bearer {TOKEN}"}
            http = McpServer(name="gw", url=url, headers=auth, protocol="2026-07-28", elicitation=user)
            answers.append(await _through(http))
    expected = ("one: done after 0.05 s", "f.txt: deleted")
    assert answers == [expected, expected]
    assert asked == ["Delete f.txt?", "Delete f.txt?"]
    assert sum("runs as task" in record.getMessage() for record in caplog.records) == 4  # every call a task


async def _through(server: McpServer) -> tuple[str, str]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(server)
    try:
        with anyio.fail_after(120):
            computed = await kernel.call_tool("mcp://gw.slow_compute", {"seconds": 0.05, "label": "one"})
            confirmed = await kernel.call_tool("mcp://gw.confirm_delete", {"filename": "f.txt"})
    finally:
        await kernel.close()
    return computed.result, confirmed.result  # type: ignore[attr-defined]


async def test_a_python_tool_runs_as_a_task_too() -> None:
    """Any tool of the kernel may be served as a task (``--tasks "python://*"``): the gateway owns its call."""

    @pythontool
    def double(n: int) -> int:
        """Double n."""
        return n * 2

    kernel = FunctionKernel()
    kernel.register_python_tool("math.double", double)
    served = build_mcp_server(kernel, tasks=["python://*"])
    async with _host(served) as client:
        created = await _call(client, "python_math_double", {"n": 21})
        done = await _until(client, created["taskId"])
    assert created["resultType"] == "task"
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"result": 42}


async def test_a_flood_of_one_hosts_task_calls_past_its_share_runs_to_its_results_at_once() -> None:
    """More task calls of one host than its share of the table (:data:`MAX_TASKS_PER_HOST`; the table holds more):
    the first get tasks, a call past them is answered with its result (as without tasks), and every one ends with
    its result."""
    released = anyio.Event()
    entered: list[int] = []

    @pythontool
    async def hold(n: int) -> int:
        """Wait to be released."""
        entered.append(n)
        await released.wait()
        return n

    kernel = FunctionKernel()
    kernel.register_python_tool("x.hold", hold)
    served = build_mcp_server(kernel, tasks=["python://*"])
    past: list[dict[str, Any]] = []
    async with _host(served) as client:
        created = [await _call(client, "python_x_hold", {"n": n}) for n in range(MAX_TASKS_PER_HOST)]
        assert {task["resultType"] for task in created} == {"task"}

        async def one_more() -> None:
            past.append(await _call(client, "python_x_hold", {"n": MAX_TASKS_PER_HOST}))

        async with anyio.create_task_group() as group:
            group.start_soon(one_more)
            await wait_until(lambda: len(entered) == MAX_TASKS_PER_HOST + 1, timeout=60)  # run at once, not as a task
            assert past == []  # it waits for its result
            released.set()
        done = [await _until(client, task["taskId"]) for task in created]
    assert past[0]["structuredContent"] == {"result": MAX_TASKS_PER_HOST}
    assert "taskId" not in past[0]
    assert [state["result"]["structuredContent"]["result"] for state in done] == list(range(MAX_TASKS_PER_HOST))


async def test_a_backends_task_minted_on_its_last_round_is_the_hosts_task_minted_then(server: Any) -> None:
    """The suite's ``tasks-mrtr-composition``: a backend's tool asks in rounds, then answers the round with every
    answer with a task of its own. The host is asked the rounds as rounds (no task yet: no ``taskId``), and the round
    in which the backend's task comes to exist is answered with the host's task, whose result is the backend's."""
    async with _host(server) as client:
        first = await _call(client, "test_tool_with_task")
        assert first["resultType"] == "input_required", first
        assert "taskId" not in first
        [key] = first["inputRequests"]
        answer = {"action": "accept", "content": {"name": "Alice"}}
        second = await _send(
            client,
            "tools/call",
            {
                "name": "test_tool_with_task",
                "arguments": {},
                "inputResponses": {key: answer},
                "requestState": first["requestState"],
            },
        )
        assert second["resultType"] == "task", second
        assert {"requestState", "inputRequests", "result"}.isdisjoint(second)
        done = await _until(client, second["taskId"])
        with pytest.raises(MCPError, match="Unknown or ended requestState"):  # its rounds are over
            await _send(
                client,
                "tools/call",
                {
                    "name": "test_tool_with_task",
                    "arguments": {},
                    "inputResponses": {},
                    "requestState": first["requestState"],
                },
            )
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice!"}]


async def test_a_composed_calls_progress_reaches_each_hosts_request_until_the_task(server: Any) -> None:
    """A host call fanned into several backend requests (a round, then the request carrying its answer, answered
    with the backend's task): each backend request's progress reaches the host request in at the time, on that
    request's own token (the host's second request counts from 1 again), and the second is answered with the host's
    task. Over JSON-RPC streams: the SDK's in-process client of this era sends no progress token."""
    seen: list[tuple[str, float, float | None, str | None]] = []

    def on(request: str) -> Callable[[float, float | None, str | None], Awaitable[None]]:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((request, progress, total, message))

        return progress

    async def call(client: Client, params: dict[str, Any], request: str) -> dict[str, Any]:
        sent = types.Request[dict[str, Any], str](method="tools/call", params=params)
        return await client.session.send_request(sent, _ANY, progress_callback=on(request))

    async with _host(wired(server)) as client:
        first = await call(client, {"name": "counted_task", "arguments": {}}, "first")
        assert first["resultType"] == "input_required", first
        [key] = first["inputRequests"]
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        params = {"name": "counted_task", "arguments": {}, "inputResponses": answers}
        second = await call(client, {**params, "requestState": first["requestState"]}, "second")
        assert second["resultType"] == "task", second
        done = await _until(client, second["taskId"])
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert seen == [
        ("first", 5, 10, "before the question"),
        ("second", 1, 2, "step 1"),
        ("second", 2, 2, "step 2"),
    ]


def _request_from(address: str, user: Any = None) -> Any:
    """A host's request context as the SDK gives it over HTTP: its Starlette request (the peer's address, and the
    principal an authentication middleware set)."""
    scope: dict[str, Any] = {"type": "http", "client": (address, 40_000), "headers": [], "method": "POST", "path": "/"}
    if user is not None:
        scope["user"] = user
    return SimpleNamespace(request=Request(scope))


def _principal(client_id: str) -> AuthenticatedUser:
    return AuthenticatedUser(AccessToken(token=f"token-{client_id}", client_id=client_id, scopes=[]))


async def test_one_host_cannot_fill_the_table_another_still_gets_tasks() -> None:
    """A host calling task tools without end gets its share of the table (then its calls run at once); another
    host, or another principal at the same address, still gets tasks; a host at its share makes room by its own
    ended tasks, not by others'."""
    tasks = HostTasks(max_tasks=5, max_tasks_per_host=2)
    greedy, other = _request_from("10.0.0.1"), _request_from("10.0.0.2")
    alice, bob = (_request_from("10.0.0.3", _principal(name)) for name in ("alice", "bob"))
    async with tasks.running():
        tried = [tasks.can_start(greedy) and bool(tasks.start("a", greedy, _forever)) for _ in range(50)]
        assert tried.count(True) == 2  # its share; the 48 others would run at once
        assert tasks.can_start(other)
        tasks.start("b", other, _forever)
        assert tasks.can_start(alice)
        tasks.start("c", alice, _text_of(1))
        assert tasks.can_start(bob)  # the same address, another principal: a share of its own
        first_of_bob = tasks.start("d", bob, _text_of(1))["taskId"]
        await wait_until(
            lambda: all(task.status == "completed" for task in tasks._tasks.values() if task.call.tool in ("c", "d"))
        )
        assert len(tasks) == 5  # full: two running greedy, one other, two ended
        assert not tasks.can_start(greedy)  # at its share, nothing of its own ended: the others' are not forgotten
        assert len(tasks) == 5
        assert tasks.can_start(bob)  # the table full: the first ended task (alice's) is forgotten to make room
        assert len(tasks) == 4
        tasks.start("e", bob, _forever)
        assert tasks.can_start(bob)  # at its share (two): its own ended one is forgotten
        assert first_of_bob not in tasks._tasks
    assert len(tasks) == 0


def test_a_hosts_share_is_told_by_its_principal_then_its_address() -> None:
    assert host_of(None) == host_of(SimpleNamespace(request=None))  # stdio, in memory: the one host
    assert host_of(_request_from("10.0.0.1")) == host_of(_request_from("10.0.0.1"))
    assert host_of(_request_from("10.0.0.1")) != host_of(_request_from("10.0.0.2"))
    assert host_of(_request_from("10.0.0.1", _principal("alice"))) == host_of(
        _request_from("10.0.0.9", _principal("alice"))
    )
    assert host_of(_request_from("10.0.0.1", _principal("alice"))) != host_of(
        _request_from("10.0.0.1", _principal("bob"))
    )


def _tasks_host(address: str, user: Any = None) -> Any:
    """A 2026-07-28 host's request that declared the tasks extension, from ``address`` (as ``user``, when given)."""
    request = _request_from(address, user).request
    session = SimpleNamespace(check_client_capability=lambda wanted: True)
    return SimpleNamespace(request=request, protocol_version="2026-07-28", session=session, method="tasks/get")


async def test_a_principals_task_is_reached_by_that_principal_alone() -> None:
    """A task an authenticated principal started is not found by another principal (at any address), nor by an
    unauthenticated host that learned its id; a task of an unauthenticated host is reached by its id."""
    from kavalai.serve._tasks import TaskParams

    tasks = HostTasks()
    alice, bob = _tasks_host("10.0.0.3", _principal("alice")), _tasks_host("10.0.0.3", _principal("bob"))
    alice_elsewhere, anonymous = _tasks_host("10.0.0.9", _principal("alice")), _tasks_host("10.0.0.3")
    async with tasks.running():
        owned = TaskParams(taskId=tasks.start("a", alice, _forever)["taskId"])
        open_to_its_id = TaskParams(taskId=tasks.start("b", anonymous, _forever)["taskId"])
        assert tasks.get(alice, owned)["status"] == "working"
        assert tasks.get(alice_elsewhere, owned)["status"] == "working"  # the principal, not the address
        for stranger in (bob, anonymous):
            for method in (tasks.get, tasks.cancel):
                with pytest.raises(MCPError, match="Unknown or expired taskId"):
                    method(stranger, owned)
        assert tasks.get(alice, owned)["status"] == "working"  # neither stranger's cancel reached it
        assert tasks.get(bob, open_to_its_id)["status"] == "working"
        tasks.cancel(alice, owned)
        assert tasks.get(alice, owned)["status"] == "cancelled"
