"""Code mode: one run_python snippet calls three tools in the pydantic-monty sandbox; escapes are refused."""

from __future__ import annotations

import json
from typing import Any

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent, Approval
from kavalai.agent.code_mode import CodeMode, function_names, stubs
from kavalai.llm import ToolCall, ToolResultMessage
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call


@pythontool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pythontool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@pythontool
def describe(n: int) -> dict[str, Any]:
    """Describe a number."""
    return {"n": n, "even": n % 2 == 0}


def _kernel() -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("math.multiply", multiply)
    kernel.register_python_tool("describe", describe)
    return kernel


def _last_result(llm: ScriptedLLM) -> dict[str, Any]:
    [message] = [m for m in llm.requests[-1].messages if isinstance(m, ToolResultMessage)][-1:]
    return json.loads(message.content) if not message.is_error else {"error": message.content}


SNIPPET = """
total = await python_math_add(a=2, b=3)
product = await python_math_multiply(a=total, b=4)
info = await python_describe(n=product)
print("computed", product)
{"product": product, "even": info["even"]}
"""


async def test_one_snippet_calls_three_tools_in_one_step() -> None:
    llm = ScriptedLLM([tool_call("run_python", {"code": SNIPPET}), "20, even"])
    result = await Agent(llm, kernel=_kernel(), code_mode=True).run("compute")
    assert llm.requests[0].tool_names == ["run_python"]  # one tool, describing the others
    [spec] = llm.requests[0].tools
    assert "async def python_math_multiply(*, a: int, b: int) -> int:" in spec.description
    assert "async def python_describe(*, n: int) -> dict:" in spec.description
    assert result.steps == 2
    assert _last_result(llm) == {"result": {"product": 20, "even": True}, "output": "computed 20\n", "tool_calls": 3}
    inner = [r for r in result.tool_calls if r.uri != "run_python"]
    assert [r.uri for r in inner] == ["python://math.add", "python://math.multiply", "python://describe"]
    assert all(r.status == "ok" for r in inner)


def test_the_stubs_are_typed_async_functions() -> None:
    descriptions = [
        {
            "name": "python://math.add",
            "description": "Add two integers.",
            "inputSchema": {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]},
            "outputSchema": {"properties": {"result": {"type": "integer"}}},
        }
    ]
    assert stubs(descriptions) == (
        'async def python_math_add(*, a: int, b: int = None) -> int:\n    """Add two integers. (python://math.add)"""'
    )
    assert function_names(["mcp://a.b-c", "mcp://a.b_c"]) == {"mcp://a.b-c": "mcp_a_b_c", "mcp://a.b_c": "mcp_a_b_c_2"}


async def test_escapes_are_refused_by_the_sandbox() -> None:
    for snippet, message in [
        ("open('/etc/passwd').read()", "PermissionError"),
        ("import os\nos.system('id')", "AttributeError"),
        ("import subprocess", "ModuleNotFoundError"),
    ]:
        llm = ScriptedLLM([tool_call("run_python", {"code": snippet}), "ok"])
        result = await Agent(llm, kernel=_kernel(), code_mode=True).run("try")
        error = _last_result(llm)["error"]
        assert error.startswith("The snippet failed:")
        assert message in error
        assert result.tool_calls[0].status == "error"


async def test_limits_and_policies_apply_to_inner_calls() -> None:
    slow = ScriptedLLM([tool_call("run_python", {"code": "while True:\n    pass"}), "ok"])
    await Agent(slow, kernel=_kernel(), code_mode=CodeMode(max_seconds=0.5)).run("spin")
    assert "time limit" in _last_result(slow)["error"]

    many = "for i in range(10):\n    await python_math_add(a=i, b=i)"
    capped = ScriptedLLM([tool_call("run_python", {"code": many}), "ok"])
    await Agent(capped, kernel=_kernel(), code_mode=CodeMode(max_calls=3)).run("loop")
    assert "more than 3 tool calls" in _last_result(capped)["error"]

    def deny_multiply(call: ToolCall) -> Approval:
        if call.name == "python://math.multiply":
            return Approval.deny("no multiplying")
        return Approval.allow()

    guarded = ScriptedLLM([tool_call("run_python", {"code": SNIPPET}), "ok"])
    result = await Agent(guarded, kernel=_kernel(), code_mode=True, approve=deny_multiply).run("compute")
    assert "no multiplying" in _last_result(guarded)["error"]
    assert [r.status for r in result.tool_calls if r.uri != "run_python"] == ["ok", "denied"]

    only_add = ScriptedLLM([tool_call("run_python", {"code": "await python_describe(n=1)"}), "ok"])
    await Agent(only_add, kernel=_kernel(), code_mode=True, allowed_tools=["python://math.add"]).run("x")
    assert "NameError" in _last_result(only_add)["error"]  # a tool not allowed is not even defined


async def test_a_snippet_reads_a_failing_tool_as_an_exception() -> None:
    code = "try:\n    await python_math_add(a='x', b=1)\nexcept Exception as e:\n    r = 'caught'\nr"

    def script(request: ScriptedRequest) -> object:
        return tool_call("run_python", {"code": code}) if len(request.messages) == 1 else "done"

    llm = ScriptedLLM(script)
    await Agent(llm, kernel=_kernel(), code_mode=True).run("x")
    assert _last_result(llm)["result"] == "caught"


async def test_a_process_that_ran_snippets_lets_the_sandbox_threads_settle_once_at_exit(monkeypatch: Any) -> None:
    # pydantic-monty's own threads may still be handing a result to the loop when the program ends; the exit waits
    # for them once (bench/code_mode_exit.py counts the aborts a loaded machine shows without it).
    import atexit
    import time

    from kavalai.agent import code_mode

    registered: list[tuple[Any, tuple[Any, ...]]] = []
    monkeypatch.setattr(code_mode, "_exit_hook_set", False)
    monkeypatch.setattr(atexit, "register", lambda func, *args: registered.append((func, args)))
    box = CodeMode(max_seconds=10)
    for _ in range(2):
        assert (await box.run("1 + 1", {}))["result"] == 2
    assert registered == [(time.sleep, (code_mode._EXIT_SETTLE_SECONDS,))]
    assert code_mode._EXIT_SETTLE_SECONDS > 0


async def test_output_past_max_output_chars_is_cut_and_said_the_snippet_runs_on() -> None:
    """``max_output_chars`` is how much printed output is kept: a snippet printing 2 MB still returns its value, the
    model reads the first characters and a line saying how many more were printed (it used to fail the snippet with
    pydantic-monty's "memory limit exceeded")."""
    code = "for i in range(2000):\n    print('y' * 999)\n'done'"
    llm = ScriptedLLM([tool_call("run_python", {"code": code}), "ok"])
    await Agent(llm, kernel=_kernel(), code_mode=CodeMode(max_output_chars=5_000)).run("print a lot")
    result = _last_result(llm)
    assert result["result"] == "done"
    kept, _, note = result["output"].rpartition("\n")
    assert kept == ("y" * 999 + "\n") * 5  # 5,000 characters kept
    assert note == "[1995000 more characters printed, not kept: max_output_chars=5000]"
