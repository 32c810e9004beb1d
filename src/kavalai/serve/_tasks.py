"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as ``kavalai serve`` serves it to hosts of the
2026-07-28 era.

A host that declared the extension (for its session, or in the ``_meta`` of one request) and calls a tool served as
task-supporting gets a task at once (``resultType: "task"``) instead of the tool's result. The gateway's kernel owns
the call: it runs, owned by :class:`HostTasks`, as the gateway's own call of the tool would (a backend that runs it
as a task of its own is followed by the kernel, ``kavalai.adapters.mcp``), and the task is the host's view of it:

```
host: tools/call ─► CreateTaskResult {taskId, status: working, ttlMs, pollIntervalMs}
host: tasks/get ─► working │ input_required + inputRequests (what the backend asks) │ completed + result
                   │ failed + error │ cancelled
host: tasks/update {inputResponses} ─► the answers go to the backend; the call goes on
host: tasks/cancel ─► the call is cancelled (at the backend too)
```

Which tools are task-supporting: those the gateway was told to run as tasks (``tasks=`` / ``--tasks``, URI globs;
``tasks_required=`` / ``--tasks-required`` for those that run only as tasks: a host without the extension is told
so with -32021), the tools a handshake-era server listed with ``execution.taskSupport``, and every tool of a
2026-07-28 server that declared the extension. Where the server decides when a call becomes its task (such a
server's tools not named with ``--tasks``, and a handshake-era server's tools it runs only as tasks), the host's
task starts when the server's does (:meth:`HostTasks.composed`): what it asks before is put to the host as
input-required rounds, the round in which its task comes to exist is answered with the host's, and a call it
answers without a task is answered with its result. Every other call (and every call of a host that did not declare
the extension) is answered with its result, as before.

Bounded: at most :data:`MAX_TASKS` tasks are kept at once, at most :data:`MAX_TASKS_PER_HOST` of them one host's
(:func:`host_of`: its authenticated principal, else its address; a call past either runs to its result at once, as a
tool without tasks would, once no ended task can be forgotten to make room: the host's own first ended one when it is
at its share, else the first ended of all); each is kept for its TTL (:data:`TASK_TTL` seconds, through the one
seconds rule) from its start, its call cancelled if still running then; the results of ended tasks are kept up to
:data:`MAX_KEPT_BYTES` of JSON in all (past it, the tasks that ended first are forgotten first, and a result larger
than that alone fails its task saying so); a question the backend asks waits :data:`ANSWER_WINDOW` seconds for its
``tasks/update``; closing the server (its lifespan) cancels every task still running. A task's id is random
and begins with the process's mark: holding it is the right to it; another process's id is refused saying so. Its
result is the same as the call's would be (the one result mapping of :func:`~kavalai.serve.call_kernel_tool`); a
failure crosses the one error wording (:mod:`kavalai.serve._errors`), the secret gate with it.
"""

from __future__ import annotations

import collections
import contextlib
import fnmatch
import secrets
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias, cast

import anyio
import mcp_types as types
import pydantic_core
from mcp.server import ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from pydantic import Field, TypeAdapter, ValidationError

from kavalai.errors import JsonRpcError
from kavalai.kernel import ToolDefinition, required_seconds
from kavalai.secrets import get_logger
from kavalai.serve._errors import protocol_error
from kavalai.serve._rounds import ANSWER_WINDOW, ESCALATED, RoundsCall, Servings, resumed, takes_rounds

__all__ = [
    "EXTENSION",
    "MAX_KEPT_BYTES",
    "MAX_TASKS",
    "MAX_TASKS_PER_HOST",
    "TASK_TTL",
    "HostTasks",
    "TaskParams",
    "TaskSupport",
    "TaskUpdateParams",
    "declares_tasks",
    "host_of",
]

logger = get_logger("kavalai.serve")

#: The extension's identifier (the kernel's client advertises the same one to its servers).
EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: Seconds a task is kept from its start (its call cancelled if still running then).
TASK_TTL: Final = 3600.0
#: Tasks kept at once: a task-supporting call past that runs to its result at once.
MAX_TASKS: Final = 256
#: Tasks of one host (:func:`host_of`) kept at once: no host fills the table for the others.
MAX_TASKS_PER_HOST: Final = 64
#: Bytes of JSON the results of ended tasks may hold in all: past it, the tasks that ended first are forgotten first.
MAX_KEPT_BYTES: Final = 64 * 1024 * 1024
_POLL_MS: Final = 500  # the poll interval suggested to hosts
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

#: How a tool is served: may run as a task, or only as one.
TaskSupport: TypeAlias = Literal["optional", "required"]

_ANSWER: Final = TypeAdapter(types.InputResponse)


class TaskParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task named."""

    task_id: str = Field(alias="taskId", max_length=1024)


class TaskUpdateParams(TaskParams):
    """``tasks/update``: the host's answers to what the task asked, by the keys it was asked under."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


def declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the host of ``ctx`` (a 2026-07-28 host: this request's capabilities) declared the extension."""
    wanted = types.ClientCapabilities(extensions={EXTENSION: {}})
    return takes_rounds(ctx.protocol_version) and ctx.session.check_client_capability(wanted)


_LOCAL: Final = ("local",)  # the one host of a stdio (or in-memory) serving


def host_of(ctx: ServerRequestContext[Any] | None) -> Hashable:
    """Whose share of the task table a task started by the request of ``ctx`` takes: the principal its HTTP request
    was authenticated as (the MCP SDK's bearer authentication, ``AuthenticatedUser``: client, issuer and subject),
    else the address it came from (the TCP peer: ``kavalai serve --token`` gives every host the same token), else
    (stdio, in memory) the one host. A 2026-07-28 host has no session to tell it by: each request is its own."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    if not isinstance(scope, Mapping):
        return _LOCAL
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        principal = authorization_context(user)
        return ("principal", principal["client_id"], principal["issuer"], principal["subject"])
    client = scope.get("client")
    return ("address", client[0]) if client else _LOCAL


def _may_reach(owner: Hashable, asking: Hashable) -> bool:
    """Whether a host told as ``asking`` (:func:`host_of`) may read, answer or cancel a task started by ``owner``: a
    task an authenticated principal started is that principal's alone; any other (an address, the stdio host) is
    reached by its id, which is random (an address is no identity: a host's may change, or be a proxy's)."""
    return not (isinstance(owner, tuple) and owner[:1] == ("principal",)) or owner == asking


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(eq=False)
class _Task:
    """One task: the host call it is, its state, and when it is forgotten."""

    task_id: str
    call: RoundsCall
    ttl_ms: int
    expires: float  # anyio time
    host: Hashable = _LOCAL  # whose share of the table it takes (host_of)
    created: str = field(default_factory=_now)
    updated: str = ""
    status: str = "working"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    asked: tuple[str, ...] = ()  # the keys of the questions last shown (a change updates lastUpdatedAt)
    kept: anyio.CancelScope = field(default_factory=anyio.CancelScope)  # keeps the ended task; cancelled: forgotten

    def __post_init__(self) -> None:
        self.updated = self.created

    def end(self, status: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> None:
        """The task ends (a terminal status is kept: a later end changes nothing)."""
        if self.status in _TERMINAL:
            return
        self.status, self.result, self.error, self.updated = status, result, error, _now()

    def envelope(self) -> dict[str, Any]:
        """The fields every answer naming the task carries."""
        return {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": _POLL_MS,
        }

    def detailed(self) -> dict[str, Any]:
        """``tasks/get``'s answer: the envelope, and the result, the error or what the task waits on."""
        if self.status in _TERMINAL:
            shown = self.envelope()
            if self.result is not None:
                shown["result"] = self.result
            if self.error is not None:
                shown["error"] = self.error
            return shown
        questions = self.call.open_questions()
        if tuple(questions) != self.asked:
            self.asked, self.updated = tuple(questions), _now()
        self.status = "input_required" if questions else "working"
        shown = self.envelope()
        if questions:
            shown["inputRequests"] = {
                key: request.model_dump(mode="json", by_alias=True, exclude_none=True)
                for key, request in questions.items()
            }
        return shown


class HostTasks:
    """The tasks of one served kernel, owned for the server's lifespan (:meth:`running`).

    Args:
        tasks: URI globs of the tools a host that declared the extension gets a task for.
        tasks_required: URI globs of the tools that run only as tasks (a host without the extension: -32021).
        ttl_seconds: how long a task is kept from its start (its call cancelled if still running then).
        max_tasks: tasks kept at once.
        max_tasks_per_host: tasks of one host (:func:`host_of`) kept at once.
        max_kept_bytes: bytes of JSON the results of ended tasks may hold in all.
        answer_window: seconds a question of a task waits for the host's ``tasks/update``.
    """

    def __init__(
        self,
        tasks: Sequence[str] = (),
        tasks_required: Sequence[str] = (),
        *,
        ttl_seconds: float = TASK_TTL,
        max_tasks: int = MAX_TASKS,
        max_tasks_per_host: int = MAX_TASKS_PER_HOST,
        max_kept_bytes: int = MAX_KEPT_BYTES,
        answer_window: float = ANSWER_WINDOW,
    ) -> None:
        self._optional = tuple(tasks)
        self._required = tuple(tasks_required)
        self._ttl = required_seconds(ttl_seconds, what="ttl_seconds")
        self._answer_window = required_seconds(answer_window, what="answer_window")
        if isinstance(max_kept_bytes, bool) or not isinstance(max_kept_bytes, int) or max_kept_bytes < 1:
            raise ValueError(f"max_kept_bytes must be a positive number of bytes, not {max_kept_bytes!r}")
        self._max = max_tasks
        self._per_host = max_tasks_per_host
        self._held: collections.Counter[Hashable] = collections.Counter()  # tasks in the table, by host
        self._max_kept = max_kept_bytes
        self._kept: dict[_Task, int] = {}  # ended tasks holding a result, oldest first, and their results' sizes
        self._tasks: dict[str, _Task] = {}
        self._owners = Servings()
        self._mark = secrets.token_hex(6)  # begins every id given here: this process's, not another's

    def running(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Tasks may run within the block (a serving of the server: its lifespan); at its end, those still running
        are cancelled and every task is forgotten."""
        return self._owners.running()

    def __len__(self) -> int:
        return len(self._tasks)

    def support(self, uri: str, definition: ToolDefinition) -> TaskSupport | None:
        """How the tool at ``uri`` is served: as a task when a host asks (``"optional"``), only as one
        (``"required"``), or never (``None``)."""
        if any(fnmatch.fnmatchcase(uri, pattern) for pattern in self._required):
            return "required"
        if any(fnmatch.fnmatchcase(uri, pattern) for pattern in self._optional):
            return "optional"
        listed = definition.metadata.get("task_support")  # what a handshake-era server listed
        if listed in ("optional", "required"):
            return "required" if listed == "required" else "optional"
        return "optional" if definition.metadata.get("server_tasks") else None  # its server decides, call by call

    def follows_backend(self, uri: str, definition: ToolDefinition) -> bool:
        """Whether the host's task of the tool at ``uri`` starts when its backend's does (the backend decides when a
        call of it becomes a task: a 2026-07-28 server that declared the tasks extension, or a tool a handshake-era
        server runs only as a task; and the gateway was not told to run it as a task of its own): see
        :meth:`composed`."""
        globs = (*self._required, *self._optional)
        decides = bool(definition.metadata.get("server_tasks"))  # kavalai.adapters.mcp sets it
        return decides and not any(fnmatch.fnmatchcase(uri, pattern) for pattern in globs)

    def can_start(self, ctx: ServerRequestContext[Any] | None = None) -> bool:
        """Whether a task can be started now for the host of ``ctx``: the server is running, the host is within its
        share of the table and the table is not full, ended tasks forgotten to make room (the host's own first
        ended one when it is at its share, else the first ended of all)."""
        if not self._owners:
            return False
        host = host_of(ctx)
        if self._held[host] >= self._per_host and not self._forget_ended(host):
            return False
        return len(self._tasks) < self._max or self._forget_ended(None)

    def _forget_ended(self, host: Hashable | None) -> bool:
        """Forget the first ended task (of ``host``, or of all): whether there was one."""
        for task in self._tasks.values():
            if task.status in _TERMINAL and (host is None or task.host == host):
                self._drop(task)
                task.kept.cancel()  # its runner ends (it was kept only until its TTL)
                return True
        return False

    def _drop(self, task: _Task) -> None:
        """``task`` leaves the table (forgotten: its id is unknown from now on)."""
        if self._tasks.get(task.task_id) is task:
            del self._tasks[task.task_id]
            self._held[task.host] -= 1
            if not self._held[task.host]:
                del self._held[task.host]
        self._kept.pop(task, None)

    def start(
        self, tool: str, ctx: ServerRequestContext[Any], run: Callable[[RoundsCall], Awaitable[types.CallToolResult]]
    ) -> dict[str, Any]:
        """Start a task running ``run`` (the host's call of ``tool``); the ``CreateTaskResult`` answering the
        host's ``tools/call`` (the task is in the table before it is answered: a ``tasks/get`` right after finds
        it)."""
        task = self._begin(tool, ctx, run)
        task.call.escalated = True  # a task from the host's first request
        return {"resultType": "task", **task.envelope()}

    async def composed(
        self,
        tool: str,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any],
        run: Callable[[RoundsCall], Awaitable[types.CallToolResult]],
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """A round of the host's call of a tool its backend runs as a task of its own (:meth:`follows_backend`):
        what the backend asks before its task exists is put to the host as input-required rounds (``params``
        carry the host's answers from its second round on), and the round in which the backend's task comes to
        exist is answered with the host's task (a ``CreateTaskResult``, minted then, never before); a call the
        backend answers without a task is answered with its result. ``run`` must call
        :meth:`~kavalai.serve._rounds.RoundsCall.escalate` when the backend's task is created
        (:func:`kavalai.adapters.mcp.on_server_task`)."""
        if params.request_state is None:
            task = self._begin(tool, ctx, run)  # in the table (it counts): not found by tasks/* until escalated
        else:
            call = resumed(
                lambda token: self._tasks[token].call if token in self._tasks else None,
                self._mark,
                tool,
                params.request_state,
            )
            call.answer(params.input_responses or {})
            task = self._tasks[call.token]
        call = task.call
        call.ctx = ctx
        call.answering = True
        try:
            outcome = await call.next_round()
        except BaseException:
            call.scope.cancel()  # the host gave up the round's request (or it failed): the call ends with it
            raise
        finally:
            call.answering = False
        if outcome is ESCALATED:
            return {"resultType": "task", **task.envelope()}
        return cast("types.CallToolResult | types.InputRequiredResult", outcome)

    def _begin(
        self, tool: str, ctx: ServerRequestContext[Any], run: Callable[[RoundsCall], Awaitable[types.CallToolResult]]
    ) -> _Task:
        task_id = f"{self._mark}.{secrets.token_urlsafe(24)}"
        call = RoundsCall(task_id, tool, self._answer_window)
        call.ctx = ctx
        expires = anyio.current_time() + self._ttl
        task = _Task(task_id, call, ttl_ms=max(1, round(self._ttl * 1000)), expires=expires, host=host_of(ctx))
        self._tasks[task_id] = task
        self._held[task.host] += 1
        self._owners.start_soon(lambda: self._run(task, run))
        return task

    async def _run(self, task: _Task, run: Callable[[RoundsCall], Awaitable[types.CallToolResult]]) -> None:
        call = task.call
        try:
            call.scope.deadline = task.expires
            with call.scope:
                try:
                    result = await run(call)
                except JsonRpcError as exc:  # the backend answered a protocol error: the task failed
                    call.failed(exc)
                    task.end("failed", error=_error_data(exc.code, str(exc)))
                except MCPError as exc:  # the backend's -32021, as itself (its data kept): the task failed with it
                    call.failed(exc)
                    task.end("failed", error=_error_of(exc))
                except Exception as exc:  # the gateway's own failure: its text stays in the log
                    logger.warning("task %s of %s failed: %s: %s", task.task_id, call.tool, type(exc).__name__, exc)
                    fixed = f"kavalai serve failed internally ({type(exc).__name__})"
                    call.failed(protocol_error(types.INTERNAL_ERROR, fixed))
                    task.end("failed", error=_error_data(types.INTERNAL_ERROR, fixed))
                else:
                    if call.error is not None:  # the host could not answer what the backend asked (-32021)
                        task.end("failed", error=_error_of(call.error))
                    elif call.escalated:
                        self._keep(task, result.model_dump(mode="json", by_alias=True, exclude_none=True))
                    call.ended(result)  # a host's round waiting on a call not yet a task is answered with it
            if not call.escalated:  # never a task: its host's round has the outcome (or gave up); nothing kept
                if call.result is None and call.error is None:
                    call.failed(protocol_error(types.INTERNAL_ERROR, "The request was cancelled."))
                return
            task.end("cancelled")  # cancelled by the host, or its TTL passed while it ran
            call.ctx = None  # the host's request is not held while the ended task is kept
            task.kept.deadline = task.expires
            with task.kept:  # kept, ended, until its TTL passes (or forgotten sooner: _keep)
                await anyio.sleep_forever()
        finally:
            task.end("cancelled")
            self._drop(task)

    def _keep(self, task: _Task, result: dict[str, Any]) -> None:
        """The task completed with ``result``, kept within the table's bytes (the tasks that ended first are
        forgotten first; a result larger than the bound alone fails its task saying so)."""
        size = len(pydantic_core.to_json(result))
        if size > self._max_kept:
            message = (
                f"The result of {task.call.tool} ({size} bytes of JSON) is larger than kavalai serve keeps for a task "
                f"({self._max_kept} bytes): call the tool without a task to receive it"
            )
            task.end("failed", error=_error_data(types.INTERNAL_ERROR, message))
            return
        while self._kept and sum(self._kept.values()) + size > self._max_kept:
            oldest = next(iter(self._kept))
            del self._kept[oldest]
            oldest.kept.cancel()  # forgotten before its TTL: its id is then unknown
        self._kept[task] = size
        task.end("completed", result=result)

    def get(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/get``: the task's state, its result, error or questions inlined."""
        return self._named(ctx, params).detailed()

    def update(self, ctx: ServerRequestContext[Any], params: TaskUpdateParams) -> dict[str, Any]:
        """``tasks/update``: the host's answers go to the questions asked under their keys (others are ignored)."""
        task = self._named(ctx, params)
        waiting = task.call.open_questions() if task.status not in _TERMINAL else {}
        answers: dict[str, Any] = {}
        for key, raw in params.input_responses.items():
            if key not in waiting:
                continue  # asked of no one (or answered already): nothing to deliver
            try:
                answers[key] = _ANSWER.validate_python(raw, by_name=False)
            except ValidationError:
                raise protocol_error(types.INVALID_PARAMS, f"The answer to {key!r} is not an input response") from None
        task.call.answer(answers)
        return {}

    def cancel(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/cancel``: the task's call is cancelled (a task that has ended stays as it ended)."""
        task = self._named(ctx, params)
        task.end("cancelled")
        task.call.scope.cancel()
        return {}

    def _named(self, ctx: ServerRequestContext[Any], params: TaskParams) -> _Task:
        """The task ``params`` name, for a host that declared the extension (else -32021), whose ``Mcp-Name``
        header (when sent) names it too (else -32020)."""
        if not declares_tasks(ctx):
            raise missing_extension(f"{ctx.method} is part of the tasks extension")
        headers = getattr(ctx.request, "headers", None)
        named = headers.get(MCP_NAME_HEADER) if isinstance(headers, Mapping) else None
        if named is not None and decode_header_value(named) != params.task_id:
            raise protocol_error(
                types.HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match the request body's 'taskId' parameter"
            )
        task = self._tasks.get(params.task_id)
        # before it escalated, its id is a round's, not a task's; another principal's task is not found (bound to the
        # authorization context that started it, as the tasks extension asks of a server that authenticates)
        if task is not None and task.call.escalated and _may_reach(task.host, host_of(ctx)):
            return task
        mark, dot, _ = params.task_id.partition(".")
        if dot and mark != self._mark and len(mark) == len(self._mark):
            raise protocol_error(
                types.INVALID_PARAMS,
                "The task belongs to another kavalai serve process (another worker or replica): send a task's "
                "requests to the process that started it (sticky routing)",
            )
        raise protocol_error(types.INVALID_PARAMS, "Unknown or expired taskId")


def missing_extension(why: str) -> Exception:
    """The error of a request that needs the tasks extension from a host that did not declare it (-32021, its data
    naming the extension)."""
    data: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    return protocol_error(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{why}: declare the client capability extensions[{EXTENSION!r}]",
        data,
    )


def _error_data(code: int, message: str) -> dict[str, Any]:
    """A task's error, worded by the one error wording (the secret gate with it)."""
    return _error_of(protocol_error(code, message))


def _error_of(error: Exception) -> dict[str, Any]:
    found = getattr(error, "error", None)
    if isinstance(found, types.ErrorData):
        return found.model_dump(mode="json", by_alias=True, exclude_none=True)
    return protocol_error(types.INTERNAL_ERROR, str(error)).error.model_dump(mode="json", exclude_none=True)
