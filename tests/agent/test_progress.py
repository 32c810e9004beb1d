"""A tool's progress reports reach an agent's observer as ToolProgress events (a Python tool and an MCP server)."""

from __future__ import annotations

import sys
from pathlib import Path

from kavalai import FunctionKernel, McpServer, pythontool
from kavalai.agent import Agent, AgentEvent, ToolProgress
from kavalai.kernel import current_call
from kavalai.testing import ScriptedLLM, tool_call

ROOT = Path(__file__).resolve().parents[2]


@pythontool
async def crunch(n: int) -> int:
    """Work in n steps, reporting each."""
    call = current_call()
    assert call is not None
    for i in range(n):
        await call.report_progress(i + 1, n, f"step {i + 1}")
    return n


async def test_progress_of_python_and_mcp_tools_becomes_events() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("work.crunch", crunch)
    args = ["-m", "tests.servers.mcp_features"]
    kernel.register_mcp_server(McpServer(name="feat", command=sys.executable, args=args, cwd=ROOT))
    events: list[AgentEvent] = []
    llm = ScriptedLLM([tool_call("python://work.crunch", {"n": 2}), tool_call("mcp://feat.count", {"n": 3}), "done"])
    try:
        await Agent(llm, kernel=kernel, on_event=events.append).run("Crunch, then count.")
    finally:
        await kernel.close()
    reports = [(e.step, e.call.name, e.progress, e.total, e.message) for e in events if isinstance(e, ToolProgress)]
    assert reports == [
        (1, "python://work.crunch", 1, 2, "step 1"),
        (1, "python://work.crunch", 2, 2, "step 2"),
        (2, "mcp://feat.count", 1, 3, "step 1"),
        (2, "mcp://feat.count", 2, 3, "step 2"),
        (2, "mcp://feat.count", 3, 3, "step 3"),
    ]


async def test_without_an_observer_no_progress_is_asked_for() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("work.crunch", crunch)
    result = await Agent(ScriptedLLM([tool_call("python://work.crunch", {"n": 2}), "done"]), kernel=kernel).run("Go.")
    assert [record.result for record in result.tool_calls] == [{"result": 2}]
