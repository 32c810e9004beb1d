"""The client half of MCP's tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663; 2026-07-28 era).

A server may run a ``tools/call`` as a task: it answers at once with a task (``resultType: "task"``, an id, a
status) and keeps working. :func:`drive_task` then polls ``tasks/get`` until the task ends, answers what it asks
for meanwhile (``input_required``: the connection's elicitation and sampling handlers, delivered with
``tasks/update``) and returns the tool's ``CallToolResult``, so ``call_tool`` callers never see the difference. When
the call is cancelled (its timeout, the caller, ``ToolTask.cancel()``) the task is cancelled on the server too
(``tasks/cancel``).

The 2025-11-25 revision had tasks in its core (experimental, SEP-1686), which the reference server
``@modelcontextprotocol/server-everything`` uses for tools listed with ``taskSupport: "required"``: such a tool is
called with a ``task`` in its params (:func:`call_as_legacy_task`), the server answers with the task it created,
``tasks/get`` is polled while it works, and ``tasks/result`` gives the tool's result once it ends; what the task asks
of the client meanwhile (elicitation, sampling) arrives on the session and is answered by its handlers as usual.

Written here: the SDK has the building blocks (``ClientSession.send_request``, ``dispatch_input_request``) but no
tasks client; FastMCP's lives in a package that pins its own FastMCP release.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, TypeVar

import anyio
import mcp_types
from mcp.client import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from kavalai.adapters.mcp._answering import asks_together
from kavalai.adapters.mcp._escalation import server_task_created
from kavalai.secrets import get_logger

__all__ = [
    "EXTENSION",
    "TaskCreated",
    "call_as_legacy_task",
    "carry_task",
    "drive_task",
    "offers_tasks",
    "send_call",
]

logger = get_logger("kavalai.mcp")
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")

#: The extension's identifier, advertised in the client's capabilities.
EXTENSION: Final = "io.modelcontextprotocol/tasks"

_FIRST_POLL: Final = 0.02  # seconds: a quick task is seen done at once; the wait doubles up to the server's interval
_MAX_POLL: Final = 5.0  # the longest wait between polls, whatever the server advertises
_MAX_INPUT_ROUNDS: Final = 10  # times one task may stop to ask for input
_CANCEL_WAIT: Final = 2.0  # how long a cancelled call waits for tasks/cancel to be sent


class _TaskFields(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(alias="taskId", max_length=1024)
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class TaskCreated(_TaskFields):
    """A ``tools/call`` answered with a task instead of a result."""

    result_type: Literal["task"] = Field(alias="resultType")


class _TaskState(_TaskFields):
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")


class _LegacyTask(BaseModel):
    """A 2025-11-25 task, as ``tools/call`` (under ``task``) and ``tasks/get`` give it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(alias="taskId", max_length=1024)
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval: int | None = Field(default=None, alias="pollInterval")


#: Where a 2025-11-25 task created for a ``tools/call`` travels inside the result the SDK's session is handed (see
#: :func:`carry_task`).
_CREATED: Final = "io.kavalai/created-task"


def carry_task(item: Any) -> Any:
    """``item`` as the session is handed it (by :class:`~kavalai.adapters.mcp._session_streams.SessionStreams`): a
    2025-11-25 ``CreateTaskResult`` (a task-augmented ``tools/call`` answered with the task it created) is carried
    as a ``CallToolResult`` with no content and the task under ``_meta`` (``io.kavalai/created-task``): the SDK's
    session checks a ``tools/call`` answer against the negotiated revision's ``CallToolResult`` and would refuse the
    task. Only a result holding a ``task`` object and no ``content`` is changed, which answers nothing but a
    task-augmented request."""
    message = getattr(item, "message", None)
    # by exact class first: isinstance() of a pydantic model class is an ABC check, once a message
    if type(message) is not mcp_types.JSONRPCResponse and not isinstance(message, mcp_types.JSONRPCResponse):
        return item
    result = message.result
    if not isinstance(result.get("task"), dict) or "content" in result:
        return item
    meta = result.get("_meta")
    carried = {"content": [], "_meta": {**(meta if isinstance(meta, dict) else {}), _CREATED: result["task"]}}
    return SessionMessage(message.model_copy(update={"result": carried}), item.metadata)


_TaskRequest = mcp_types.Request[dict[str, Any], str]
_ANY: Final = TypeAdapter(dict[str, Any])
_INPUT_REQUEST: Final = TypeAdapter(mcp_types.InputRequest)


def offers_tasks(session: ClientSession) -> bool:
    """Whether the server declared the tasks extension (2026-07-28 era), so a call may come back as a task."""
    discovered = session.discover_result
    extensions = discovered.capabilities.extensions if discovered is not None else None
    return extensions is not None and EXTENSION in extensions


async def send_call(session: ClientSession, send: Callable[[], Awaitable[R]]) -> R:
    """Send a ``tools/call`` that the server may answer with a task, and return the answer.

    A server may start the task's work before its answer (the task's id) reaches us. If the caller gives up in
    that gap, the id would be lost and the work go on unowned; so on cancellation the answer is still awaited, for
    at most ``_CANCEL_WAIT`` seconds, and a task it names is cancelled (``tasks/cancel``) before the cancellation
    goes on.
    """
    answered: list[R] = []
    failed: list[Exception] = []
    done = anyio.Event()
    waiting = anyio.CancelScope(shield=True)  # shielded from the caller; given a deadline when the caller leaves

    async def run() -> None:
        try:
            with waiting:
                answered.append(await send())
        except Exception as exc:  # handed to the caller below, outside the task group
            failed.append(exc)
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            waiting.deadline = anyio.current_time() + _CANCEL_WAIT
            with anyio.CancelScope(shield=True):
                await done.wait()
                task_id = _task_id(answered[0]) if answered else None
                if task_id is not None:
                    with anyio.move_on_after(_CANCEL_WAIT):
                        await _cancel(session, task_id)
            raise
    if failed:
        raise failed[0]
    return answered[0]


def _task_id(answer: object) -> str | None:
    if isinstance(answer, TaskCreated):
        return answer.task_id
    meta = answer.meta if isinstance(answer, mcp_types.CallToolResult) else None
    created = (meta or {}).get(_CREATED)
    task_id = created.get("taskId") if isinstance(created, dict) else None
    return task_id if isinstance(task_id, str) else None


async def call_as_legacy_task(
    session: ClientSession, request: mcp_types.CallToolRequest, progress: Any = None
) -> mcp_types.CallToolResult:
    """Send ``request`` as a 2025-11-25 task-augmented call (``task`` in its params) and follow the task the
    server creates to its end; return the tool's result. The session must read through :func:`carry_task` (every
    session does).

    Raises:
        MCPError: the server refused the call, or the task failed, was cancelled or asked what was refused.
    """
    params = request.params.model_copy(update={"task": mcp_types.TaskMetadata()})
    augmented = request.model_copy(update={"params": params})
    answer = await send_call(
        session, lambda: session.send_request(augmented, mcp_types.CallToolResult, progress_callback=progress)
    )
    created = (answer.meta or {}).get(_CREATED)
    if created is None:
        return answer  # the server ran it at once
    task = _read(_LegacyTask, created, "the task it created")
    server_task_created()  # a gateway's host is given its task now (_escalation.py)
    logger.debug("MCP tools/call runs as 2025-11-25 task %s (%s)", task.task_id, task.status)
    try:
        return await _follow_legacy(session, task)
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
            await _cancel(session, task.task_id)
        raise


async def _follow_legacy(session: ClientSession, task: _LegacyTask) -> mcp_types.CallToolResult:
    delay, state = _FIRST_POLL, task
    while state.status == "working":
        await anyio.sleep(delay)
        delay = min(delay * 2, _ceiling(state.poll_interval))
        state = _read(_LegacyTask, await _send(session, "tasks/get", {"taskId": task.task_id}), "its tasks/get answer")
    if state.status in ("failed", "cancelled"):
        said = f": {state.status_message}" if state.status_message else ""
        reason = "was cancelled on the server" if state.status == "cancelled" else "failed"
        raise MCPError(code=mcp_types.INTERNAL_ERROR, message=f"the task {reason}{said}")
    # Completed, or waiting for input: tasks/result answers once the task has ended, and what it asks for meanwhile
    # comes on the session (answered by the connection's handlers).
    raw = await _send(session, "tasks/result", {"taskId": task.task_id})
    return _read(mcp_types.CallToolResult, raw, "its tasks/result answer")


async def drive_task(session: ClientSession, task: TaskCreated) -> mcp_types.CallToolResult:
    """Follow ``task`` to its end and return the tool's result.

    Raises:
        MCPError: the task failed or was cancelled on the server, or asked for input that was refused.
    """
    try:
        return await _follow(session, task)
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
            await _cancel(session, task.task_id)
        raise


async def _follow(session: ClientSession, task: TaskCreated) -> mcp_types.CallToolResult:
    logger.debug("MCP tools/call runs as task %s (%s)", task.task_id, task.status)
    delay, inputs = _FIRST_POLL, 0
    ceiling = _ceiling(task.poll_interval_ms)
    state: _TaskFields = task
    while True:
        if state.status == "completed" and isinstance(state, _TaskState):
            return _read(mcp_types.CallToolResult, state.result or {}, "its result")
        if state.status in ("failed", "cancelled"):
            raise _ended(state)
        if state.status == "input_required" and isinstance(state, _TaskState):
            inputs += 1
            if inputs > _MAX_INPUT_ROUNDS:
                raise MCPError(code=mcp_types.INTERNAL_ERROR, message="the task asked for input too many times")
            responses = await _answer(session, state)
            await _send(session, "tasks/update", {"taskId": task.task_id, "inputResponses": responses})
            delay = _FIRST_POLL
        elif state is not task:
            await anyio.sleep(delay)
            delay = min(delay * 2, ceiling)
        raw = await _send(session, "tasks/get", {"taskId": task.task_id})
        state = _read(_TaskState, raw, "its tasks/get answer")
        ceiling = _ceiling(state.poll_interval_ms)


def _read(model: type[M], raw: Any, what: str) -> M:
    try:
        return model.model_validate(raw, by_name=False)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(answer)'}: {e['msg']}" for e in exc.errors()[:3])
        message = f"the task's server sent {what} malformed: {problems}"
        raise MCPError(code=mcp_types.INTERNAL_ERROR, message=message) from None


def _ceiling(poll_interval_ms: int | None) -> float:
    if poll_interval_ms is None or poll_interval_ms <= 0:
        return 1.0
    return min(max(poll_interval_ms / 1000, _FIRST_POLL), _MAX_POLL)


def _ended(state: _TaskFields) -> MCPError:
    error = getattr(state, "error", None)
    if state.status == "cancelled":
        return MCPError(code=mcp_types.INTERNAL_ERROR, message=f"the task was cancelled on the server{_said(state)}")
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        return MCPError(
            code=code if isinstance(code, int) else mcp_types.INTERNAL_ERROR,
            message=f"the task failed: {message if isinstance(message, str) and message else 'no reason given'}",
            data=error.get("data"),
        )
    return MCPError(code=mcp_types.INTERNAL_ERROR, message=f"the task failed{_said(state)}")


def _said(state: _TaskFields) -> str:
    return f": {state.status_message}" if state.status_message else ""


async def _answer(session: ClientSession, state: _TaskState) -> dict[str, Any]:
    """Answer a parked task's requests through the connection's handlers (the same ones, with the same limits,
    that answer a server's requests in the other forms), as the era's driver answers a round: under the task's own
    keys, and together where the caller asks so (a relay putting them to its host in one round)."""
    from kavalai.adapters.mcp._era import (  # the era module imports this one
        MAX_INPUT_REQUESTS,
        InputRefused,
        answered,
        answered_together,
    )

    requests = state.input_requests or {}
    if len(requests) > MAX_INPUT_REQUESTS:
        message = f"{len(requests)} requests at once, more than the {MAX_INPUT_REQUESTS} a round may ask"
        raise InputRefused("input", mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message))
    parsed = {key: _INPUT_REQUEST.validate_python(payload, by_name=False) for key, payload in requests.items()}
    if len(parsed) > 1 and asks_together():
        answers = await answered_together(session, parsed)
    else:
        answers = {key: await answered(session, key, request) for key, request in parsed.items()}
    return {key: answer.model_dump(by_alias=True, mode="json", exclude_none=True) for key, answer in answers.items()}


async def _cancel(session: ClientSession, task_id: str) -> None:
    logger.debug("MCP task %s: the call ended early; cancelling it on the server (tasks/cancel)", task_id)
    await _send(session, "tasks/cancel", {"taskId": task_id}, suppress=True)


async def _send(session: ClientSession, method: str, params: dict[str, Any], *, suppress: bool = False) -> Any:
    try:
        return await session.send_request(_TaskRequest(method=method, params=params), _ANY)
    except MCPError:
        if not suppress:
            raise
        logger.debug("MCP %s of task %s failed", method, params.get("taskId"), exc_info=True)
        return None
