"""A process that runs one durable workflow (or agent) and may kill itself mid-run, for the crash tests.

    python -m tests.servers.durable_worker workflow DB_URL REST_URL RUN_ID [--crash-after N]
    python -m tests.servers.durable_worker agent DB_URL REST_URL RUN_ID [--crash-after N]
    python -m tests.servers.durable_worker serve DB_URL REST_URL NAME [--concurrency N]

``serve`` is a worker: it serves the queue of the ``charges`` workflow until killed, its REST requests marked with
an ``X-Worker: NAME`` header. ``temporal`` is the same on Temporal (DB_URL is the server's ``host:port``), and
``--crash-after N`` ends it after its N-th tool call answered, before Temporal recorded it.

The workflow charges three orders through ``rest://shop.charge`` (a REST service of ``effects_app``). With
``--crash-after N`` the process ends with ``os._exit(3)`` right after the N-th tool call returned and before the
durable engine recorded it: the request was sent and answered, the journal does not know. With ``--recorded`` it
ends just after the engine recorded the N-th call instead (between that step and the next). The agent (a
``ScriptedLLM``) makes one charge per model step and crashes the same way. The result is printed as JSON.

``agent --approval`` has every charge approved from outside (``OutsideApproval``): ``--exit-when-waiting`` ends the
process (``os._exit(3)``) as soon as the run waits for an answer, printing the pending questions as JSON first;
``--answers '{"B": "deny"}'`` answers the questions of this process's run by order, through the runner.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from kavalai import FunctionKernel, RestServer
from kavalai.durable import DbosRunner
from kavalai.kernel import CallNext, ToolCall
from kavalai.workflow import WorkflowBuilder, WorkflowEngine

CHARGE_SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}},
    "required": ["order", "amount"],
}


def make_kernel(rest_url: str, worker: str = "main") -> FunctionKernel:
    """A kernel with the charge tool of the effects service."""
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url=rest_url, headers={"X-Worker": worker}))
    kernel.register_rest_tool("shop", "charge", method="POST", path="/charge", input_schema=CHARGE_SCHEMA)
    return kernel


def crash_after(count: int | None) -> Any:
    """A middleware (added after the runner's, so inside it) that exits the process after the count-th call."""
    seen = [0]

    async def crash(call: ToolCall, call_next: CallNext) -> Any:
        raw = await call_next(call)
        seen[0] += 1
        if count is not None and seen[0] == count:
            print(f"crashing after call {seen[0]}", file=sys.stderr, flush=True)
            os._exit(3)
        return raw

    return crash


def workflow() -> Any:
    builder = WorkflowBuilder("charges", input=dict, output=dict).start(next="a")
    for node, order, after in (("a", "A", "b"), ("b", "B", "c"), ("c", "C", "done")):
        builder = builder.function(
            node,
            tool="rest://shop.charge",
            inputs={"order": {"expr": f"'{order}'"}, "amount": "input.amount"},
            next=after,
        )
    charges = "[a.result.charge, b.result.charge, c.result.charge]"
    return builder.end("done", outputs={"charges": {"expr": charges}}).build()


async def run_workflow(args: argparse.Namespace) -> Any:
    runner = DbosRunner(args.db, stale_after=args.stale_after, step_log=args.step_log)
    kernel = make_kernel(args.rest)
    if args.recorded:  # outside the runner's middleware: after the step is journaled
        kernel.add_middleware(crash_after(args.crash_after))
    engine = WorkflowEngine(workflow(), kernel, durable=runner)
    runner.register(engine)
    if not args.recorded:  # inside it: after the tool answered, before the step is journaled
        kernel.add_middleware(crash_after(args.crash_after))
    try:
        result = await engine.run({"amount": 5}, run_id=args.run_id)
        return result.to_dict()
    finally:
        await runner.aclose()
        await kernel.close()


async def run_agent(args: argparse.Namespace) -> Any:
    from kavalai.agent import Agent
    from kavalai.testing import ScriptedLLM, tool_call

    def reply(request: Any) -> Any:
        # One charge per model step, by how many tool results the conversation holds: the script answers the
        # same whichever process asks, so a resumed run gets what the first one would have.
        done = sum(1 for message in request.messages if message.role == "tool")
        if done < 3:
            order = "ABC"[done]
            return tool_call("rest://shop.charge", {"order": order, "amount": 7})
        return f"charged {done} orders"

    llm = ScriptedLLM(reply)
    runner = DbosRunner(args.db, stale_after=args.stale_after, step_log=args.step_log)
    kernel = make_kernel(args.rest)
    if args.recorded:
        kernel.add_middleware(crash_after(args.crash_after))
    approval: dict[str, Any] = {}
    if args.approval:
        from kavalai.agent import OutsideApproval

        approval = {"require_approval": ["rest://shop.*"], "approve": OutsideApproval()}
    agent = Agent(llm, kernel=kernel, durable=runner, **approval)
    runner.register(agent)
    watcher = asyncio.get_running_loop().create_task(watch(runner, args)) if args.approval else None
    if not args.recorded:
        kernel.add_middleware(crash_after(args.crash_after))
    try:
        result = await agent.run("charge A, B and C", run_id=args.run_id)
        return {"output": result.output, "tools": [c.uri for c in result.tool_calls], "llm_requests": len(llm.requests)}
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await runner.aclose()
        await kernel.close()


async def watch(runner: DbosRunner, args: argparse.Namespace) -> None:
    """Answer the run's questions by order (``--answers``), or exit once it waits for one (``--exit-when-waiting``)."""
    answers = json.loads(args.answers or "{}")
    while True:
        await asyncio.sleep(0.05)
        try:
            pending = await runner.pending(args.run_id)
            if pending and args.exit_when_waiting:
                print(json.dumps(pending), flush=True)
                os._exit(3)
            for key, question in pending.items():
                await runner.answer(args.run_id, key, answers.get(question["arguments"]["order"], "allow"))
        except Exception as exc:  # shown in the test's failure message; the next look tries again
            print(f"watch: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


async def serve(args: argparse.Namespace) -> Any:
    runner = DbosRunner(args.db, concurrency=args.concurrency, stale_after=args.stale_after, step_log=args.step_log)
    kernel = make_kernel(args.rest, args.run_id)
    runner.register(WorkflowEngine(workflow(), kernel, durable=runner))
    await runner.start()
    print("serving", flush=True)
    await runner.serve()


async def serve_temporal(args: argparse.Namespace) -> Any:
    from kavalai.durable import TemporalRunner

    runner = TemporalRunner(args.db, step_timeout=args.stale_after)
    kernel = make_kernel(args.rest, args.run_id)
    engine = WorkflowEngine(workflow(), kernel, durable=runner)
    runner.register(engine)
    kernel.add_middleware(crash_after(args.crash_after))
    async with engine:
        await runner.start_worker()
        print("serving", flush=True)
        try:
            await runner.serve()
        finally:
            await runner.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["workflow", "agent", "serve", "temporal"])
    parser.add_argument("db")
    parser.add_argument("rest")
    parser.add_argument("run_id")
    parser.add_argument("--crash-after", type=int, default=None)
    parser.add_argument("--recorded", action="store_true")
    parser.add_argument("--step-log", choices=["kavalai", "dbos"], default="kavalai")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--stale-after", type=float, default=10.0)
    parser.add_argument("--approval", action="store_true")
    parser.add_argument("--exit-when-waiting", action="store_true")
    parser.add_argument("--answers", default=None)
    args = parser.parse_args()
    if args.kind == "serve":
        asyncio.run(serve(args))
        return
    if args.kind == "temporal":
        asyncio.run(serve_temporal(args))
        return
    outcome = asyncio.run(run_workflow(args) if args.kind == "workflow" else run_agent(args))
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
