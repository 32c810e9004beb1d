"""The agent survives any tool output: what cannot be written as JSON becomes an error result the model sees."""

from __future__ import annotations

from typing import Any

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.testing import ScriptedLLM, tool_call


@pythontool
def self_containing() -> Any:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pythontool
def very_deep() -> Any:
    value: Any = []
    for _ in range(5000):
        value = [value]
    return value


@pythontool
def fine() -> int:
    return 7


async def test_unserialisable_results_are_error_results_and_the_run_goes_on() -> None:
    kernel = FunctionKernel()
    for name, func in (("loop", self_containing), ("deep", very_deep), ("fine", fine)):
        kernel.register_python_tool(name, func)
    calls = [tool_call("python://loop"), tool_call("python://deep"), tool_call("python://fine")]
    llm = ScriptedLLM([calls, "done"])
    result = await Agent(llm, kernel=kernel).run("go")
    assert result.output == "done"
    by_uri = {record.uri: record for record in result.tool_calls}
    for uri in ("python://loop", "python://deep"):
        assert by_uri[uri].status == "error"
        assert by_uri[uri].error_type == "ToolOutputError"
        assert "could not be written as JSON" in (by_uri[uri].error or "")
    assert by_uri["python://fine"].result == {"result": 7}
    sent = llm.requests[1].messages[-3:]
    assert [m.is_error for m in sent] == [True, True, False]  # type: ignore[union-attr]
