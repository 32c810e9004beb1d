"""Progress through ``kavalai serve`` (issue 42): backends are asked for progress only when the host asked (its
request carries a progress token), and a 2026-07-28 host's call that spans several of its requests (an
input-required round, then the request carrying the answer) has each backend request's progress sent to the host
request in at the time (``kavalai.serve._progress``).

The gateway is the ``kavalai serve`` process over stdio, its host the official SDK's client (which puts a progress
token in a request's ``_meta`` when it is given a progress callback); the backend a real 2026-07-28 stdio server
(``tests/servers/mcp_asked_capabilities.py``) reporting whether it was asked.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.serve.test_conformance import ROOT
from tests.serve.test_relay import Host, _text
from tests.serve.test_serve import serve_command

from mcp import Client


@pytest.fixture
def config(tmp_path: Path) -> Path:
    args = ["-m", "tests.servers.mcp_asked_capabilities"]
    backend = {"name": "asked", "command": sys.executable, "args": args, "cwd": str(ROOT), "protocol": "2026-07-28"}
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def _client(config: Path, mode: str, host: Host) -> AsyncIterator[Client]:
    """The host's client of ``kavalai serve`` over stdio, in the era ``mode`` names."""
    command = serve_command(config, "--names", "own")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(config.parent))
    with (config.parent / f"stdio-{mode}.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, elicitation_callback=host.elicit) as client:
            yield client


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_backend_is_asked_for_progress_only_when_the_host_asked(config: Path, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with _client(config, mode, Host()) as client:
        unasked = await client.call_tool("counted", {})
        asked = await client.call_tool("counted", {}, progress_callback=on_progress)
    assert _text(unasked) == "progress asked: False"
    assert _text(asked) == "progress asked: True"
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]


async def test_a_calls_progress_across_rounds_goes_to_the_hosts_request_of_each_round(config: Path) -> None:
    """The backend reports 5 of 10 before its question (the host's first request), then 1 and 2 of 2 on the request
    carrying the answer (the host's second request, a token of its own): the host gets each on its own request's
    token (the SDK's client calls the same callback for both), not the later ones on the first request's token,
    which the host has finished with."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    host = Host()
    async with _client(config, "auto", host) as client:
        result = await client.call_tool("asked_then_counted", {}, progress_callback=on_progress)
    assert _text(result) == "progress asked: True"
    assert [asked.message for asked in host.elicited] == ["Go on?"]
    assert seen == [(5, 10, "before the question"), (1, 2, "step 1"), (2, 2, "step 2")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_prompt_and_a_read_send_the_backends_progress_to_the_host_that_asked(config: Path, mode: str) -> None:
    """``prompts/get`` and ``resources/read`` (a link's URI, routed to the one server listing it): the backend's
    progress reaches the host whose request carries a token, and the backend is asked for none otherwise."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    prompt = types.GetPromptRequest(params=types.GetPromptRequestParams(name="counted"))
    read = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri="caps://counted"))
    async with _client(config, mode, Host()) as client:
        session = client.session
        rendered = await session.send_request(prompt, types.GetPromptResult, progress_callback=on_progress)
        prompted = list(seen)
        contents = await session.send_request(read, types.ReadResourceResult, progress_callback=on_progress)
        unasked = await session.send_request(prompt, types.GetPromptResult)
        unread = await session.send_request(read, types.ReadResourceResult)
    assert rendered.messages[0].content == types.TextContent(text="progress asked: True")
    assert prompted == [1, 2]
    assert contents.contents[0].text == "progress asked: True"  # type: ignore[union-attr]
    assert seen == [1, 2, 1, 2]
    assert unasked.messages[0].content == types.TextContent(text="progress asked: False")
    assert unread.contents[0].text == "progress asked: False"  # type: ignore[union-attr]
