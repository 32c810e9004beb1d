"""The example workflows in examples/ run offline: bundled, MCP and REST tools; an agent on ScriptedLLM."""

from __future__ import annotations

import os

import aiohttp
import pytest
from tests.workflow.conftest import EXAMPLES

from kavalai.workflow import WorkflowEngine
from kavalai.workflow._services import ServedRestApp


def _served_url(engine: WorkflowEngine) -> str:
    (service,) = [s for s in engine._services if isinstance(s, ServedRestApp)]
    assert service.url is not None
    return service.url


async def _refused(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.post(f"{url}/reading-time", json={"words": 1}):
            return False
    except aiohttp.ClientConnectionError:
        return True


async def test_document_report_uses_bundled_mcp_and_rest_tools_and_starts_what_it_needs() -> None:
    engine = WorkflowEngine.from_yaml(EXAMPLES / "document_report.yaml")
    async with engine:
        pid = engine.kernel.get_mcp_server_state("text").pid
        url = _served_url(engine)
        assert url.startswith("http://127.0.0.1:")
        result = await engine.run({"path": "release-notes.md", "wpm": 50})
    assert result.ok, result.error
    assert result.output_data == {
        "path": "release-notes.md",
        "words": 88,
        "top_words": ["node", "release", "workflows"],
        "minutes": 2,
    }
    kinds = {t.node: t.kind for t in result.trace}
    assert kinds == {
        "start": "start",
        "read": "function",
        "count": "function",
        "rank": "function",
        "analyse": "parallel",
        "timing": "function",
        "done": "end",
    }
    timing = next(t for t in result.trace if t.node == "timing")
    assert timing.inputs == {"words": 88, "wpm": 50}
    # aclose() stopped both the MCP server process and the REST app the engine served
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert await _refused(url)


async def test_document_report_missing_file_fails_in_the_read_node() -> None:
    async with WorkflowEngine.from_yaml(EXAMPLES / "document_report.yaml") as engine:
        result = await engine.run({"path": "nope.md"})
    assert result.failed_node == "read"
    assert "python://fs.read" in str(result.error)
    assert [t.node for t in result.trace] == ["start", "read"]


@pytest.mark.parametrize(
    ("message", "priority", "queue"),
    [
        ("Our site is down and we see data loss!", "high", "on-call"),
        ("Please update the address on my invoice.", "normal", "support"),
    ],
)
async def test_support_triage_agent_routes_by_priority(message: str, priority: str, queue: str) -> None:
    async with WorkflowEngine.from_yaml(EXAMPLES / "support_triage.yaml") as engine:
        result = await engine.run({"message": message})
    assert result.ok, result.error
    output = result.output_data
    assert (output["priority"], output["queue"]) == (priority, queue)
    assert output["ticket"].startswith(queue.upper() + "-")
    assert output["words"] == len(message.split())
    triage = next(t for t in result.trace if t.node == "triage")
    assert [call.tool for call in triage.tool_calls] == ["python://urgent_terms"]
    assert [t.node for t in result.trace][-2] == ("escalate" if priority == "high" else "queue")
