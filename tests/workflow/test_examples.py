"""The example workflows in examples/ run offline: bundled, MCP and REST tools; an agent on ScriptedLLM."""

from __future__ import annotations

import os

import pytest
from tests.workflow.conftest import EXAMPLES

from kavalai.workflow import WorkflowEngine


async def test_document_report_uses_bundled_mcp_and_rest_tools(
    text_api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEXT_API_URL", text_api_url)
    engine = WorkflowEngine.from_yaml(EXAMPLES / "document_report.yaml")
    async with engine:
        pid = engine.kernel.get_mcp_server_state("text").pid
        result = await engine.run({"path": "release-notes.md", "wpm": 50})
    assert result.ok, result.error
    assert result.output_data() == {
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
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_document_report_missing_file_fails_in_the_read_node(
    text_api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEXT_API_URL", text_api_url)
    async with WorkflowEngine.from_yaml(EXAMPLES / "document_report.yaml") as engine:
        result = await engine.run({"path": "nope.md"})
    assert result.failed_node == "read"
    assert "python://fs.read" in str(result.error)


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
    output = result.output_data()
    assert (output["priority"], output["queue"]) == (priority, queue)
    assert output["ticket"].startswith(queue.upper() + "-")
    assert output["words"] == len(message.split())
    triage = next(t for t in result.trace if t.node == "triage")
    assert [call.tool for call in triage.tool_calls] == ["python://urgent_terms"]
    assert [t.node for t in result.trace][-2] == ("escalate" if priority == "high" else "queue")
