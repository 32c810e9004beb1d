"""Output budgets: what reaches the model of a large result, truncated or kept as an artifact and paged, for every
tool kind (Python, REST on a real local server, MCP over a real stdio server)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers.rest_app import create_app
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, McpServer, RestServer, pythontool
from kavalai.agent import Agent, FileArtifactStore, MemoryArtifactStore, OutputBudget
from kavalai.llm import ToolResultMessage
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call

ROOT = Path(__file__).resolve().parents[2]


@pythontool
def big(n: int) -> str:
    """A text of n characters: 'abcdefghij' repeated."""
    return ("abcdefghij" * (n // 10 + 1))[:n]


@pytest.fixture(scope="module")
def rest_url() -> Iterator[str]:
    with serve(create_app()) as url:
        yield url


def _results(request: ScriptedRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolResultMessage)]


async def test_a_result_within_budget_is_untouched_and_one_over_is_cut_with_a_notice() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("big", big)
    llm = ScriptedLLM([tool_call("python://big", {"n": 50}), tool_call("python://big", {"n": 5000}), "done"])
    agent = Agent(llm, kernel=kernel, output_budget=OutputBudget(max_chars=200))
    result = await agent.run("go")
    small, large = _results(llm.requests[2])
    assert json.loads(small) == {"result": "abcdefghij" * 5}
    assert large.startswith('{"result":"abcdefghij')
    assert large.split("\n")[0] == '{"result":"' + ("abcdefghij" * 20)[: 200 - 11]
    assert "[Truncated: the result of python://big has 5,013 characters; only the first 200 are shown." in large
    assert result.tool_calls[1].result == {"result": "abcdefghij" * 500}  # the trace keeps the whole result
    assert "read_artifact" not in llm.requests[0].tool_names


async def test_an_artifact_is_kept_whole_and_paged_with_read_artifact() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("big", big)
    store = MemoryArtifactStore()
    handles: list[str] = []

    def script(request: ScriptedRequest) -> object:
        results = _results(request)
        if not results:
            return tool_call("python://big", {"n": 1000})
        if len(results) == 1:
            found = re.search(r"artifact://[0-9a-f]+", results[0])
            assert found is not None
            handle = found.group()
            handles.append(handle)
            return tool_call("read_artifact", {"handle": handle, "offset": 300, "limit": 50})
        if len(results) == 2:
            return tool_call("read_artifact", {"handle": "artifact://made-up"})
        return "done"

    llm = ScriptedLLM(script)
    budget = OutputBudget(max_chars=300, overflow="artifact", store=store)
    await Agent(llm, kernel=kernel, output_budget=budget).run("go")
    assert "read_artifact" in llm.requests[0].tool_names
    first, page, missing = _results(llm.requests[3])
    assert "the first 300 are shown" in first
    assert handles[0].startswith("artifact://")
    whole = json.dumps({"result": "abcdefghij" * 100}, separators=(",", ":"))
    assert await store.get(handles[0]) == whole
    read = json.loads(page)
    assert read["text"] == whole[300:350]
    assert (read["offset"], read["total"], read["next_offset"]) == (300, len(whole), 350)
    assert "There is no artifact 'artifact://made-up'" in missing


async def test_per_tool_budgets_and_the_kernels_default(rest_url: str, tmp_path: Path) -> None:
    budget = OutputBudget(
        max_chars=10_000,
        per_tool={"rest://shop.*": 100},
        overflow="artifact",
        store=FileArtifactStore(tmp_path / "artifacts"),
    )
    kernel = FunctionKernel(output_budget=budget)  # agents of this kernel take it
    kernel.register_python_tool("big", big)
    kernel.register_rest_server(RestServer(name="shop", url=rest_url))
    kernel.register_rest_tool("shop", "large", "GET", path="/large")
    llm = ScriptedLLM([tool_call("rest://shop.large"), tool_call("python://big", {"n": 2000}), "done"])
    await Agent(llm, kernel=kernel).run("go")
    rest, python = _results(llm.requests[2])
    assert "the first 100 are shown" in rest
    assert len(json.loads(python)["result"]) == 2000  # under the default budget of 10,000
    [stored] = list((tmp_path / "artifacts").glob("*.txt"))
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "artifacts" / FileArtifactStore.MANIFEST).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "artifacts").st_mode) == 0o700
    await kernel.close()


async def test_an_mcp_result_is_budgeted_too() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="demo", command=sys.executable, args=["-m", "kavalai.demo.mcp_server"], cwd=ROOT)
    )
    llm = ScriptedLLM([tool_call("mcp://demo.slugify", {"text": "word " * 400}), "done"])
    await Agent(llm, kernel=kernel, output_budget=OutputBudget(max_chars=60)).run("go")
    [result] = _results(llm.requests[1])
    assert result.startswith('{"result":"word-word')
    assert "[Truncated: the result of mcp://demo.slugify has" in result
    await kernel.close()


def test_budgets_are_checked() -> None:
    with pytest.raises(ValueError, match="positive numbers of characters"):
        OutputBudget(max_chars=0)
    with pytest.raises(ValueError, match="positive numbers of characters"):
        OutputBudget(per_tool={"python://*": -1})
    with pytest.raises(ValueError, match="overflow is 'truncate' or 'artifact'"):
        OutputBudget(overflow="drop")  # type: ignore[arg-type]
    assert OutputBudget(per_tool={"mcp://a.*": 5, "mcp://a.b": 9}).limit_for("mcp://a.b") == 5  # first match wins


async def test_a_file_store_refuses_handles_it_did_not_make(tmp_path: Path) -> None:
    store = FileArtifactStore(tmp_path)
    handle = await store.put("kept")
    assert await store.get(handle) == "kept"
    for bad in ("artifact://../../etc/passwd", "artifact://nothere0", "/etc/passwd"):
        with pytest.raises(KeyError):
            await store.get(bad)
