"""The model-facing gate (:func:`kavalai.agent.budget.model_text`): every text a model reads is bounded by the
output budget. The issue's example (2,000 tools sharing one description gave one 252,984-character ``search_tools``
result), refusals and prompts, plus the enumeration of every place that makes a message for a model."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent, OutputBudget
from kavalai.agent.budget import DEFAULT_BUDGET, model_text
from kavalai.llm import ToolResultMessage
from kavalai.testing import ScriptedLLM, tool_call

SRC = Path(__file__).resolve().parents[2] / "src" / "kavalai"
DESCRIPTION = "Look up the weather report for a city, with every detail a traveller may need for the day ahead."


def _weather(index: int) -> Any:
    def tool(city: str) -> str:
        return city

    tool.__name__ = f"weather_{index}"
    tool.__doc__ = DESCRIPTION
    return pythontool(tool)


def _catalog(count: int) -> FunctionKernel:
    kernel = FunctionKernel()
    for index in range(count):
        kernel.register_python_tool(f"service_{index}.weather_report_lookup_{index}", _weather(index))
    return kernel


async def _search_result(kernel: FunctionKernel, budget: OutputBudget | None) -> str:
    llm = ScriptedLLM([tool_call("search_tools", {"query": "weather report for a city"}), "done"])
    await Agent(llm=llm, kernel=kernel, tool_search=True, output_budget=budget).run("the weather?")
    [result] = [m for m in llm.requests[1].messages if isinstance(m, ToolResultMessage)]
    return str(result.content)


async def test_a_search_result_over_the_budget_is_cut() -> None:
    kernel = _catalog(2000)
    unbudgeted = await _search_result(kernel, None)  # no budget set: kavalai's own results keep the default
    assert len(unbudgeted) < DEFAULT_BUDGET.max_chars + 300
    small = await _search_result(kernel, OutputBudget(max_chars=300))  # below even a compact result's size
    assert len(small) < 300 + 300
    assert "[Truncated: the result of search_tools has" in small  # cut by the gate, not only short by itself
    assert small.startswith('{"tools":[')


async def test_a_refusal_with_a_huge_reason_is_cut() -> None:
    @pythontool
    def delete(path: str) -> str:
        """Delete a file."""
        return path

    kernel = FunctionKernel()
    kernel.register_python_tool("fs.delete", delete)

    def refuse(call: Any) -> Any:
        from kavalai.agent import Approval

        return Approval.deny("no " * 50_000)

    llm = ScriptedLLM([tool_call("python://fs.delete", {"path": "/x"}), "done"])
    await Agent(llm=llm, kernel=kernel, approve=refuse, output_budget=OutputBudget(max_chars=1000)).run("go")
    [result] = [m for m in llm.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert result.is_error
    assert len(str(result.content)) < 2200 + 300  # an error's own bound (a message and its hint), whatever the budget
    assert "[Truncated:" in str(result.content)


def test_the_gate_cuts_kavalais_text_and_leaves_an_unbudgeted_tools_result_whole() -> None:
    long = "x" * (DEFAULT_BUDGET.max_chars + 1)
    assert model_text(None, "python://t", long, ours=False) == long  # no budget: a tool's result is whole
    cut = model_text(None, "search_tools", long, ours=True)
    assert cut.startswith("x" * DEFAULT_BUDGET.max_chars + "\n[Truncated: the result of search_tools has")
    assert model_text(OutputBudget(per_tool={"python://t": 5}), "python://t", "abcdefgh", ours=False).startswith(
        "abcde\n[Truncated"
    )


# ------------------------------------------------------------------------------------------------- enumeration

#: Every function that makes a message a model reads, and how its text is bounded. "gate" entries must call the
#: gate; the others say why their text needs none. A new producer fails the test until it is classified here.
PRODUCERS = {
    "agent/_tools.py:_run_call": "gate",  # every tool result message: results, errors, search, resources, refusals
    "agent/prompts.py:prompt_messages": "gate",  # a server's rendered prompt
    "agent/_agent.py:_not_run": "a fixed sentence",
    "agent/_agent.py:_run_here": "the caller's own prompt",
    "agent/_agent.py:_loop": "the agent's instructions and the repair request (pydantic's errors, five at most)",
    "workflow/_runners.py:_run_llm": "the workflow's own templates, rendered under the template meter",
    "workflow/kaval/_nodes.py:execute": "the workflow's own templates, rendered under the template meter",
    "adapters/mcp/_client_side.py:_llm_answer": "a server's sampling request, bounded by max_message_bytes and "
    "sampling_max_tokens, and seen by the sampling approval hook first",
    "adapters/mcp/_client_side.py:answer": "the inner function of _llm_answer",
    "testing.py:_to_message": "ScriptedLLM's scripted replies (the model's side)",
}
MESSAGES = frozenset({"ToolResultMessage", "UserMessage", "SystemMessage", "AssistantMessage"})
GATE_CALLS = frozenset({"model_text", "_model_text"})


def _producers() -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] == "llm":  # the providers convert messages to and from their wire formats
            continue
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MESSAGES:
                    found[f"{relative}:{function.name}"] = function
    return found


def test_every_producer_of_model_facing_text_is_known() -> None:
    assert sorted(_producers()) == sorted(PRODUCERS)


def test_the_gated_producers_call_the_gate() -> None:
    producers = _producers()
    for name, how in PRODUCERS.items():
        if how != "gate":
            continue
        called = {
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for node in ast.walk(producers[name])
            if isinstance(node, ast.Call)
        }
        assert called & GATE_CALLS, f"{name} makes model-facing text without the gate"
