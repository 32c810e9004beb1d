"""What a real MCP server may ask of the client: sampling, elicitation, roots; answered only when configured.

The tools used here ask on the session, as handshake-era servers do (``ctx.session.create_message``), so the
connection is pinned to the handshake (``protocol="legacy"``); ``test_input_required.py`` covers both eras with
tools that ask the 2026-07-28 way."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from mcp_types import ElicitResult
from pydantic import BaseModel, ValidationError
from tests.adapters.mcp.conftest import StdioFactory

from kavalai import FunctionKernel, ToolExecutionError
from kavalai.adapters.mcp import McpElicitation, McpElicitationResult, McpSamplingRequest
from kavalai.adapters.mcp._client_side import HANDLER_FAILED
from kavalai.testing import ScriptedLLM


async def _call(stdio_server: StdioFactory, tool: str, arguments: dict[str, Any] | None = None, **options: Any) -> Any:
    kernel = FunctionKernel()
    options.setdefault("protocol", "legacy")
    kernel.register_mcp_server(stdio_server("feat", module="tests.servers.mcp_features", **options))
    try:
        return (await kernel.call_tool(f"mcp://feat.{tool}", arguments or {})).result  # type: ignore[attr-defined]
    finally:
        await kernel.close()


async def test_without_handlers_nothing_is_offered(stdio_server: StdioFactory) -> None:
    assert (await _call(stdio_server, "ask_model", {"question": "hi"})).startswith("refused:")
    assert (await _call(stdio_server, "ask_user")).startswith("refused:")
    [roots] = await _call(stdio_server, "my_roots")
    assert roots.startswith("refused:")


async def test_sampling_goes_through_the_handler_capped_and_approved(stdio_server: StdioFactory) -> None:
    seen: list[McpSamplingRequest] = []

    async def answer(request: McpSamplingRequest) -> str:
        seen.append(request)
        return f"answer to {request.messages[0][1]}"

    assert await _call(stdio_server, "ask_model", {"question": "why?"}, sampling=answer) == "answer to why?"
    [request] = seen
    assert request.server == "feat"
    assert request.messages == (("user", "why?"),)
    assert request.system_prompt == "Answer briefly."
    assert request.max_tokens == 4096  # the server asked for 100,000: capped at sampling_max_tokens
    assert request.model_hints == ("small-model",)
    refused = await _call(
        stdio_server, "ask_model", {"question": "x"}, sampling=answer, sampling_approval=lambda r: False
    )
    assert refused == "refused: Sampling refused: the client did not approve the request."
    declined = await _call(stdio_server, "ask_model", {"question": "x"}, sampling=lambda r: _none())
    assert declined == "refused: Sampling refused: the client declined the request."


async def _none() -> None:
    return None


async def test_sampling_with_a_kavalai_llm_client(stdio_server: StdioFactory) -> None:
    llm = ScriptedLLM(["forty-two"])
    assert await _call(stdio_server, "ask_model", {"question": "the answer?"}, sampling=llm) == "forty-two"
    [request] = llm.requests
    assert [m.content for m in request.messages] == ["Answer briefly.", "the answer?"]


async def test_a_failing_sampling_handler_is_the_servers_error_not_ours(stdio_server: StdioFactory) -> None:
    async def broken(request: McpSamplingRequest) -> str:
        raise RuntimeError("model down")

    result = await _call(stdio_server, "ask_model", {"question": "x"}, sampling=broken)
    assert result == "refused: Sampling refused: the client's sampling handler failed."  # never "model down"


async def test_a_failing_elicitation_handler_tells_the_server_a_fixed_refusal(
    stdio_server: StdioFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: McpElicitation) -> dict[str, Any]:
        raise RuntimeError("handler-private-detail /home/ada/.secrets")

    with caplog.at_level(logging.WARNING, logger="kavalai.mcp"):
        result = await _call(stdio_server, "ask_user", elicitation=broken)
    assert result == f"refused: {HANDLER_FAILED}"
    assert "handler-private-detail" not in result
    # The user still learns why, on this side: the log record keeps the exception.
    assert any(r.exc_info is not None and "handler-private-detail" in str(r.exc_info[1]) for r in caplog.records)


async def test_elicitation_accepts_declines_or_cancels(stdio_server: StdioFactory) -> None:
    asked: list[McpElicitation] = []

    async def accept(request: McpElicitation) -> dict[str, Any]:
        asked.append(request)
        return {"name": "Ada"}

    assert await _call(stdio_server, "ask_user", elicitation=accept) == "accept: Ada"
    assert asked[0].message == "Who are you?"
    assert asked[0].mode == "form"
    assert asked[0].schema["properties"]["name"]["type"] == "string"

    async def decline(request: McpElicitation) -> None:
        return None

    async def cancel(request: McpElicitation) -> McpElicitationResult:
        return McpElicitationResult(action="cancel")

    assert await _call(stdio_server, "ask_user", elicitation=decline) == "decline: -"
    assert await _call(stdio_server, "ask_user", elicitation=cancel) == "cancel: -"


async def test_the_sdks_elicit_result_is_sent_with_its_own_action(stdio_server: StdioFactory) -> None:
    async def sdk_decline(request: McpElicitation) -> Any:
        return ElicitResult(action="decline")

    async def sdk_accept(request: McpElicitation) -> Any:
        return ElicitResult(action="accept", content={"name": "Grace"})

    assert await _call(stdio_server, "ask_user", elicitation=sdk_decline) == "decline: -"  # not an accept
    assert await _call(stdio_server, "ask_user", elicitation=sdk_accept) == "accept: Grace"


class _Unrelated(BaseModel):
    name: str = "Ada"


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_an_answer_that_is_none_of_the_accepted_kinds_is_refused_and_logged(
    stdio_server: StdioFactory, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def odd(request: McpElicitation) -> Any:
        return _Unrelated()  # iterable as (field, value) pairs: once sent as an accept of {"name": "Ada"}

    with caplog.at_level(logging.WARNING, logger="kavalai.mcp"):
        if protocol == "legacy":  # asked on the session: the server gets our error and says so
            result = await _call(stdio_server, "ask_user", elicitation=odd)
            assert result.startswith("refused: the elicitation handler returned a _Unrelated, which is no answer")
        else:  # asked in an InputRequiredResult: the call fails here, saying why
            with pytest.raises(ToolExecutionError, match=r"returned a _Unrelated, which is no answer.*a mapping"):
                await _call(stdio_server, "greet", elicitation=odd, protocol=protocol)
    assert any("returned a _Unrelated" in r.getMessage() and "'feat'" in r.getMessage() for r in caplog.records)


async def test_roots_are_listed_as_file_uris(stdio_server: StdioFactory, tmp_path: Path) -> None:
    roots = await _call(stdio_server, "my_roots", roots=[str(tmp_path), "file:///srv/data"])
    assert roots == [_uri(tmp_path), "file:///srv/data"]


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


def test_handlers_must_be_functions() -> None:
    from kavalai import McpServer

    with pytest.raises(ValidationError, match="sampling must be a function or a kavalai.llm client"):
        McpServer(name="s", command="x", sampling="not a function")
    with pytest.raises(ValidationError, match="elicitation must be a function"):
        McpServer(name="s", command="x", elicitation=42)
