"""Both protocol eras against real servers: the stateless 2026-07-28 protocol (server/discover, input requests in
results, changes on a listen stream) and the initialize handshake, negotiated automatically or pinned."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.adapters.mcp.conftest import StdioFactory, wait_until
from tests.servers.mcp_features import build_server
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, FunctionKernelException, McpServer, ServerConnectionError
from kavalai.adapters.mcp import McpChange, McpElicitation, McpLogMessage, McpSamplingRequest

MODERN, LEGACY = "2026-07-28", "2025-11-25"
VERSIONS = Path(__file__).resolve().parents[2] / "servers" / "mcp_versions.py"
ERAS = [pytest.param("2026-07-28", id="2026-07-28"), pytest.param("legacy", id="handshake")]


async def _kernel(stdio_server: StdioFactory, protocol: str, **options: Any) -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("feat", module="tests.servers.mcp_features", protocol=protocol, **options))
    await kernel.connect_mcp_servers()
    return kernel


@pytest.mark.parametrize(("protocol", "negotiated"), [("auto", MODERN), ("legacy", LEGACY), (MODERN, MODERN)])
async def test_the_era_is_negotiated_or_pinned(stdio_server: StdioFactory, protocol: str, negotiated: str) -> None:
    kernel = await _kernel(stdio_server, protocol)
    try:
        assert kernel.get_mcp_server_state("feat").protocol_version == negotiated
        assert (await kernel.call_tool("mcp://feat.count", {"n": 2})).result == 2  # type: ignore[attr-defined]
    finally:
        await kernel.close()


async def test_a_server_of_the_handshake_era_is_reached_by_auto(stdio_server: StdioFactory, tmp_path: Path) -> None:
    # A server written before 2026-07-28: server/discover is "method not found", so the handshake follows.
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("old", module="tests.servers.mcp_handshake_only", protocol="auto"))
    try:
        assert (await kernel.call_tool("mcp://old.add", {"a": 2, "b": 3})).result == 5  # type: ignore[attr-defined]
        assert kernel.get_mcp_server_state("old").protocol_version == LEGACY
    finally:
        await kernel.close()


async def test_a_pinned_era_the_server_does_not_speak_fails_the_connect(stdio_server: StdioFactory) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("old", module="tests.servers.mcp_handshake_only", protocol=MODERN))
    try:
        with pytest.raises(ServerConnectionError, match=r"'old'.*protocol='2026-07-28' is pinned.*2025-11-25"):
            await kernel.call_tool("mcp://old.add", {"a": 1, "b": 1})
    finally:
        await kernel.close()


async def test_a_date_that_is_no_protocol_fails_the_connect_naming_the_known_ones(stdio_server: StdioFactory) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("feat", module="tests.servers.mcp_features", protocol="2031-01-01"))
    try:
        with pytest.raises(ServerConnectionError, match=r"protocol='2031-01-01' is not a protocol this client speaks"):
            await kernel.connect_mcp_servers()
    finally:
        await kernel.close()


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
async def test_a_handshake_era_pin_is_spoken_exactly(stdio_server: StdioFactory, version: str) -> None:
    kernel = await _kernel(stdio_server, version)  # the SDK's server, which speaks every handshake version
    try:
        assert kernel.get_mcp_server_state("feat").protocol_version == version
        assert (await kernel.call_tool("mcp://feat.count", {"n": 3})).result == 3  # type: ignore[attr-defined]
    finally:
        await kernel.close()


def _versions_server(*speaks: str, protocol: str) -> McpServer:
    return McpServer(name="ver", command=sys.executable, args=[str(VERSIONS), *speaks], protocol=protocol)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
async def test_the_server_is_offered_the_pinned_version_in_initialize(version: str) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_versions_server("2024-11-05", "2025-03-26", "2025-06-18", LEGACY, protocol=version))
    try:
        assert (await kernel.call_tool("mcp://ver.offered")).result == version  # type: ignore[attr-defined]
        assert kernel.get_mcp_server_state("ver").protocol_version == version
    finally:
        await kernel.close()


async def test_a_pin_the_server_does_not_speak_is_refused_naming_both_sides_versions() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_versions_server("2025-03-26", LEGACY, protocol="2025-06-18"))
    try:
        with pytest.raises(
            ServerConnectionError,
            match=r"'ver'.*protocol='2025-06-18' is pinned, but the server speaks 2025-11-25; kavalai speaks "
            r"2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 and 2026-07-28",
        ):
            await kernel.connect_mcp_servers()
        assert kernel.list_tools("mcp://ver.*") == []
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ["newest", "2026", "auto "])
def test_a_protocol_that_is_not_one_is_refused_at_once(protocol: str) -> None:
    with pytest.raises(ValidationError, match="protocol"):
        FunctionKernel().register_mcp_server(__import__("kavalai").McpServer(name="x", command="x", protocol=protocol))


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_elicitation_and_roots_in_both_eras(
    stdio_server: StdioFactory, protocol: str, tmp_path: Path
) -> None:
    sampled: list[McpSamplingRequest] = []
    asked: list[McpElicitation] = []

    async def model(request: McpSamplingRequest) -> str:
        sampled.append(request)
        return f"because {request.messages[0][1]}"

    async def user(request: McpElicitation) -> dict[str, Any]:
        asked.append(request)
        return {"name": "Ada"}

    kernel = await _kernel(stdio_server, protocol, sampling=model, elicitation=user, roots=[str(tmp_path)])
    try:
        consult = await kernel.call_tool("mcp://feat.consult", {"question": "why?"})
        assert consult.result == "because why?"  # type: ignore[attr-defined]
        assert sampled[0].max_tokens == 4096  # the server asked for 100,000: capped
        assert (await kernel.call_tool("mcp://feat.greet")).result == "hello Ada"  # type: ignore[attr-defined]
        assert asked[0].message == "Who are you?"
        folders = (await kernel.call_tool("mcp://feat.folders")).result  # type: ignore[attr-defined]
        assert folders == [tmp_path.as_uri()]
    finally:
        await kernel.close()


async def test_a_refused_input_request_fails_the_call_naming_why(stdio_server: StdioFactory) -> None:
    # 2026-07-28: the client answers the server's questions itself, so a refusal ends the call on our side.
    def never(request: McpSamplingRequest) -> bool:
        return False

    async def model(request: McpSamplingRequest) -> str:
        raise AssertionError("not approved, so never asked")

    kernel = await _kernel(stdio_server, MODERN, sampling=model, sampling_approval=never)
    try:
        with pytest.raises(
            FunctionKernelException, match=r"mcp://feat\.consult failed: it asked for input.*refused.*did not approve"
        ):
            await kernel.call_tool("mcp://feat.consult", {"question": "why?"})
        with pytest.raises(FunctionKernelException, match=r"mcp://feat\.greet"):
            await kernel.call_tool("mcp://feat.greet")  # no elicitation handler: refused, not hung
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_changes_reach_on_change_in_both_eras(stdio_server: StdioFactory, protocol: str) -> None:
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(stdio_server("tools", protocol=protocol, on_change=changes.append))
    try:
        assert not kernel.has_tool("mcp://tools.extra")
        await kernel.call_tool("mcp://tools.grow")
        await wait_until(lambda: kernel.has_tool("mcp://tools.extra"))
        assert (await kernel.call_tool("mcp://tools.extra")).result == "extra!"  # type: ignore[attr-defined]
        assert McpChange(server="tools", kind="tools") in changes
    finally:
        await kernel.close()


@pytest.fixture(scope="module")
def features_url() -> Iterator[str]:
    """The features server over streamable HTTP on a free 127.0.0.1 port."""
    with serve(build_server().streamable_http_app()) as base_url:
        yield f"{base_url}/mcp"


@pytest.mark.parametrize("protocol", ERAS)
async def test_input_requests_over_streamable_http_in_both_eras(features_url: str, protocol: str) -> None:
    async def model(request: McpSamplingRequest) -> str:
        return "over http"

    async def user(request: McpElicitation) -> dict[str, Any]:
        return {"name": "Grace"}

    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="feat", url=features_url, protocol=protocol, sampling=model, elicitation=user)
    )
    try:
        assert (await kernel.call_tool("mcp://feat.consult", {"question": "?"})).result == "over http"  # type: ignore[attr-defined]
        assert (await kernel.call_tool("mcp://feat.greet")).result == "hello Grace"  # type: ignore[attr-defined]
        expected = MODERN if protocol == MODERN else LEGACY
        assert kernel.get_mcp_server_state("feat").protocol_version == expected
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_server_logs_reach_the_log_handler_at_the_level_asked(stdio_server: StdioFactory, protocol: str) -> None:
    seen: list[McpLogMessage] = []
    kernel = await _kernel(stdio_server, protocol, log_handler=seen.append, env={"TOKEN": "s3cr3t-token"})
    try:
        await kernel.call_tool("mcp://feat.count", {"n": 1})
        await wait_until(lambda: bool(seen))
        [message] = seen
        assert (message.server, message.level, message.logger) == ("feat", "warning", "counter")
        assert message.data == "counting started token=***"  # the server's secrets are masked
    finally:
        await kernel.close()
    quiet: list[McpLogMessage] = []
    kernel = await _kernel(stdio_server, protocol, log_handler=quiet.append, log_level="error")
    try:
        await kernel.call_tool("mcp://feat.count", {"n": 1})
        await kernel.call_tool("mcp://feat.count", {"n": 1})  # any log of the first call has arrived by now
        assert quiet == []  # a warning is below the level asked for
    finally:
        await kernel.close()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_log_level_set_at_run_time_filters_what_reaches_the_log_handler(
    stdio_server: StdioFactory, protocol: str
) -> None:
    seen: list[McpLogMessage] = []
    kernel = await _kernel(stdio_server, protocol, log_handler=seen.append, log_level="warning")
    try:
        await kernel.call_tool("mcp://feat.count", {"n": 1})
        await wait_until(lambda: len(seen) == 1)  # a warning, at the configured level
        await kernel.adapter("mcp").set_log_level("feat", "error")  # type: ignore[attr-defined]  # as a gateway's host
        await kernel.call_tool("mcp://feat.count", {"n": 1})
        await kernel.call_tool("mcp://feat.count", {"n": 1})  # any log of the call before has arrived by now
        assert len(seen) == 1  # warnings are below the level asked for now
        await kernel.adapter("mcp").set_log_level("feat", "debug")  # type: ignore[attr-defined]
        await kernel.call_tool("mcp://feat.chatty")
        await wait_until(lambda: [m.level for m in seen[1:]] == ["debug", "warning"])  # below the configured level
    finally:
        await kernel.close()
