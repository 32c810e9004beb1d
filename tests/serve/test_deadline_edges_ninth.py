"""Hostile round 9 of issue 36 (``tests/kernel/hostile_cases_ninth.md``), the gateway's cases 37-40: a wire deadline
on uvloop (``--loop uvloop``), deadlines sent as an object, a list and null, a negative one, and huge ones over
streamable HTTP; each against a real ``kavalai serve`` process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.client.streamable_http import streamable_http_client
from tests.serve.test_deadline_edges_eighth import _config, _text
from tests.serve.test_serve import http_server, stdio_session

from mcp import Client

pytest.importorskip("uvloop")


async def _name(client: Client) -> str:
    [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
    return name


async def test_case_37_a_wire_deadline_on_uvloop(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with stdio_session(config, "--loop", "uvloop") as client:
        name = await _name(client)
        with anyio.fail_after(25):  # a hang's bound: the tool sleeps 30 s
            cut = await client.call_tool(name, {"seconds": 30}, meta={"io.kavalai/deadline": 300})
        after = await client.call_tool(name, {"seconds": 0})
    assert cut.is_error
    assert "deadline" in _text(cut), _text(cut)
    assert "slept" in _text(after)
    assert "Traceback" not in (tmp_path / "stdio.log").read_text()


async def test_case_38_a_wire_deadline_as_an_object_a_list_or_null_is_ignored(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with stdio_session(config) as client:
        name = await _name(client)
        answers = [
            await client.call_tool(name, {"seconds": 0}, meta={"io.kavalai/deadline": sent})
            for sent in ({"ms": 300}, [300], None)
        ]
    for answer in answers:
        assert not answer.is_error, _text(answer)
        assert "slept" in _text(answer)
    log = (tmp_path / "stdio.log").read_text()
    assert "Traceback" not in log, log
    ignored = [line for line in log.splitlines() if "is not a number" in line]
    assert len(ignored) == 2, log


async def test_case_39_a_negative_wire_deadline_has_passed(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with stdio_session(config) as client:
        name = await _name(client)
        passed = await client.call_tool(name, {"seconds": 200}, meta={"io.kavalai/deadline": -5})
        after = await client.call_tool(name, {"seconds": 0})
    assert passed.is_error
    assert "deadline" in _text(passed), _text(passed)
    assert not (tmp_path / "started.txt").exists()  # the tool never ran
    assert "slept" in _text(after)


async def test_case_40_huge_wire_deadlines_over_streamable_http_are_clamped(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with (
        http_server(config, "--no-lazy") as (url, _process),
        Client(streamable_http_client(url)) as client,  # type: ignore[arg-type]
    ):
        name = await _name(client)
        answers = [
            await client.call_tool(name, {"seconds": 0}, meta={"io.kavalai/deadline": sent}) for sent in (1e308, 2**70)
        ]
    for answer in answers:
        assert not answer.is_error, _text(answer)
        assert "slept" in _text(answer)
    assert "Traceback" not in (tmp_path / "http.log").read_text()
