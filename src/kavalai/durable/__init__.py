"""Durable runs: workflows and agents that survive a crash, spread over workers, and call side-effecting tools once.

A :class:`DurableRunner` runs a :class:`~kavalai.workflow.WorkflowEngine` or an :class:`~kavalai.agent.Agent` on a
durable engine; give it to either as ``durable=`` and name runs with ``run_id=``::

    runner = DbosRunner("sqlite:///runs.sqlite")
    engine = WorkflowEngine.from_yaml("order.yaml", durable=runner)
    result = await engine.run({"order": 42}, run_id="order-42")   # again after a crash: resumes

Inside a durable run every tool call, model call, the tool listing at the start and every approval is a journaled
step; a resumed run replays what was recorded and runs the rest. Each tool call carries an idempotency key (run id,
step position, hash of the arguments) that is the same in every attempt: REST tools send it as ``Idempotency-Key``,
MCP tools in ``_meta``, Python tools read it with :func:`idempotency_key`.

Engines: :class:`DbosRunner` (the ``dbos`` extra; SQLite or Postgres, in-process) and :class:`TemporalRunner`
(the ``temporal`` extra; a Temporal server), both loaded on first use; :class:`MemoryRunner` keeps the journal in
memory (the baseline of the benchmarks, and a check that a run replays). See ``docs/durable.md``.

A run can wait, durably, for an answer from outside (an agent's :class:`~kavalai.agent.OutsideApproval`): the
runner's ``pending(run_id)`` lists what it waits for and ``answer(run_id, key, value)`` (or ``kavalai answer``)
answers it, from any process, before or after a restart.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kavalai.durable._answer_log import SqlAnswerLog
from kavalai.durable._answers import approval_answer, checked_answer, elicitation_answer
from kavalai.durable._definition import definition_version, tool_gone
from kavalai.durable._memory import MemoryRunner
from kavalai.durable._run import (
    AnswerLog,
    AnswerWaiter,
    DurableRun,
    Journal,
    bind_run,
    call_options,
    current_run,
    inside_step,
    step_key,
    step_scope,
)
from kavalai.durable._runner import (
    RUN_ID_RULE,
    DurableRunner,
    DurableTarget,
    RunInfo,
    UnknownRunError,
    new_run_id,
)
from kavalai.durable._steps import (
    IDEMPOTENCY_KEY,
    DurableStepError,
    durable_steps,
    error_envelope,
    guarded,
    idempotency_key,
    restore_error,
    retry_allowed,
    run_tool_step,
    step,
    step_context,
)
from kavalai.durable._store import FileResultStore, ResultStore, SqlResultStore

if TYPE_CHECKING:
    from kavalai.durable.dbos import DbosRunner
    from kavalai.durable.temporal import TemporalRunner

__all__ = [
    "IDEMPOTENCY_KEY",
    "RUN_ID_RULE",
    "AnswerLog",
    "AnswerWaiter",
    "DbosRunner",
    "DurableRun",
    "DurableRunner",
    "DurableStepError",
    "DurableTarget",
    "FileResultStore",
    "Journal",
    "MemoryRunner",
    "ResultStore",
    "RunInfo",
    "SqlAnswerLog",
    "SqlResultStore",
    "TemporalRunner",
    "UnknownRunError",
    "approval_answer",
    "bind_run",
    "call_options",
    "checked_answer",
    "current_run",
    "definition_version",
    "durable_steps",
    "elicitation_answer",
    "error_envelope",
    "guarded",
    "idempotency_key",
    "inside_step",
    "new_run_id",
    "resolve_runner",
    "restore_error",
    "retry_allowed",
    "run_tool_step",
    "step",
    "step_context",
    "step_key",
    "step_scope",
    "tool_gone",
]

_LAZY = {"DbosRunner": ("kavalai.durable.dbos", "dbos"), "TemporalRunner": ("kavalai.durable.temporal", "temporal")}


def __getattr__(name: str) -> Any:
    found = _LAZY.get(name)
    if found is None:
        raise AttributeError(f"module 'kavalai.durable' has no attribute {name!r}")
    module, extra = found
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] in ("dbos", "temporalio"):
            raise ImportError(
                f"{name} needs the {extra!r} extra: pip install 'kavalai[{extra}]' ({exc.name} is missing)."
            ) from exc
        raise


def resolve_runner(durable: DurableRunner | str | bool | None) -> DurableRunner | None:
    """What ``durable=`` means: a runner as given; a database URL for a :class:`DbosRunner`; ``True`` for a
    :class:`DbosRunner` journaling in ``kavalai-runs.sqlite`` here; ``None`` or ``False`` for none."""
    if durable is None or durable is False:
        return None
    if isinstance(durable, DurableRunner):
        return durable
    if durable is True or isinstance(durable, str):
        runner_class = __getattr__("DbosRunner")
        runner: DurableRunner = runner_class(None if durable is True else durable)
        return runner
    raise TypeError(f"durable= takes a DurableRunner, a database URL or True, not {type(durable).__name__}")
