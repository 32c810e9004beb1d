"""Hostile round 9 of issue 36 (``tests/kernel/hostile_cases_ninth.md``): limits refused at an agent run, code mode
and a workflow node (6, 7, 10); an engine closed while runs hang (31); an agent run cancelled by its caller (32);
and the worker threads of cut sync tools counted on the workflow, agent and code-mode paths (34-36)."""

from __future__ import annotations

import asyncio
import decimal
import threading
from collections.abc import Iterator

import anyio
import pytest
from tests.adapters.test_threads import _until

from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.agent.code_mode import CodeMode
from kavalai.errors import DeadlineExceededError
from kavalai.llm import ToolResultMessage
from kavalai.testing import ScriptedLLM, tool_call
from kavalai.workflow import NodeTimeoutError, WorkflowBuilder, WorkflowEngine

numpy = pytest.importorskip("numpy")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Let go of the blocking sync tools at the end of a test, whatever happened."""
    event = threading.Event()
    yield event
    event.set()


def _blocking_kernel(release: threading.Event) -> tuple[FunctionKernel, list[str]]:
    kernel = FunctionKernel()
    returned: list[str] = []

    @pythontool
    def block() -> str:
        """Block in the worker thread until let go (at most 0.6 s)."""
        release.wait(timeout=0.6)
        returned.append("returned")
        return "blocked"

    @pythontool
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "never"

    kernel.register_python_tool("block", block)
    kernel.register_python_tool("hang", hang)
    return kernel, returned


def _one_node(tool: str, **options: object) -> WorkflowBuilder:
    return (
        WorkflowBuilder("w", input="object", output="any")
        .start(next="first")
        .function("first", tool=tool, next="end", **options)  # type: ignore[arg-type]
        .end()
    )


# ----------------------------------------------------------------------------------- 6, 7, 10: refused limits


@pytest.mark.parametrize("timeout", [decimal.Decimal("0.5"), "5"])
async def test_case_6_an_agent_run_refuses_a_decimal_or_text_timeout_before_asking_the_model(timeout: object) -> None:
    llm = ScriptedLLM(["never"])
    with pytest.raises(ValueError, match="0.5|'5'"):
        await Agent(llm, kernel=FunctionKernel()).run("hi", timeout=timeout)  # type: ignore[arg-type]
    assert llm.requests == []


def test_case_7_code_mode_refuses_true_and_reads_a_numpy_float() -> None:
    with pytest.raises(ValueError, match="True"):
        CodeMode(max_seconds=True)
    assert CodeMode(max_seconds=numpy.float64(0.2)).max_seconds == pytest.approx(0.2)
    assert type(CodeMode(max_seconds=numpy.float64(0.2)).max_seconds) is float


@pytest.mark.parametrize("timeout", [True, float("nan")])
def test_case_10_a_function_node_refuses_a_bool_or_nan_timeout_at_build(timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout"):
        _one_node("python://hang", timeout=timeout).build()


# ----------------------------------------------------------------------------------------- 31, 32: ending runs


async def test_case_31_aclose_of_an_engine_that_owns_its_kernel_ends_the_runs_hanging() -> None:
    workflow = _one_node("python://hang").build()
    engine = WorkflowEngine(workflow)

    @pythontool
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "never"

    @pythontool
    async def quick() -> str:
        """Answer."""
        return "quick"

    engine.kernel.register_python_tool("hang", hang)
    engine.kernel.register_python_tool("quick", quick)
    runs = [asyncio.create_task(engine.run({})) for _ in range(3)]
    await _until(lambda: len(engine.kernel.calls_in_flight()) == 3)
    with anyio.fail_after(20):
        await engine.aclose()
        results = await asyncio.gather(*runs, return_exceptions=True)
    for result in results:
        assert isinstance(result, BaseException) or not result.ok, result
    assert engine.kernel.calls_in_flight() == []
    again = await WorkflowEngine(_one_node("python://quick").build(), engine.kernel).run({})
    assert again.ok, again.error
    await engine.aclose()


async def test_case_32_an_agent_run_cancelled_by_its_caller_while_its_tool_hangs(release: threading.Event) -> None:
    kernel, _ = _blocking_kernel(release)
    agent = Agent(ScriptedLLM([tool_call("python://hang"), "done"]), kernel=kernel)
    run = asyncio.create_task(agent.run("go"))
    await _until(lambda: len(kernel.calls_in_flight()) == 1)
    run.cancel()
    with anyio.fail_after(20), pytest.raises(asyncio.CancelledError):
        await run
    assert kernel.calls_in_flight() == []
    release.set()
    assert (await kernel.call_tool("python://block")).result == "blocked"  # type: ignore[attr-defined]
    await kernel.close()


# ------------------------------------------------------------------------ 34-36: threads of cut sync tools


async def test_case_34_a_workflow_node_cut_by_its_timeout_leaves_a_counted_thread(release: threading.Event) -> None:
    kernel, returned = _blocking_kernel(release)
    with anyio.fail_after(20):
        result = await WorkflowEngine(_one_node("python://block", timeout=0.05).build(), kernel).run({})
    assert isinstance(result.error, NodeTimeoutError), result.error
    assert [call.uri for call in kernel.threads_in_flight()] == ["python://block"]
    await _until(lambda: returned == ["returned"])
    await _until(lambda: kernel.threads_in_flight() == [])
    await kernel.close()


async def test_case_35_an_agent_runs_deadline_leaves_a_counted_thread(release: threading.Event) -> None:
    kernel, returned = _blocking_kernel(release)
    agent = Agent(ScriptedLLM([tool_call("python://block"), "done"]), kernel=kernel)
    with anyio.fail_after(20), pytest.raises(DeadlineExceededError):
        await agent.run("go", timeout=0.1)
    assert [call.uri for call in kernel.threads_in_flight()] == ["python://block"]
    await _until(lambda: returned == ["returned"])
    await _until(lambda: kernel.threads_in_flight() == [])
    await kernel.close()


async def test_case_36_a_code_mode_snippet_cut_leaves_a_counted_thread(release: threading.Event) -> None:
    kernel, returned = _blocking_kernel(release)
    llm = ScriptedLLM([tool_call("run_python", {"code": "await python_block()"}), "ok"])

    with anyio.fail_after(20):
        await Agent(llm, kernel=kernel, code_mode=CodeMode(max_seconds=0.2)).run("go")
    [message] = [m for m in llm.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert message.is_error, message.content
    assert [call.uri for call in kernel.threads_in_flight()] == ["python://block"]
    assert kernel.calls_in_flight() == []
    await _until(lambda: returned == ["returned"])
    await _until(lambda: kernel.threads_in_flight() == [])
    await kernel.close()
