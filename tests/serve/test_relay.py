"""``kavalai serve`` relaying the rest of the protocol between its host and the MCP servers behind it: sampling,
elicitation and roots requests made during a call, log messages and ``logging/setLevel``, resources, templates,
subscriptions, prompts and completion, under prefixed or own names.

The backends are real stdio MCP servers (``tests/servers/mcp_features.py``, ``tests/servers/mcp_updates.py``); the
host is the official SDK's client, in the handshake era, where these requests travel on the session.
"""

from __future__ import annotations

import base64
import json
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from tests.serve.test_serve import TOKEN, TOKEN_VAR, http_server, serve_command, wait_until
from tests.servers.mcp_tools import PIXEL_PNG

from kavalai import FunctionKernel, McpServer
from kavalai.serve import build_mcp_server
from kavalai.serve._hosts import MAX_ASKING

ROOT = Path(__file__).resolve().parents[2]


def _backend(module: str, name: str, **options: Any) -> McpServer:
    return McpServer(name=name, command=sys.executable, args=["-m", module], cwd=ROOT, timeout=60, **options)


class Host:
    """What the host was asked and told."""

    def __init__(self) -> None:
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[Any] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.notices: list[Any] = []

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="42"), model="host-model", stop_reason="endTurn"
        )

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicited.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(self, context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///host/project", name="project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def message(self, message: Any) -> None:
        if not isinstance(message, Exception):
            self.notices.append(message)

    def client(self, server: Any, *, answers: bool = True, mode: str = "legacy") -> Client:
        """The host's client of ``server``; ``answers=False``: one that offers neither sampling nor elicitation;
        ``mode``: the host's era (the handshake, or "auto": the 2026-07-28 era, which the gateway speaks)."""
        asks: dict[str, Any] = {}
        if answers:
            asks = {"sampling_callback": self.sample, "elicitation_callback": self.elicit}
        return Client(
            server,
            mode=mode,
            list_roots_callback=self.roots,
            logging_callback=self.log,
            message_handler=self.message,
            **asks,
        )


@pytest.fixture(params=["legacy", "auto"])
def era(request: pytest.FixtureRequest) -> str:
    """How the kernel speaks to its backends: the handshake ("legacy"), or the 2026-07-28 era where it can."""
    return str(request.param)


@pytest.fixture
async def kernel(era: str) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    backend = _backend("tests.servers.mcp_features", "features", sampling_max_tokens=500, protocol=era)
    kernel.register_mcp_server(backend)
    yield kernel
    await kernel.close()


@pytest.fixture
def host() -> Host:
    return Host()


@pytest.fixture(params=["legacy", "auto"])
def host_era(request: pytest.FixtureRequest) -> str:
    """The host's era: the handshake ("legacy"), or the 2026-07-28 era ("auto")."""
    return str(request.param)


async def _served(kernel: FunctionKernel, **options: Any) -> Any:
    """The gateway's server; the kernel connects after it is built (so its sessions are opened with the relay)."""
    server = build_mcp_server(kernel, **options)
    await kernel.connect()
    return server


async def _set_level(client: Client, level: types.LoggingLevel) -> None:
    """``logging/setLevel`` as sent by a handshake-era host (the SDK's helper warns that the feature is old)."""
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    await client.session.send_request(request, types.EmptyResult)


async def _subscribe(client: Client, uri: str, *, subscribe: bool) -> None:
    """``resources/subscribe`` or ``resources/unsubscribe``, as sent by a handshake-era host."""
    request: types.SubscribeRequest | types.UnsubscribeRequest
    if subscribe:
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    else:
        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
    await client.session.send_request(request, types.EmptyResult)


def _text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


# ------------------------------------------------------------------------------ requests made during a call


async def test_sampling_is_put_to_the_host_within_the_kernels_cap(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel)) as client:
        result = await client.call_tool("mcp_features_consult", {"question": "six times seven?"})
    assert _text(result) == "42"
    [asked] = host.sampled
    assert asked.max_tokens == 500  # the backend asked for 100,000: capped at its sampling_max_tokens
    assert asked.system_prompt == "Answer briefly."
    [message] = asked.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "six times seven?"


async def test_the_kernels_approval_can_refuse_a_relayed_sampling(host: Host, era: str) -> None:
    kernel = FunctionKernel()
    backend = _backend("tests.servers.mcp_features", "features", sampling_approval=lambda request: False, protocol=era)
    kernel.register_mcp_server(backend)
    try:
        async with host.client(await _served(kernel)) as client:
            result = await client.call_tool("mcp_features_consult", {"question": "six times seven?"})
    finally:
        await kernel.close()
    assert result.is_error is True
    assert "Sampling refused: the client did not approve the request." in _text(result)
    assert host.sampled == []


async def test_elicitation_and_roots_are_put_to_the_host(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel, names="own")) as client:
        assert _text(await client.call_tool("greet", {})) == "hello Ada"
        roots = await client.call_tool("folders", {})
    [asked] = host.elicited
    assert asked.message == "Who are you?"
    assert roots.structured_content == {"result": ["file:///host/project"]}


async def test_a_host_that_cannot_answer_gets_the_backend_a_proper_error(
    kernel: FunctionKernel, host: Host, era: str
) -> None:
    """A handshake-era backend asks and is refused by the gateway; a 2026-07-28 backend is told the host's
    capabilities (none it can be asked) and refuses the call itself, naming what the host lacks."""
    async with host.client(await _served(kernel), answers=False) as client:
        sampled = await client.call_tool("mcp_features_consult", {"question": "?"})
        elicited = await client.call_tool("mcp_features_greet", {})
    assert sampled.is_error is True
    assert elicited.is_error is True
    if era == "legacy":
        assert "the host of kavalai serve does not offer sampling" in _text(sampled)
        assert "the host of kavalai serve does not offer elicitation" in _text(elicited)
    else:
        assert "error -32021: Client did not declare the sampling capability" in _text(sampled)
        assert "error -32021: Client did not declare the form elicitation capability" in _text(elicited)


async def test_a_request_the_host_leaves_unanswered_ends_with_the_call(kernel: FunctionKernel, host: Host) -> None:
    asked = anyio.Event()
    ended: list[str] = []

    async def never(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("cancelled")
        raise AssertionError("unreachable")

    server = await _served(kernel)
    async with Client(server, mode="legacy", sampling_callback=never) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "mcp_features_consult", {"question": "?"})
            await asked.wait()
            tg.cancel_scope.cancel()  # the host gives up its call: the gateway's call ends, and its request with it
        await wait_until(lambda: ended == ["cancelled"])
        assert _text(await client.call_tool("mcp_features_count", {"n": 1})) == "1"  # the session goes on


def _relay_of(kernel: FunctionKernel) -> Any:
    """What a backend's request reaches (here asked with no call in flight)."""
    return kernel.adapter("mcp")._relay.relay  # type: ignore[attr-defined]


async def test_roots_outside_a_call_are_asked_of_the_one_host_that_can_be_asked(
    kernel: FunctionKernel, host: Host
) -> None:
    server = await _served(kernel)
    relay = _relay_of(kernel)
    async with host.client(server) as client:
        await client.list_tools()  # the host is known from its first request
        answer = await relay.list_roots("features")
        assert answer == types.ListRootsResult(roots=[types.Root(uri="file:///host/project", name="project")])
        async with host.client(server) as other:
            await other.list_tools()
            refused = await relay.list_roots("features")
    assert isinstance(refused, types.ErrorData)
    assert (
        refused.message == "kavalai serve cannot tell which host to ask for roots outside a call: 2 hosts are connected"
    )


async def test_roots_outside_a_call_are_put_to_the_host_at_most_max_asking_at_once(
    kernel: FunctionKernel, host: Host
) -> None:
    """A backend asks the host's roots 12 times at once outside a call: the host is put ``MAX_ASKING`` of them (it
    answers none until the others were refused), the others are refused to the backend at once, before any answer
    (each was put to the host and waited up to 60 s)."""
    server = await _served(kernel)
    relay = _relay_of(kernel)
    asked = 0
    answers: list[Any] = []
    refused_all = anyio.Event()

    async def roots(context: Any) -> types.ListRootsResult:
        nonlocal asked
        asked += 1
        await refused_all.wait()
        return types.ListRootsResult(roots=[types.Root(uri="file:///host/project", name="project")])

    async def ask() -> None:
        answers.append(await relay.list_roots("features"))
        if sum(isinstance(answer, types.ErrorData) for answer in answers) == 12 - MAX_ASKING:
            refused_all.set()

    async with Client(server, mode="legacy", list_roots_callback=roots) as client:
        await client.list_tools()  # the host is known from its first request
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(ask)
    refusals = [answer.message for answer in answers if isinstance(answer, types.ErrorData)]
    assert refusals == [
        f"kavalai serve puts at most {MAX_ASKING} roots requests outside a call to its host at once"
    ] * (12 - MAX_ASKING)
    assert (
        answers[-MAX_ASKING:]
        == [types.ListRootsResult(roots=[types.Root(uri="file:///host/project", name="project")])] * MAX_ASKING
    )
    assert asked == MAX_ASKING


async def test_roots_outside_a_call_are_refused_when_only_a_2026_host_is_connected(
    kernel: FunctionKernel, host: Host
) -> None:
    server = await _served(kernel)
    async with host.client(server, mode="auto") as client:
        await client.list_tools()
        refused = await _relay_of(kernel).list_roots("features")
    assert isinstance(refused, types.ErrorData)
    assert refused.message.endswith("outside a call: no host that can be asked is connected")


# ------------------------------------------------------------------------------------------------- logging


async def test_log_messages_reach_the_host_with_the_servers_name(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel)) as client:
        await client.call_tool("mcp_features_count", {"n": 2})
        await wait_until(lambda: bool(host.logs))
    [message] = host.logs
    assert message.level == "warning"
    assert message.logger == "features/counter"
    assert str(message.data).startswith("counting started")


async def test_set_level_is_relayed_and_honoured(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel)) as client:
        await _set_level(client, "error")
        await client.call_tool("mcp_features_count", {"n": 2})
        await _set_level(client, "debug")
        await client.call_tool("mcp_features_count", {"n": 1})
        await wait_until(lambda: bool(host.logs))
    # The warning of the first call is below "error": not passed on; the second call's is.
    assert len(host.logs) == 1


async def test_with_two_hosts_the_servers_log_at_the_most_verbose_level_each_host_gets_its_own(
    kernel: FunctionKernel,
) -> None:
    verbose, terse = Host(), Host()
    server = await _served(kernel)
    async with verbose.client(server) as first, terse.client(server) as second:
        await _set_level(first, "debug")
        await _set_level(second, "error")  # the servers still log debug messages: the first host asked for them
        assert _text(await first.call_tool("mcp_features_chatty", {})) == "said"
        await wait_until(lambda: len(verbose.logs) == 2)
        await second.call_tool("mcp_features_chatty", {})
        await second.call_tool("mcp_features_count", {"n": 1})  # its warning is below "error" too
    assert [(m.level, m.logger, m.data) for m in verbose.logs] == [
        ("debug", "features/chatty", "a detail"),
        ("warning", "features/chatty", "a warning"),
    ]
    assert terse.logs == []


async def test_a_2026_host_gets_log_messages_on_its_calls_stream(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel), mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28"
        await client.call_tool("mcp_features_chatty", {}, meta={"io.modelcontextprotocol/logLevel": "debug"})
        await wait_until(lambda: any(m.level == "warning" for m in host.logs))
    assert ("warning", "features/chatty", "a warning") in [(m.level, m.logger, m.data) for m in host.logs]


async def test_a_2026_hosts_own_log_level_is_asked_of_a_2026_backend_for_that_call(host: Host) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_features", "features", protocol="auto"))
    try:
        async with host.client(await _served(kernel), mode="auto") as client:
            await client.call_tool("mcp_features_chatty", {}, meta={"io.modelcontextprotocol/logLevel": "debug"})
            await wait_until(lambda: any(m.level == "warning" for m in host.logs))
            await client.call_tool("mcp_features_chatty", {}, meta={"io.modelcontextprotocol/logLevel": "info"})
            await wait_until(lambda: sum(m.level == "warning" for m in host.logs) == 2)
    finally:
        await kernel.close()
    # Asked in the backend call's _meta: the debug message of the call that asked for it only.
    assert [(m.level, m.data) for m in host.logs] == [
        ("debug", "a detail"),
        ("warning", "a warning"),
        ("warning", "a warning"),
    ]


# ----------------------------------------------------------------------------------------------- resources


async def test_resources_and_templates_are_served_under_prefixed_uris(
    kernel: FunctionKernel, host: Host, host_era: str
) -> None:
    async with host.client(await _served(kernel), mode=host_era) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert {"mcp://features/notes://readme", "mcp://features/notes://pixel"} <= set(listed)
        assert listed["mcp://features/notes://readme"].description == "The readme."
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert templates == ["mcp://features/weather://{city}/today"]

        [text] = (await client.read_resource("mcp://features/notes://readme")).contents
        assert isinstance(text, types.TextResourceContents)
        assert text.text == "1.10 is a version, not a number"
        assert str(text.uri) == "mcp://features/notes://readme"
        [blob] = (await client.read_resource("mcp://features/notes://pixel")).contents
        assert isinstance(blob, types.BlobResourceContents)
        assert base64.b64decode(blob.blob) == PIXEL_PNG
        [weather] = (await client.read_resource("mcp://features/weather://Bern/today")).contents
        assert isinstance(weather, types.TextResourceContents)
        assert weather.text == "sunny in Bern"
        # A URI without the prefix (a link a tool returned) goes to the one server that offers it.
        [again] = (await client.read_resource("notes://readme")).contents
        assert isinstance(again, types.TextResourceContents)
        assert again.text == text.text
        with pytest.raises(MCPError, match="Unknown resource: notes://missing"):
            await client.read_resource("notes://missing")


async def test_own_names_serve_resources_as_their_server_names_them(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel, names="own")) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"notes://readme", "notes://pixel"} <= uris
        [text] = (await client.read_resource("notes://readme")).contents
        assert isinstance(text, types.TextResourceContents)
        assert text.text.startswith("1.10")


async def test_a_subscription_is_relayed_and_its_updates_forwarded(host: Host) -> None:
    # This backend takes subscriptions in the 2026-07-28 era only (its listen stream); a handshake-era backend's
    # resources/subscribe and unsubscribe are relayed in tests/serve/test_conformance.py.
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_updates", "updates", protocol="2026-07-28"))
    try:
        async with host.client(await _served(kernel)) as client:
            await _subscribe(client, "mcp://updates/notes://a", subscribe=True)
            await client.call_tool("mcp_updates_touch", {"uri": "notes://a"})
            await client.call_tool("mcp_updates_touch", {"uri": "notes://b"})  # not subscribed to: not forwarded
            await wait_until(lambda: bool(_updates(host)))
            await _subscribe(client, "mcp://updates/notes://a", subscribe=False)
    finally:
        await kernel.close()
    assert _updates(host) == ["mcp://updates/notes://a"]


def _updates(host: Host) -> list[str]:
    return [str(n.params.uri) for n in host.notices if isinstance(n, types.ResourceUpdatedNotification)]


async def test_a_changed_tool_list_is_told_to_the_host(host: Host) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_tools", "tools", protocol="legacy"))
    try:
        async with host.client(await _served(kernel)) as client:
            await client.call_tool("mcp_tools_grow", {})
            await wait_until(lambda: any(isinstance(n, types.ToolListChangedNotification) for n in host.notices))
            await wait_until(lambda: kernel.has_tool("mcp://tools.extra"))
            names = {tool.name for tool in (await client.list_tools()).tools}
    finally:
        await kernel.close()
    assert "mcp_tools_extra" in names


async def test_a_2026_host_is_told_of_changes_on_its_listen_stream(host: Host) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_updates", "updates", protocol="2026-07-28"))
    kernel.register_mcp_server(_backend("tests.servers.mcp_tools", "tools", protocol="legacy"))
    events: list[Any] = []
    try:
        async with host.client(await _served(kernel), mode="auto") as client:
            listening = client.listen(tools_list_changed=True, resource_subscriptions=["mcp://updates/notes://a"])
            async with listening as subscription, anyio.create_task_group() as tg:

                async def collect() -> None:
                    async for event in subscription:
                        events.append(event)

                tg.start_soon(collect)
                await client.call_tool("mcp_updates_touch", {"uri": "notes://b"})  # not asked for: not forwarded
                await client.call_tool("mcp_updates_touch", {"uri": "notes://a"})
                await client.call_tool("mcp_tools_grow", {})
                await wait_until(lambda: len(events) == 2)
                tg.cancel_scope.cancel()
    finally:
        await kernel.close()
    assert sorted(type(event).__name__ for event in events) == ["ResourceUpdated", "ToolsListChanged"]
    [updated] = [event for event in events if type(event).__name__ == "ResourceUpdated"]
    assert updated.uri == "mcp://updates/notes://a"
    updates = [n for n in host.notices if isinstance(n, types.ResourceUpdatedNotification)]
    assert [str(n.params.uri) for n in updates] == ["mcp://updates/notes://a"]  # once: on the listen stream
    assert "io.modelcontextprotocol/subscriptionId" in (updates[0].params.meta or {})


async def test_a_listen_streams_subscriptions_are_taken_back_when_it_ends(host: Host) -> None:
    changed: list[str] = []

    async def on_change(change: Any) -> None:
        if change.kind == "resource":
            changed.append(str(change.uri))

    kernel = FunctionKernel()
    backend = _backend("tests.servers.mcp_updates", "updates", protocol="2026-07-28", on_change=on_change)
    kernel.register_mcp_server(backend)
    watcher = Host()  # a handshake-era host holding notes://b all along
    try:
        server = await _served(kernel)
        async with host.client(server, mode="auto") as client, watcher.client(server) as other:
            await _subscribe(other, "mcp://updates/notes://b", subscribe=True)
            streamed = ["mcp://updates/notes://a", "mcp://updates/notes://b"]
            async with client.listen(resource_subscriptions=streamed):
                await client.call_tool("mcp_updates_touch", {"uri": "notes://a"})
                await wait_until(lambda: changed == ["notes://a"])
            # The stream ended: notes://a, which it alone held, is unsubscribed at the server; notes://b is not.
            await wait_until(lambda: "notes://a" not in _subscriptions(kernel))
            assert "notes://b" in _subscriptions(kernel)
            # A subscription after that one is in force once the server's change stream has the new filter.
            await _subscribe(other, "mcp://updates/notes://c", subscribe=True)
            await client.call_tool("mcp_updates_touch", {"uri": "notes://a"})  # no longer subscribed: no change
            await client.call_tool("mcp_updates_touch", {"uri": "notes://b"})
            await wait_until(lambda: len(changed) == 2)
    finally:
        await kernel.close()
    assert changed == ["notes://a", "notes://b"]
    assert _updates(watcher) == ["mcp://updates/notes://b"]


def _subscriptions(kernel: FunctionKernel) -> tuple[str, ...]:
    """The resources the kernel's connection to the updates server is subscribed to."""
    return kernel.get_mcp_server_state("updates").subscriptions


# ----------------------------------------------------------------------------------- prompts and completion


async def test_prompts_are_served_and_rendered_by_their_server(
    kernel: FunctionKernel, host: Host, host_era: str
) -> None:
    async with host.client(await _served(kernel), mode=host_era) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert {"mcp_features_review", "mcp_features_picture"} <= set(prompts)
        assert [a.name for a in prompts["mcp_features_review"].arguments or ()] == ["code", "language"]
        review = await client.get_prompt("mcp_features_review", {"code": "x = 1", "language": "perl"})
        assert [m.role for m in review.messages] == ["user", "assistant"]
        first = review.messages[0].content
        assert isinstance(first, types.TextContent)
        assert first.text == "Review this perl:\nx = 1"
        [picture] = (await client.get_prompt("mcp_features_picture")).messages
        assert isinstance(picture.content, types.ImageContent)
        assert base64.b64decode(picture.content.data) == PIXEL_PNG
        with pytest.raises(MCPError, match="Unknown prompt: review"):
            await client.get_prompt("review")


async def test_completion_is_asked_of_the_server_that_offers_the_reference(
    kernel: FunctionKernel, host: Host, host_era: str
) -> None:
    async with host.client(await _served(kernel), mode=host_era) as client:
        cities = await client.complete(
            types.ResourceTemplateReference(uri="mcp://features/weather://{city}/today"),
            {"name": "city", "value": "Be"},
        )
        assert cities.completion.values == ["Berlin", "Bern", "Bergen"]
        languages = await client.complete(
            types.PromptReference(name="mcp_features_review"), {"name": "language", "value": "p"}
        )
        assert languages.completion.values == ["python", "perl", "php"]


async def test_a_completion_of_more_than_the_protocols_hundred_values_reaches_a_host_cut_saying_there_are_more(
    host: Host, host_era: str
) -> None:
    kernel = FunctionKernel()
    hostile = ROOT / "tests" / "servers" / "mcp_hostile.py"
    kernel.register_mcp_server(McpServer(name="hostile", command=sys.executable, args=[str(hostile), "completions"]))
    try:
        async with host.client(await _served(kernel, names="own"), mode=host_era) as client:
            many = await client.complete(types.PromptReference(name="p"), {"name": "a", "value": ""})
    finally:
        await kernel.close()
    assert many.completion.values == [f"v{i}" for i in range(100)]
    assert many.completion.has_more is True
    assert many.completion.total == 1_000_000


async def test_a_backends_results_keep_its_server_info_stamp(host: Host, host_era: str) -> None:
    # A 2026-07-28 server stamps its serverInfo in each result's _meta: the gateway passes its results on with it
    # (the SDK stamps the gateway's own only on what carries none, as a listing made of several servers' items).
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_features", "features", protocol="2026-07-28"))
    try:
        async with host.client(await _served(kernel), mode=host_era) as client:
            review = types.PromptReference(name="mcp_features_review")
            results: list[Any] = [
                await client.read_resource("mcp://features/notes://readme"),
                await client.get_prompt("mcp_features_review", {"code": "x = 1"}),
                await client.complete(review, {"name": "language", "value": "p"}),
                await client.call_tool("mcp_features_count", {"n": 1}),
            ]
            listing = await client.list_prompts()
    finally:
        await kernel.close()
    stamps = [(result.meta or {}).get(types.SERVER_INFO_META_KEY) or {} for result in results]
    assert [stamp.get("name") for stamp in stamps] == ["features"] * 4
    assert ((listing.meta or {}).get(types.SERVER_INFO_META_KEY) or {}).get("name") != "features"


async def test_the_gateway_declares_what_it_relays(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel)) as client:
        capabilities = client.session.server_capabilities
    assert capabilities is not None
    assert capabilities.logging is not None
    assert capabilities.resources is not None
    assert capabilities.resources.subscribe is True
    assert capabilities.prompts is not None
    assert capabilities.completions is not None


async def test_a_kernel_without_mcp_servers_declares_tools_alone() -> None:
    async with FunctionKernel() as kernel, Client(build_mcp_server(kernel), mode="legacy") as client:
        capabilities = client.session.server_capabilities
    assert capabilities is not None
    assert capabilities.tools is not None
    assert (capabilities.logging, capabilities.resources, capabilities.prompts) == (None, None, None)


# ---------------------------------------------------------------------- FastMCP's client, kavalai serve's process


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A configuration serving the features backend (handshake era)."""
    args = ["-m", "tests.servers.mcp_features"]
    backend = {"name": "features", "command": sys.executable, "args": args, "cwd": str(ROOT), "protocol": "legacy"}
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return path


async def test_fastmcp_client_is_asked_and_told_through_the_process_over_stdio_and_http(config: Path) -> None:
    import fastmcp  # a dev dependency
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

    command = serve_command(config, "--names", "own")
    stdio = StdioTransport(command[0], command[1:], cwd=str(config.parent), keep_alive=False)  # ends with the client
    await _check_with_fastmcp(fastmcp, stdio)
    async with http_server(config, "--names", "own", "--bearer-token-env", TOKEN_VAR) as (url, _):
        await _check_with_fastmcp(fastmcp, StreamableHttpTransport(url, auth=TOKEN))


async def _check_with_fastmcp(fastmcp: Any, transport: Any) -> None:
    sampled: list[Any] = []
    logs: list[Any] = []

    async def sample(messages: Any, params: Any, context: Any) -> str:
        sampled.append(params)
        return "42"

    async def elicit(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
        return {"name": "Grace"}

    async def log(message: Any) -> None:
        logs.append(message)

    client = fastmcp.Client(
        transport, mode="legacy", sampling_handler=sample, elicitation_handler=elicit, log_handler=log
    )
    async with client:
        assert (await client.call_tool("consult", {"question": "?"})).content[0].text == "42"
        assert (await client.call_tool("greet", {})).content[0].text == "hello Grace"
        await client.call_tool("count", {"n": 1})
        await wait_until(lambda: bool(logs))
        [text] = await client.read_resource("notes://readme")
        assert getattr(text, "text", None) == "1.10 is a version, not a number"
        prompt = await client.get_prompt("review", {"code": "x"})
        assert [m.role for m in prompt.messages] == ["user", "assistant"]
        review = types.PromptReference(name="review")
        assert (await client.complete(review, {"name": "language", "value": "p"})).values == ["python", "perl", "php"]
        assert [t.uri_template for t in await client.list_resource_templates()] == ["weather://{city}/today"]
        with warnings.catch_warnings():  # the SDK warns that logging is deprecated by the 2026-07-28 era
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("debug")
        await client.call_tool("chatty", {})
        await wait_until(lambda: any(m.level == "debug" for m in logs))
    assert sampled[0].max_tokens == 4096  # the backend asked for 100,000: the kernel's default cap
    assert logs[0].logger == "features/counter"
