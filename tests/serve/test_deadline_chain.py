"""A chain of two ``kavalai serve`` processes keeps one deadline: the MCP client's ``io.kavalai/deadline`` bounds the
outer gateway's call, which tells the inner gateway what is left, whose Python tool sees that much and is cut."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.serve.test_serve import http_server, stdio_session

from kavalai.kernel import MAX_SECONDS

INNER_TOOLS = '''
"""The inner gateway's tool."""

from pathlib import Path

import anyio

from kavalai.kernel import current_call


async def nap(seconds: float, record: str) -> str:
    """Write the seconds the call has left to the record file, then sleep."""
    call = current_call()
    left = call.remaining() if call is not None else None
    Path(record).write_text(repr(left))
    await anyio.sleep(seconds)
    return "slept"
'''


def _configs(tmp_path: Path) -> Path:
    inner_dir = tmp_path / "inner"
    inner_dir.mkdir()
    (inner_dir / "inner_tools.py").write_text(INNER_TOOLS, encoding="utf-8")
    inner = inner_dir / "inner.yaml"
    inner.write_text(json.dumps({"python_functions": [{"function": "inner_tools.nap", "name": "nap"}]}))
    outer = tmp_path / "outer.yaml"
    serve = [sys.executable, "-m", "kavalai.cli._serve", str(inner)]
    document = {"mcp_servers": [{"name": "inner", "command": serve[0], "args": serve[1:], "cwd": str(inner_dir)}]}
    outer.write_text(json.dumps(document), encoding="utf-8")
    return outer


async def test_two_chained_gateways_keep_one_budget(tmp_path: Path) -> None:
    outer = _configs(tmp_path)
    record = tmp_path / "left.txt"
    async with stdio_session(outer) as client:
        [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
        started = time.monotonic()
        result = await client.call_tool(
            name, {"seconds": 30, "record": str(record)}, meta={"io.kavalai/deadline": 1500}
        )
        elapsed = time.monotonic() - started
        without = await client.call_tool(name, {"seconds": 0, "record": str(tmp_path / "none.txt")})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "deadline" in text, text
    assert elapsed < 15, elapsed  # cut at the client's 1.5 s, not the tool's 30 s
    left = float(record.read_text())
    assert 0.5 < left <= 1.5, left  # the inner tool was given what the client's budget had left
    assert not without.is_error  # without a deadline the same tool runs to its end
    inner_left = (tmp_path / "none.txt").read_text()
    assert inner_left == "None" or float(inner_left) > 10  # only the MCP servers' own timeout, if any


async def test_a_deadline_too_big_or_not_a_number_never_fails_the_request(tmp_path: Path) -> None:
    # Issue 36, finding 1: a 400-digit io.kavalai/deadline was JSON-RPC error 0 "int too large to convert to float"
    # with a traceback on stderr. Now it is clamped to a year; a value that is not a number is ignored (the log line
    # is tests/kernel/test_seconds.py's).
    _configs(tmp_path)
    inner = tmp_path / "inner" / "inner.yaml"
    huge, garbage = tmp_path / "huge.txt", tmp_path / "garbage.txt"
    async with stdio_session(inner) as client:
        [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
        big = await client.call_tool(name, {"seconds": 0, "record": str(huge)}, meta={"io.kavalai/deadline": 10**400})
        odd = await client.call_tool(name, {"seconds": 0, "record": str(garbage)}, meta={"io.kavalai/deadline": "x"})
    assert not big.is_error
    assert not odd.is_error
    assert float(huge.read_text()) > MAX_SECONDS - 600  # clamped to the maximum, not refused
    assert garbage.read_text() == "None" or float(garbage.read_text()) < MAX_SECONDS / 2  # ignored: no deadline
    log = (inner.parent / "stdio.log").read_text()
    assert "Traceback" not in log, log
    # the ignored value is said once, on the server's stderr (kavalai serve gives the kavalai loggers a handler)
    ignored = [line for line in log.splitlines() if "io.kavalai/deadline" in line and "is not a number" in line]
    assert len(ignored) == 1, log
    assert ignored[0].startswith("kavalai: WARNING: Ignored"), ignored


async def test_the_http_leg_of_chained_gateways_keeps_the_budget_too(tmp_path: Path) -> None:
    # The same chain with its second leg over HTTP: the outer gateway reaches the inner one by streamable HTTP
    # (`kavalai serve --transport http`), and the client's deadline still bounds the inner tool.
    _configs(tmp_path)
    inner = tmp_path / "inner" / "inner.yaml"
    record = tmp_path / "left.txt"
    async with http_server(inner) as (url, _):
        outer = tmp_path / "outer.yaml"
        outer.write_text(json.dumps({"mcp_servers": [{"name": "inner", "url": url}]}), encoding="utf-8")
        async with stdio_session(outer) as client:
            [name] = [tool.name for tool in (await client.list_tools()).tools if "nap" in tool.name]
            result = await client.call_tool(
                name, {"seconds": 30, "record": str(record)}, meta={"io.kavalai/deadline": 1500}
            )
            without = await client.call_tool(name, {"seconds": 0, "record": str(tmp_path / "none.txt")})
    assert result.is_error
    assert "deadline" in result.content[0].text  # type: ignore[union-attr]
    left = float(record.read_text())
    assert 0.2 < left <= 1.5, left  # the inner tool, over HTTP, was given what the client's budget had left
    assert not without.is_error
    inner_left = (tmp_path / "none.txt").read_text()
    assert inner_left == "None" or float(inner_left) > 10
