"""The seam on the in-memory engine: steps by position, replay, idempotency keys, errors and large results as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, HTTPStatusError, ToolExecutionError, pythontool
from kavalai.agent import Agent, Approval
from kavalai.durable import (
    DurableStepError,
    FileResultStore,
    MemoryRunner,
    current_run,
    error_envelope,
    idempotency_key,
    restore_error,
    step_key,
)
from kavalai.llm.messages import ToolCall
from kavalai.testing import ScriptedLLM, tool_call
from kavalai.workflow import RetryPolicy, WorkflowBuilder, WorkflowEngine


class Crash(BaseException):
    """Stands for the process dying: nothing catches it, so the step running is not recorded."""


def charges_workflow() -> Any:
    return (
        WorkflowBuilder("three", input=dict, output=dict)
        .start(next="a")
        .function("a", tool="python://pay", inputs={"order": {"expr": "'A'"}}, next="b")
        .function("b", tool="python://pay", inputs={"order": {"expr": "'B'"}}, next="c")
        .function("c", tool="python://pay", inputs={"order": {"expr": "'C'"}}, next="done")
        .end("done", outputs={"keys": {"expr": "[a.result, b.result, c.result]"}})
        .build()
    )


def ledger_kernel(calls: list[tuple[str, str | None]], crash_on: set[str]) -> FunctionKernel:
    @pythontool
    def pay(order: str) -> str:
        calls.append((order, idempotency_key()))
        if order in crash_on:
            crash_on.discard(order)
            raise Crash
        return idempotency_key() or ""

    kernel = FunctionKernel()
    kernel.register_python_tool("pay", pay)
    return kernel


async def test_a_run_interrupted_mid_step_replays_what_was_recorded_and_keeps_its_keys() -> None:
    calls: list[tuple[str, str | None]] = []
    kernel = ledger_kernel(calls, crash_on={"C"})
    runner = MemoryRunner()
    engine = WorkflowEngine(charges_workflow(), kernel, durable=runner)
    with pytest.raises(Crash):
        await engine.run({}, run_id="r1")
    assert [order for order, _ in calls] == ["A", "B", "C"]

    result = await engine.run({}, run_id="r1")
    assert result.ok, result.error
    assert [order for order, _ in calls] == ["A", "B", "C", "C"]  # A and B replayed, C run again
    assert calls[2][1] == calls[3][1]  # with the same key
    payloads = [(node, {"tool": "python://pay", "arguments": {"order": node.upper()}}) for node in "abc"]
    expected = [step_key("r1", f"{node}#1/tool python://pay#1", payload) for node, payload in payloads]
    assert result.output == {"keys": expected}
    assert result.run_id == "r1"

    again = await engine.run({}, run_id="r1")  # finished: the recorded outcome, nothing called
    assert again.output == result.output
    assert len(calls) == 4


async def test_outside_a_run_calls_pass_through_without_a_key() -> None:
    calls: list[tuple[str, str | None]] = []
    kernel = ledger_kernel(calls, crash_on=set())
    runner = MemoryRunner()
    runner.attach(kernel)
    runner.attach(kernel)  # once only
    assert len(kernel.middleware) == 1
    output = await kernel.call_tool("python://pay", {"order": "X"})
    assert output.result == ""
    assert calls == [("X", None)]
    assert current_run() is None


async def test_a_failed_attempt_is_journaled_and_replayed_without_calling_the_tool() -> None:
    attempts: list[str] = []
    crash = [True]

    @pythontool
    def flaky(order: str) -> str:
        attempts.append(order)
        if len(attempts) == 1:
            raise ValueError("the service hiccuped")
        return "ok"

    @pythontool
    def after(value: str) -> str:
        if crash[0]:
            crash[0] = False
            raise Crash
        return value.upper()

    kernel = FunctionKernel()
    kernel.register_python_tool("flaky", flaky)
    kernel.register_python_tool("after", after)
    workflow = (
        WorkflowBuilder("retrying", input=dict, output=dict)
        .start(next="f")
        .function(
            "f",
            tool="python://flaky",
            inputs={"order": {"expr": "'A'"}},
            retry=RetryPolicy(attempts=2, backoff=0.0, retry_on=["ToolExecutionError"]),
            next="g",
        )
        .function("g", tool="python://after", inputs={"value": "f.result"}, next="done")
        .end("done", outputs={"value": "g.result"})
        .build()
    )
    engine = WorkflowEngine(workflow, kernel, durable=MemoryRunner())
    with pytest.raises(Crash):
        await engine.run({}, run_id="retry-1")
    assert attempts == ["A", "A"]
    result = await engine.run({}, run_id="retry-1")
    assert result.output == {"value": "OK"}
    assert attempts == ["A", "A"]  # the failure and the success both came from the journal
    assert result.trace[1].attempts == 2


async def test_results_over_the_limit_are_stored_by_reference(tmp_path: Path) -> None:
    @pythontool
    def big(n: int) -> str:
        return "x" * n

    kernel = FunctionKernel()
    kernel.register_python_tool("big", big)
    workflow = (
        WorkflowBuilder("big", input=dict, output=dict)
        .start(next="b")
        .function("b", tool="python://big", inputs={"n": "input.n"}, next="done")
        .end("done", outputs={"size": {"expr": "len(b.result)"}})
        .build()
    )
    runner = MemoryRunner(store=FileResultStore(tmp_path / "results"), inline_limit=1000)
    engine = WorkflowEngine(workflow, kernel, durable=runner)
    assert (await engine.run({"n": 50_000}, run_id="big-1")).output == {"size": 50_000}
    assert (await engine.run({"n": 10}, run_id="small-1")).output == {"size": 10}

    ((name, recorded),) = runner.journals["big-1"].values()
    assert name == "b#1/tool python://big#1"
    assert set(recorded) == {"$kavalai_result_ref", "bytes"}  # a reference in the journal...
    assert recorded["bytes"] > 50_000
    (file,) = (tmp_path / "results").iterdir()  # ...and the value in the store
    assert json.loads(file.read_text())["ok"]["result"] == "x" * 50_000
    ((_, inline),) = runner.journals["small-1"].values()
    assert inline == {"ok": {"result": "x" * 10}}


async def test_a_stored_result_that_was_altered_or_removed_is_refused_naming_it(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path / "results")
    ref = await store.keep({"rows": list(range(1000))}, 100)
    assert store.load_now(ref) == await store.load(ref) == {"rows": list(range(1000))}
    assert store.keep_now({"rows": [1]}, 100) == {"rows": [1]}  # small: inline, nothing stored
    (file,) = (tmp_path / "results").iterdir()
    file.write_text('{"rows": []}')  # a worker sharing the store wrote something else under the hash
    with pytest.raises(LookupError, match="does not match its hash"):
        await store.load(ref)
    file.unlink()
    with pytest.raises(LookupError, match=ref["$kavalai_result_ref"]):
        store.load_now(ref)


def test_errors_cross_the_journal_as_their_own_class_with_their_fields() -> None:
    error = HTTPStatusError("rest://shop.pay: 502", uri="rest://shop.pay", method="POST", status_code=502, body="x")
    envelope = json.loads(json.dumps(error_envelope(error)))
    restored = restore_error(envelope)
    assert type(restored) is HTTPStatusError
    assert (restored.message, restored.uri, restored.status_code, restored.method) == (
        "rest://shop.pay: 502",
        "rest://shop.pay",
        502,
        "POST",
    )
    foreign = restore_error(error_envelope(KeyError("k")))
    assert isinstance(foreign, DurableStepError)
    assert foreign.error_type == "builtins:KeyError"
    assert "KeyError" in str(foreign)
    assert isinstance(restore_error(error_envelope(ToolExecutionError("boom"))), ToolExecutionError)


async def test_an_agent_replays_the_tool_listing_model_replies_and_approvals() -> None:
    calls: list[str] = []
    crash = [True]

    @pythontool
    def note(text: str) -> str:
        calls.append(text)
        if text == "second" and crash[0]:
            crash[0] = False
            raise Crash
        return f"noted {text}"

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    asked: list[str] = []

    def approve(call: ToolCall) -> Approval:
        asked.append(call.arguments["text"])
        return Approval.allow()

    script = [
        [tool_call("python://note", {"text": "first"}), tool_call("python://note", {"text": "second"})],
        "done",
    ]
    first = ScriptedLLM(list(script))
    runner = MemoryRunner()
    agent = Agent(first, kernel=kernel, durable=runner, approve=approve)
    with pytest.raises(Crash):
        await agent.run("note two things", run_id="chat")
    assert calls == ["first", "second"]  # one after the other, in the model's order
    assert asked == ["first", "second"]

    second = ScriptedLLM(["done"])  # only the reply the journal does not hold
    resumed = Agent(second, kernel=kernel, durable=runner, approve=approve)
    result = await resumed.run("note two things", run_id="chat")
    assert result.output == "done"
    assert calls == ["first", "second", "second"]
    assert asked == ["first", "second"]  # the approvals came from the journal
    assert len(second.requests) == 1
    assert [record.result for record in result.tool_calls] == [{"result": "noted first"}, {"result": "noted second"}]
    names = [name for name, _ in runner.journals["chat"].values()]
    assert names == [  # each step by its call path: its name and how many of that name came before
        "tools#1",
        "model scripted/scripted#1",
        "approval python://note#1",
        "tool python://note#1",
        "approval python://note#2",
        "tool python://note#2",
        "model scripted/scripted#2",
    ]


def test_the_seam_is_light_and_sits_above_the_kernel() -> None:
    code = (
        "import sys, kavalai, kavalai.durable, kavalai.workflow, kavalai.agent; "
        "print(sorted(m for m in ('dbos', 'temporalio', 'sqlalchemy') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"
    source = Path(__file__).resolve().parents[2] / "src" / "kavalai"
    for path in (source / "kernel").rglob("*.py"):
        assert "kavalai.durable" not in path.read_text(encoding="utf-8"), path
    for path in (source / "durable").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for above in ("kavalai.workflow", "kavalai.agent", "kavalai.llm", "kavalai.cli", "kavalai.adapters"):
            assert f"import {above}" not in text, (path, above)
            assert f"from {above}" not in text, (path, above)


async def test_an_outside_approval_waits_for_the_runner_s_answer_and_replays_it() -> None:
    import asyncio

    from kavalai.agent import AgentError, OutsideApproval

    calls: list[str] = []

    @pythontool
    def note(text: str) -> str:
        calls.append(text)
        return f"noted {text}"

    kernel = FunctionKernel()
    kernel.register_python_tool("note", note)
    script = [tool_call("python://note", {"text": "a"}), tool_call("python://note", {"text": "b"}), "done"]
    runner = MemoryRunner()
    agent = Agent(ScriptedLLM(list(script)), kernel=kernel, durable=runner, approve=OutsideApproval())
    running = asyncio.create_task(agent.run("note", run_id="wait-1"))

    async def question() -> tuple[str, Any]:
        pending: dict[str, Any] = {}
        for _ in range(500):
            await asyncio.sleep(0.01)
            if pending := await runner.pending("wait-1"):
                break
        ((key, asked),) = pending.items()
        return key, asked

    key, asked = await asyncio.wait_for(question(), 5)
    assert asked == {"key": key, "kind": "approval", "tool": "python://note", "arguments": {"text": "a"}}
    assert calls == []
    with pytest.raises(ValueError, match="An approval is"):
        await runner.answer("wait-1", key, {"action": "edit"})  # no arguments: refused before the run sees it
    with pytest.raises(LookupError, match="waits for no answer 'approval-9'"):
        await runner.answer("wait-1", "approval-9", "allow")
    await runner.answer("wait-1", key, {"action": "edit", "arguments": {"text": "A"}})
    key, asked = await asyncio.wait_for(question(), 5)
    assert asked["arguments"] == {"text": "b"}
    await runner.answer("wait-1", key, {"action": "deny", "reason": "not b"})
    result = await asyncio.wait_for(running, 5)
    assert result.output == "done"
    assert calls == ["A"]
    assert [record.error for record in result.tool_calls][1] is not None
    assert await runner.pending("wait-1") == {}

    again = await Agent(ScriptedLLM([]), kernel=kernel, durable=runner, approve=OutsideApproval()).run(
        "note", run_id="wait-1"
    )
    assert again.output == "done"  # finished: nothing asked again

    # With a timeout, an unanswered question takes on_timeout's decision; outside a durable run it cannot wait.
    timed = Agent(
        ScriptedLLM([tool_call("python://note", {"text": "c"}), "gave up"]),
        kernel=kernel,
        durable=runner,
        approve=OutsideApproval(timeout=0.05),
    )
    assert (await timed.run("note", run_id="wait-2")).output == "gave up"
    assert calls == ["A"]
    plain = Agent(ScriptedLLM([tool_call("python://note", {"text": "d"})]), kernel=kernel, approve=OutsideApproval())
    with pytest.raises(AgentError, match="needs a durable run"):
        await plain.run("note")


async def test_an_llm_node_s_model_call_is_a_step_a_resumed_run_does_not_repeat() -> None:
    crash = [True]

    @pythontool
    def save(text: str) -> str:
        if crash[0]:
            crash[0] = False
            raise Crash
        return f"saved {text}"

    kernel = FunctionKernel()
    kernel.register_python_tool("save", save)
    workflow = (
        WorkflowBuilder("titles", input=dict, output=dict)
        .start(next="title")
        .llm("title", prompt="A title for {{ input.topic }}", next="save")
        .function("save", tool="python://save", inputs={"text": "title"}, next="done")
        .end("done", outputs={"saved": "save.result"})
        .build()
    )
    llm = ScriptedLLM(["Tides", "Another title"])
    runner = MemoryRunner()
    engine = WorkflowEngine(workflow, kernel, llm=llm, durable=runner)
    with pytest.raises(Crash):
        await engine.run({"topic": "the sea"}, run_id="titles-1")
    result = await engine.run({"topic": "the sea"}, run_id="titles-1")
    assert result.output == {"saved": "saved Tides"}  # the recorded reply, not the script's next one
    assert len(llm.requests) == 1
    assert [name for name, _ in runner.journals["titles-1"].values()] == [  # by node, visit and call
        "title#1/model scripted/scripted#1",
        "save#1/tool python://save#1",
    ]


async def test_a_durable_workflow_s_engine_answers_input_requests_and_keeps_the_answers() -> None:
    from kavalai.kernel import CallNext
    from kavalai.kernel import ToolCall as KernelCall
    from tests.durable.conftest import asking_kernel

    kernel, user, asked = asking_kernel()

    crash = [True]

    async def dies_once(call: KernelCall, call_next: CallNext) -> Any:
        result = await call_next(call)
        if crash[0]:
            crash[0] = False
            raise Crash
        return result

    workflow = (
        WorkflowBuilder("greeting", input=dict, output=dict)
        .start(next="greet")
        .function("greet", tool="mcp://feat.greet", inputs={}, next="done")
        .end("done", outputs={"said": "greet.result"})
        .build()
    )
    runner = MemoryRunner()
    engine = WorkflowEngine(workflow, kernel, durable=runner, on_elicitation=user)
    runner.register(engine)
    kernel.add_middleware(dies_once)
    try:
        with pytest.raises(ValueError, match="give the engine its answerer"):
            await engine.run({}, run_id="greet-w", on_elicitation=user)
        with pytest.raises(Crash):
            await engine.run({}, run_id="greet-w")
        result = await engine.run({}, run_id="greet-w")
    finally:
        await kernel.close()
    assert result.output == {"said": "hello Ada"}
    assert asked == ["Who are you?"]  # the redone call's request was answered from the answer log
