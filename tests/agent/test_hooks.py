"""Approval hooks (allow, deny, edit) and event observers, including streamed text."""

from __future__ import annotations

from typing import Any

import pytest
from tests.agent.conftest import ToolBox

from kavalai import FunctionKernel
from kavalai.agent import Agent, AgentEvent, Approval, ApprovalHookError, ModelTextDelta, RunFailed, ToolCallFinished
from kavalai.llm import ToolCall, ToolResultMessage
from kavalai.llm.errors import LLMProviderError
from kavalai.testing import ScriptedLLM, tool_call


async def test_approval_allow_deny_edit(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    seen: list[ToolCall] = []

    async def approve(call: ToolCall) -> Approval:
        seen.append(call)
        path = call.arguments["path"]
        if path == "/etc/passwd":
            return Approval.deny("system files are off limits")
        if path.startswith("~"):
            return Approval.edit({"path": path.replace("~", "/home/ada", 1)})
        return Approval.allow()

    step = [
        tool_call("python://fs.delete", {"path": "/tmp/a"}),
        tool_call("python://fs.delete", {"path": "/etc/passwd"}),
        tool_call("python://fs.delete", {"path": "~/b"}),
        tool_call("python://math.add", {"a": 1, "b": 2}),
    ]
    llm = ScriptedLLM([step, "done"])
    agent = Agent(llm, kernel=kernel, approve=approve, require_approval=["python://fs.*"])
    result = await agent.run("clean up")

    assert sorted(toolbox.deleted) == ["/home/ada/b", "/tmp/a"]
    assert [call.arguments["path"] for call in seen] == ["/tmp/a", "/etc/passwd", "~/b"]  # add needs no approval
    allowed, denied, edited, added = result.tool_calls
    assert allowed.ok
    assert not allowed.edited
    assert denied.status == "denied"
    assert "system files are off limits" in (denied.error or "")
    assert edited.edited
    assert edited.arguments == {"path": "/home/ada/b"}
    assert edited.result == {"result": "deleted /home/ada/b"}
    assert added.ok
    results = [m for m in llm.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [m.is_error for m in results] == [False, True, False, False]


async def test_boolean_approval_applies_to_every_tool_by_default(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), "refused"])
    result = await Agent(llm, kernel=kernel, approve=lambda call: False).run("add")
    assert result.tool_calls[0].status == "denied"
    assert "refused: not approved" in (result.tool_calls[0].error or "")


async def test_events_in_order(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    events: list[AgentEvent] = []
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), "three"])
    result = await Agent(llm, kernel=kernel, on_event=events.append).run("add")
    assert [event.type for event in events] == [
        "run_started",
        "step_started",
        "model_responded",
        "tool_call_started",
        "tool_call_finished",
        "step_started",
        "model_responded",
        "run_finished",
    ]
    finished = events[4]
    assert isinstance(finished, ToolCallFinished)
    assert finished.record == result.tool_calls[0]


async def test_streaming_reports_text_deltas(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    deltas: list[str] = []

    async def observe(event: AgentEvent) -> None:
        if isinstance(event, ModelTextDelta):
            deltas.append(event.text)

    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), "one plus two is three"])
    result = await Agent(llm, kernel=kernel, stream=True, on_event=observe).run("add")
    assert len(deltas) == 5
    assert "".join(deltas) == result.output == "one plus two is three"
    assert result.tool_calls[0].result == {"result": 3}


async def test_a_failing_hook_is_one_documented_error_with_its_cause(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), "unreachable"])
    agent = Agent(llm, kernel=kernel, approve=lambda call: "yes")  # type: ignore[arg-type,return-value]
    with pytest.raises(ApprovalHookError, match="The approval hook failed: TypeError") as info:
        await agent.run("add")
    assert isinstance(info.value.__cause__, TypeError)
    assert "return an Approval" in str(info.value.errors[0])


async def test_two_failing_hooks_raise_one_error_and_the_completed_calls_stay_in_the_result(
    kernel: FunctionKernel, toolbox: ToolBox
) -> None:
    def approve(call: Any) -> bool:
        if call.arguments["a"] > 1:
            raise RuntimeError(f"policy store down for a={call.arguments['a']}")
        return True

    calls = [tool_call("python://math.add", {"a": a, "b": 1}) for a in (1, 2, 3)]
    llm = ScriptedLLM([calls, "unreachable"])
    with pytest.raises(ApprovalHookError, match=r"RuntimeError: policy store down.*\(and 1 more\)") as info:
        await Agent(llm, kernel=kernel, approve=approve).run("add")
    assert sorted(str(e) for e in info.value.errors) == ["policy store down for a=2", "policy store down for a=3"]
    assert info.value.result is not None
    [done] = info.value.result.tool_calls
    assert (done.arguments, done.result) == ({"a": 1, "b": 1}, {"result": 2})


async def test_a_failed_run_is_reported_to_observers(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    events: list[AgentEvent] = []
    overloaded = LLMProviderError("overloaded", status_code=529)
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), overloaded])
    with pytest.raises(LLMProviderError):
        await Agent(llm, kernel=kernel, on_event=events.append).run("add")
    assert [event.type for event in events][-3:] == ["tool_call_finished", "step_started", "run_failed"]
    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.error is overloaded
    assert failed.result.tool_calls[0].result == {"result": 3}  # the work done before the failure
    assert failed.result.output is None
