"""The steps of a Temporal run whose outcome is unknown, read from its history (no worker needed): a step's activity
started and not ended is ``sent`` (in flight, or its worker gone), one that ended without a result (it timed out or
failed: its worker died mid-step) is ``in_doubt``, one cut by a cancel ``cancelled``. A tool's own failure is a
result (the activity completes), so it is not listed; nor is a step that another attempt finished, nor one the
operator resolved done (the answer that won its question ``doubt-<position>``, an update of the run).

Also read from a run's history: the definition it began with, and whether an earlier release keyed its steps'
activities by position (such a run is refused, naming its step, rather than failing its workflow task on replay)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus, WorkflowHandle

from kavalai.durable._definition import Definition, keyed_by_position
from kavalai.durable._runner import RunInfo, RunState
from kavalai.errors import DefinitionChangedError

__all__ = [
    "keyed_by_position_of",
    "recorded_definition",
    "run_info",
    "steps_in_doubt",
    "update_outcome",
    "winner_in_history",
]

_ENDS = {
    "activity_task_completed_event_attributes": None,
    "activity_task_failed_event_attributes": "in_doubt",
    "activity_task_timed_out_event_attributes": "in_doubt",
    "activity_task_canceled_event_attributes": "cancelled",
}


def steps_in_doubt(events: Iterable[Any], answer_update: str) -> list[dict[str, Any]]:
    """``[{"position", "name", "state"}]`` for the steps of a run's history ``events`` (temporalio's
    ``HistoryEvent`` messages) whose outcome is unknown, by position; the last activity of a step decides.
    ``answer_update``: the name of the run's update that answers a question."""
    scheduled: dict[int, tuple[int, str]] = {}  # scheduled event id -> (position, step name)
    states: dict[int, tuple[str, str | None]] = {}  # position -> (name, state)
    answers: dict[int, list[Any]] = {}  # accepted event id -> the update's arguments (key, answer)
    for event in events:
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name == answer_update:
                answers[event.event_id] = [_json(p) for p in request.input.args.payloads]
            continue
        if event.HasField("workflow_execution_update_completed_event_attributes"):
            resolved = _resolved_done(event.workflow_execution_update_completed_event_attributes, answers)
            if resolved is not None and resolved in states:
                states[resolved] = (states[resolved][0], None)
            continue
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            task = _task(attributes.input.payloads)
            if task is None:
                continue
            name = attributes.activity_id.removesuffix(" (retry)")
            scheduled[event.event_id] = (int(task["position"]), name)
            states[int(task["position"])] = (name, "sent")
            continue
        for field, state in _ENDS.items():
            if event.HasField(field):
                found = scheduled.get(getattr(event, field).scheduled_event_id)
                if found is not None:
                    states[found[0]] = (found[1], state)
    return [
        {"position": position, "name": name, "state": state}
        for position, (name, state) in sorted(states.items())
        if state is not None
    ]


def _resolved_done(done: Any, answers: dict[int, list[Any]]) -> int | None:
    """The position of the step an update that won resolved done (``doubt-<position>``), else ``None``."""
    args = answers.get(done.accepted_event_id)
    if not args or len(args) < 2 or not isinstance(args[0], str) or not args[0].startswith("doubt-"):
        return None
    if not done.outcome.HasField("success") or not done.outcome.success.payloads:
        return None
    told, answer = _json(done.outcome.success.payloads[0]), args[1]
    won = isinstance(told, dict) and told.get("state") == "won"
    position = args[0].removeprefix("doubt-")
    is_done = isinstance(answer, dict) and answer.get("action") == "done"
    return int(position) if won and is_done and position.isdigit() else None


def _json(payload: Any) -> Any:
    try:
        return json.loads(payload.data)
    except ValueError:
        return None


def _task(payloads: Any) -> dict[str, Any] | None:
    """The step's task (its first argument), when it is JSON naming a position."""
    if not payloads:
        return None
    task = _json(payloads[0])
    return task if isinstance(task, dict) and isinstance(task.get("position"), int) else None


async def recorded_definition(client: Client, handle: WorkflowHandle[Any, Any]) -> Definition | None:
    """The definition run ``handle`` began with: the third argument of its start (``None`` for older runs)."""
    async for event in handle.fetch_history_events():
        if not event.HasField("workflow_execution_started_event_attributes"):
            return None
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        args = await client.data_converter.decode(payloads) if payloads else []
        found = args[2] if len(args) > 2 else None
        return found if isinstance(found, dict) else None
    return None


async def keyed_by_position_of(client: Client, handle: WorkflowHandle[Any, Any]) -> DefinitionChangedError | None:
    """Why run ``handle`` may not be resumed when an earlier release scheduled its steps' activities by position (an
    activity id such as ``1``, before steps had identities: the step's name was only its summary), else ``None``."""
    names = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            activity_id = event.activity_task_scheduled_event_attributes.activity_id
            summary = event.user_metadata.summary if event.HasField("user_metadata") else None
            shown = await client.data_converter.decode([summary]) if summary is not None and summary.data else []
            names.append(str(shown[0]) if shown and "#" not in activity_id else activity_id)
    return keyed_by_position(handle.id, names)


async def winner_in_history(
    client: Client, handle: WorkflowHandle[Any, Any], key: str, answer_update: str
) -> tuple[bool, Any]:
    """``(True, answer)`` when the run's history holds the answer that won question ``key`` (an update named
    ``answer_update``), else ``(False, None)``: for a loser whose update reached a run that had ended."""
    accepted: dict[int, list[Any]] = {}
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name == answer_update:
                accepted[event.event_id] = await client.data_converter.decode(request.input.args.payloads)
        elif event.HasField("workflow_execution_update_completed_event_attributes"):
            done = event.workflow_execution_update_completed_event_attributes
            args = accepted.get(done.accepted_event_id)
            if args is None or not args or args[0] != key or not done.outcome.HasField("success"):
                continue
            [told] = await client.data_converter.decode(done.outcome.success.payloads)
            if isinstance(told, dict) and told.get("state") == "won":
                return True, args[1]
    return False, None


async def update_outcome(client: Client, handle: WorkflowHandle[Any, Any], update_id: str) -> Any | None:
    """What the run's history says the update ``update_id`` returned, else ``None`` (never taken): whether an
    answer whose delivery failed midway was applied."""
    async for event in handle.fetch_history_events():
        if not event.HasField("workflow_execution_update_completed_event_attributes"):
            continue
        done = event.workflow_execution_update_completed_event_attributes
        if done.meta.update_id == update_id and done.outcome.HasField("success"):
            [told] = await client.data_converter.decode(done.outcome.success.payloads)
            return told
    return None


#: Temporal's statuses in the words of :class:`RunInfo`.
_STATES: Final[dict[WorkflowExecutionStatus, RunState]] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "running",
    WorkflowExecutionStatus.COMPLETED: "finished",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}


def run_info(found: WorkflowExecution) -> RunInfo:
    """Where the run ``found`` (as the server lists or describes it) is, in the words of :class:`RunInfo`."""
    status = found.status
    return RunInfo(
        run_id=found.id,
        state=_STATES.get(status, "running") if status is not None else "running",
        engine_status=status.name if status is not None else "UNKNOWN",
        created_at=found.start_time,
        updated_at=found.close_time or found.execution_time or found.start_time,
    )
