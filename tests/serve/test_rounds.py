"""A 2026-07-28 host through ``kavalai serve``: what a backend asks during the host's call (sampling, elicitation,
roots) becomes the call's input-required rounds, and the host's answers go back to the backend
(``src/kavalai/serve/_rounds.py``).

The backend is a real stdio MCP server (``tests/servers/mcp_features.py``) spoken to in either era; the host is the
official SDK's client in the 2026-07-28 era, which answers an ``InputRequiredResult`` with its callbacks and calls
again (its own multi-round driver).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from tests.serve.test_conformance import ROOT
from tests.serve.test_relay import Host, _backend, _served, _text, config, era, host, kernel
from tests.serve.test_serve import TOKEN, TOKEN_VAR, http_server, read, serve_command, wait_until

from kavalai import FunctionKernel
from kavalai.serve._rounds import InputRounds
from mcp import Client

__all__ = ["config", "era", "host", "kernel"]  # fixtures


async def test_sampling_is_the_hosts_round_within_the_kernels_cap(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel), mode="auto") as client:
        question = {"question": "six times seven?"}
        first = await client.session.call_tool("mcp_features_consult", question, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        [(key, request)] = (first.input_requests or {}).items()
        assert isinstance(request, types.CreateMessageRequest)
        assert request.params.max_tokens == 500  # the backend asked for 100,000: capped at its sampling_max_tokens
        [message] = request.params.messages
        assert isinstance(message.content, types.TextContent)
        assert message.content.text == "six times seven?"
        answer = types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="42"), model="host-model", stop_reason="endTurn"
        )
        result = await client.session.call_tool(
            "mcp_features_consult",
            question,
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(result, types.CallToolResult)
    assert _text(result) == "42"


async def test_elicitation_and_roots_reach_the_host_through_its_driver(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel, names="own"), mode="auto") as client:
        assert _text(await client.call_tool("greet", {})) == "hello Ada"
        roots = await client.call_tool("folders", {})
        assert _text(await client.call_tool("consult", {"question": "?"})) == "42"
    [asked] = host.elicited
    assert asked.message == "Who are you?"
    assert roots.structured_content == {"result": ["file:///host/project"]}
    assert len(host.sampled) == 1


async def test_a_host_that_cannot_answer_is_told_what_it_must_declare(
    kernel: FunctionKernel, host: Host, era: str
) -> None:
    """A 2026-07-28 host that did not declare sampling, whose call's handshake-era backend asks for it, gets
    ``MissingRequiredClientCapabilityError`` (-32021) naming it (the backend is refused, its call ended); a
    2026-07-28 backend is told the host's capabilities and refuses the call itself with -32021, which reaches the
    host as that JSON-RPC error, its data kept (not as a tool's error result)."""
    async with host.client(await _served(kernel), answers=False, mode="auto") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("mcp_features_consult", {"question": "?"})
        assert _text(await client.call_tool("mcp_features_folders", {})) != ""  # roots it offers: still asked
    assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}
    if era == "legacy":
        assert "'sampling', which the host did not declare" in raised.value.error.message
    else:  # the backend's own words, behind the tool's URI
        assert "mcp://features.consult" in raised.value.error.message
        assert "error -32021: Client did not declare the sampling capability" in raised.value.error.message


async def test_a_retry_with_an_unknown_or_foreign_state_is_refused(kernel: FunctionKernel, host: Host) -> None:
    async with host.client(await _served(kernel), mode="auto") as client:
        with pytest.raises(MCPError, match="Unknown or ended requestState for mcp_features_consult"):
            await client.session.call_tool("mcp_features_consult", {"question": "?"}, request_state="forged")
        first = await client.session.call_tool("mcp_features_consult", {"question": "?"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        with pytest.raises(MCPError, match="Unknown or ended requestState for mcp_features_greet"):
            await client.session.call_tool("mcp_features_greet", {}, request_state=first.request_state)


async def test_a_host_cancelling_its_request_in_a_round_cuts_the_backends_call(
    kernel: FunctionKernel, host: Host, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    arguments = {"question": "?", "marker": str(marker)}
    async with host.client(await _served(kernel), mode="auto") as client:
        first = await client.session.call_tool("mcp_features_consult_then_wait", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        [key] = first.input_requests or {}
        answer = types.CreateMessageResult(role="assistant", content=types.TextContent(text="42"), model="m")

        async def answering() -> None:
            await client.session.call_tool(
                "mcp_features_consult_then_wait",
                arguments,
                input_responses={key: answer},
                request_state=first.request_state,
                allow_input_required=True,
            )

        async with anyio.create_task_group() as group:
            group.start_soon(answering)
            await wait_until(lambda: read(marker) == "started")  # the backend has its answer and works on
            group.cancel_scope.cancel()  # the host cancels its request of the round
        await wait_until(lambda: read(marker) == "cancelled")  # the backend's call was cut
        with pytest.raises(MCPError, match="Unknown or ended requestState"):  # the call ended
            await client.session.call_tool(
                "mcp_features_consult_then_wait", arguments, request_state=first.request_state
            )
        assert _text(await client.call_tool("mcp_features_count", {"n": 2})) == "2"  # the gateway goes on


async def test_a_call_the_host_leaves_ends_when_the_serving_ends(kernel: FunctionKernel, host: Host) -> None:
    server = await _served(kernel)
    async with host.client(server, mode="auto") as client:
        first = await client.session.call_tool("mcp_features_consult", {"question": "?"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
    # The serving ended with the call in its round: the call was cancelled, its state forgotten.
    async with host.client(server, mode="auto") as client:
        with pytest.raises(MCPError, match="Unknown or ended requestState"):
            await client.session.call_tool("mcp_features_consult", {"question": "?"}, request_state=first.request_state)
        assert _text(await client.call_tool("mcp_features_count", {"n": 2})) == "2"  # the backend goes on


async def test_rounds_outside_a_serving_are_refused() -> None:
    rounds = InputRounds()
    assert not rounds.available
    params = types.CallToolRequestParams(name="t")
    with pytest.raises(MCPError, match="no call can take input rounds"):
        await rounds.call("t", params, None, _never)
    async with rounds.running():
        assert rounds.available
    assert not rounds.available


async def test_a_question_the_host_leaves_unanswered_is_refused_to_the_backend_after_the_window() -> None:
    rounds = InputRounds(answer_window=0.2)
    request = types.ListRootsRequest()

    async def asking(call: Any) -> types.CallToolResult:
        answer = await call.ask(request, types.ListRootsResult)  # what a backend's roots/list does
        return types.CallToolResult(content=[types.TextContent(text=answer.message)], is_error=True)

    params = types.CallToolRequestParams(name="t")
    async with rounds.running():
        first = await rounds.call("t", params, None, asking)
        assert isinstance(first, types.InputRequiredResult)
        assert list((first.input_requests or {}).values()) == [request]
        # The host comes back without the answer: the question is refused once the window passes, and the call ends.
        again = types.CallToolRequestParams(name="t", request_state=first.request_state)
        with anyio.fail_after(30):
            result = await rounds.call("t", again, None, asking)
    assert isinstance(result, types.CallToolResult)
    assert _text(result) == "the host of kavalai serve did not answer within 0.2 s"


async def test_only_one_request_answers_a_round() -> None:
    rounds = InputRounds()
    request = types.ListRootsRequest()
    answered = anyio.Event()
    go_on = anyio.Event()

    async def asking(call: Any) -> types.CallToolResult:
        await call.ask(request, types.ListRootsResult)
        answered.set()
        await go_on.wait()  # the answering request stays in while its twin comes
        await call.ask(request, types.ListRootsResult)
        return types.CallToolResult(content=[types.TextContent(text="done")])

    roots = types.ListRootsResult(roots=[])
    async with rounds.running():
        first = await rounds.call("t", types.CallToolRequestParams(name="t"), None, asking)
        assert isinstance(first, types.InputRequiredResult)
        [key] = first.input_requests or {}
        retry = types.CallToolRequestParams(name="t", request_state=first.request_state, input_responses={key: roots})
        outcomes: list[Any] = []

        async def answer() -> None:
            outcomes.append(await rounds.call("t", retry, None, asking))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(answer)
                await answered.wait()
                with pytest.raises(MCPError, match="only one request may answer a round") as twin:
                    await rounds.call("t", retry, None, asking)  # the same round, while the first answer is in
                assert twin.value.error.code == types.INVALID_PARAMS
                go_on.set()
            [second] = outcomes
            assert isinstance(second, types.InputRequiredResult)
            assert second.request_state != first.request_state
            with pytest.raises(MCPError, match="only one request may answer a round"):
                await rounds.call("t", retry, None, asking)  # a late retry of the round answered
            [key] = second.input_requests or {}
            state = second.request_state
            last = types.CallToolRequestParams(name="t", request_state=state, input_responses={key: roots})
            result = await rounds.call("t", last, None, asking)
    assert isinstance(result, types.CallToolResult)
    assert _text(result) == "done"


async def _never(call: Any) -> types.CallToolResult:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def test_the_sdks_client_is_asked_in_rounds_through_the_process_over_stdio_and_http(config: Path) -> None:
    host = Host()
    command = serve_command(config, "--names", "own")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(config.parent))
    with (config.parent / "stdio.log").open("w") as errlog:
        await _check_rounds(host, stdio_client(params, errlog=errlog))
    async with (
        http_server(config, "--names", "own", "--bearer-token-env", TOKEN_VAR) as (url, _),
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
    ):
        await _check_rounds(host, streamable_http_client(url, http_client=http))
    assert [asked.message for asked in host.elicited] == ["Who are you?", "Who are you?"]


async def _check_rounds(host: Host, transport: Any) -> None:
    async with host.client(transport, mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28"
        assert _text(await client.call_tool("consult", {"question": "?"})) == "42"
        assert _text(await client.call_tool("greet", {})) == "hello Ada"
        roots = await client.call_tool("folders", {})
    assert roots.structured_content == {"result": ["file:///host/project"]}


@pytest.fixture
def rounds_config(tmp_path: Path) -> Path:
    """A configuration serving the 2026-07-28 backend whose tools and prompt ask in rounds of their own."""
    args = ["-m", "tests.servers.mcp_conformance_rounds"]
    backend = {"name": "rounds", "command": sys.executable, "args": args, "cwd": str(ROOT), "protocol": "2026-07-28"}
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return path


async def test_a_prompts_questions_and_a_round_of_three_reach_the_host_over_stdio_and_http(rounds_config: Path) -> None:
    """What a backend asks while rendering a prompt reaches the host (a 2026-07-28 host: in rounds of its
    ``prompts/get``; a handshake-era host: on its session); three requests a backend asks in one round reach a
    2026-07-28 host in one round."""
    host = Host()
    command = serve_command(rounds_config, "--names", "own")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(rounds_config.parent))
    with (rounds_config.parent / "stdio.log").open("w") as errlog:
        await _check_kinds(host, lambda: stdio_client(params, errlog=errlog))
    async with (
        http_server(rounds_config, "--names", "own", "--bearer-token-env", TOKEN_VAR) as (url, _),
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
    ):
        await _check_kinds(host, lambda: streamable_http_client(url, http_client=http))
    assert [asked.message for asked in host.elicited] == ["What context should the prompt use?"] * 2


async def _check_kinds(host: Host, transport: Any) -> None:
    async with host.client(transport(), mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28"
        first = await client.session.get_prompt("test_input_required_result_prompt", allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert list(first.input_requests or {}) == ["user_context"]
        answer = types.ElicitResult(action="accept", content={"context": "the tests"})
        prompt = await client.session.get_prompt(
            "test_input_required_result_prompt",
            input_responses={"user_context": answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(prompt, types.GetPromptResult)
        assert _prompt_text(prompt) == "Use this context: the tests"
        three = await client.session.call_tool(
            "test_input_required_result_multiple_inputs", {}, allow_input_required=True
        )
        assert isinstance(three, types.InputRequiredResult)
        assert sorted(three.input_requests or {}) == ["client_roots", "greeting", "user_name"]
    async with host.client(transport(), mode="legacy") as client:  # asked on its session
        assert _prompt_text(await client.get_prompt("test_input_required_result_prompt")) == "Use this context: None"


def _prompt_text(result: types.GetPromptResult) -> str:
    [message] = result.messages
    assert isinstance(message.content, types.TextContent)
    return message.content.text


@pytest.mark.parametrize("count", [9, 12, 16])
async def test_a_backend_round_of_more_than_eight_is_one_round_of_the_host(host: Host, count: int) -> None:
    """A 2026-07-28 backend asking 9..16 questions in one round (more than the 8 one call may put to its host one by
    one, at most the 16 a round may ask): the host gets them in one round, under the backend's keys, none refused."""
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_conformance_rounds", "rounds", protocol="2026-07-28"))
    try:
        async with host.client(await _served(kernel, names="own"), mode="auto") as client:
            first = await client.session.call_tool("ask_many", {"count": count}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            keys = sorted(first.input_requests or {})
            answers = {key: types.ElicitResult(action="accept", content={"name": key}) for key in keys}
            result = await client.session.call_tool(
                "ask_many",
                {"count": count},
                input_responses=answers,
                request_state=first.request_state,
                allow_input_required=True,
            )
    finally:
        await kernel.close()
    assert keys == sorted(f"ask{n + 1}" for n in range(count))
    assert isinstance(result, types.CallToolResult)
    assert _text(result) == f"{count} answered"


async def test_a_backend_round_past_sixteen_is_refused_naming_the_bound(host: Host) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_conformance_rounds", "rounds", protocol="2026-07-28"))
    try:
        async with host.client(await _served(kernel, names="own"), mode="auto") as client:
            result = await client.session.call_tool("ask_many", {"count": 17}, allow_input_required=True)
    finally:
        await kernel.close()
    assert isinstance(result, types.CallToolResult)
    assert result.is_error
    assert "17 requests at once, more than the 16 a round may ask" in _text(result)


async def test_a_host_lacking_several_capabilities_a_backend_round_needs_is_told_every_one(host: Host) -> None:
    """A backend round asking for elicitation, sampling and roots at once, of a 2026-07-28 host that declared only
    roots: -32021 naming both capabilities it lacks (not only the first asked)."""
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_conformance_rounds", "rounds", protocol="2026-07-28"))
    try:
        async with host.client(await _served(kernel, names="own"), answers=False, mode="auto") as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("test_input_required_result_multiple_inputs", {})
    finally:
        await kernel.close()
    assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.data == {"requiredCapabilities": {"elicitation": {}, "sampling": {}}}
    assert "capabilities 'elicitation' and 'sampling', which the host did not declare" in raised.value.error.message


async def test_a_backend_is_told_the_hosts_capabilities_and_asks_only_what_the_host_can_answer(host: Host) -> None:
    """A 2026-07-28 host that declared sampling but not elicitation: the backend is told the host's capabilities
    (not the gateway's), so its round asks for sampling alone, which the host answers; a backend that asks for
    elicitation anyway does not reach the host, and the host's request fails with -32021 naming it."""
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_conformance_rounds", "rounds", protocol="2026-07-28"))
    try:
        served = await _served(kernel, names="own")
        async with Client(served, mode="auto", sampling_callback=host.sample) as client:
            answered = await client.call_tool("test_input_required_result_capabilities", {})
            with pytest.raises(MCPError) as raised:
                await client.call_tool("test_streaming_elicitation", {})
        async with Client(served, mode="auto") as client:  # declares nothing that can be asked
            unasked = await client.call_tool("test_input_required_result_capabilities", {})
    finally:
        await kernel.close()
    assert _text(answered) == "answered: greeting"
    assert len(host.sampled) == 1
    assert host.elicited == []
    assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.data == {"requiredCapabilities": {"elicitation": {}}}
    assert _text(unasked) == "answered: "
