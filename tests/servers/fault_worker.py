"""A process that runs one durable run of a workflow file and may kill itself (``SIGKILL``) at a step boundary, for
the fault matrix (``tests/durable/fault_matrix.py``).

    python -m tests.servers.fault_worker ENGINE TARGET WORKFLOW RUN_ID NAME [--cut before|after --order X] [--versioned]

``ENGINE`` is ``dbos`` (``TARGET``: the journal's URL) or ``temporal`` (``TARGET``: the server's ``host:port``;
``--task-queue``). The process does what a user does: ``WorkflowEngine.from_yaml(WORKFLOW, durable=runner)
.run(input, run_id=RUN_ID)``, the runner serving runs in this process meanwhile, and prints the result as JSON on
its last line of stdout (on Temporal without closing the runner: ``run`` stops the worker it started). Its REST
requests carry ``X-Worker: NAME`` and ``X-Pid: <its pid>`` (the workflow file reads ``${WORKER_NAME}`` and
``${WORKER_PID}``), so the REST service can tell who sent what, and kill the sender during the call
(``effects_app``'s ``kill_during``).

``--cut before --order X``: the process kills itself when the step charging order ``X`` begins, before its request
is sent (a middleware outside the runner's: on Temporal, in the workflow's code, before the activity is scheduled).
``--cut after --order X``: it kills itself after the answer came back and before the engine recorded the step (a
middleware inside the runner's: on Temporal, in the activity).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
from typing import Any

from kavalai.errors import RunInterruptedError
from kavalai.kernel import CallNext, ToolCall
from kavalai.workflow import WorkflowEngine


def cut(order: str) -> Any:
    """A middleware that kills this process (SIGKILL) at the step charging ``order``: before the call when added
    before the runner's middleware, after it when added after."""

    async def before(call: ToolCall, call_next: CallNext) -> Any:
        if call.arguments.model_dump().get("order") == order:
            os.kill(os.getpid(), signal.SIGKILL)
        return await call_next(call)

    return before


def cut_after(order: str) -> Any:
    """A middleware that kills this process once the call charging ``order`` answered."""

    async def after(call: ToolCall, call_next: CallNext) -> Any:
        raw = await call_next(call)
        if call.arguments.model_dump().get("order") == order:
            os.kill(os.getpid(), signal.SIGKILL)
        return raw

    return after


def runner_for(args: argparse.Namespace) -> Any:
    if args.engine == "temporal":
        from kavalai.durable import TemporalRunner

        return TemporalRunner(
            args.target, task_queue=args.task_queue, step_timeout=args.step_timeout, versioned=args.versioned
        )
    from kavalai.durable import DbosRunner

    return DbosRunner(
        args.target,
        queue=args.task_queue,
        stale_after=args.step_timeout,
        versioned=args.versioned,
        busy_timeout=args.busy_timeout,
        step_log=args.step_log,
        **({} if args.journal_outage is None else {"journal_outage": args.journal_outage}),
    )


async def main(args: argparse.Namespace) -> dict[str, Any]:
    journal = logging.getLogger("kavalai.durable")  # the journal gate's "trying again" lines, on stderr (its log)
    journal.addHandler(logging.StreamHandler())
    os.environ["WORKER_NAME"] = args.name
    os.environ["WORKER_PID"] = str(os.getpid())
    runner = runner_for(args)
    engine = WorkflowEngine.from_yaml(args.workflow, durable=runner)
    if args.without_tool is not None:  # the tool removed from the configuration (a resume on a kernel without it)
        assert engine.kernel.remove_tool(args.without_tool)
    if args.cut == "before":  # outside the runner's middleware: before the step is journaled or sent
        engine.kernel.add_middleware(cut(args.order))
    runner.register(engine)
    if args.cut == "after":  # inside it: the answer is back, the step not yet recorded
        engine.kernel.add_middleware(cut_after(args.order))
    try:
        # The documented call, as is: on Temporal the worker it starts is down when it returns (nothing to close).
        result = await engine.run({"amount": 5}, run_id=args.run_id)
    except RunInterruptedError as exc:  # the journal away past the run's patience: resumable, told as such
        return {"status": "interrupted", "output": str(exc)}
    finally:
        if args.engine == "dbos":
            await runner.aclose()
        await engine.aclose()
    return {"status": result.status.value, "output": result.output_data() if result.ok else str(result.error)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=["dbos", "temporal"])
    parser.add_argument("target")
    parser.add_argument("workflow")
    parser.add_argument("run_id")
    parser.add_argument("name")
    parser.add_argument("--cut", choices=["before", "after"], default=None)
    parser.add_argument("--order", default=None)
    parser.add_argument("--task-queue", default="kavalai")
    parser.add_argument("--step-timeout", type=float, default=10.0)
    parser.add_argument("--versioned", action="store_true", help="a versioned runner (docs/durable.md)")
    parser.add_argument("--busy-timeout", type=float, default=30.0, help="DBOS on SQLite: the busy timeout")
    parser.add_argument("--without-tool", default=None, help="the kernel without this tool (its URI)")
    parser.add_argument("--journal-outage", type=float, default=None, help="DBOS: the run's patience (seconds)")
    parser.add_argument("--step-log", choices=["kavalai", "dbos"], default="kavalai", help="DBOS: where steps go")
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options))), flush=True)
