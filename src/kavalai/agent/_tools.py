"""Running the tool calls of one step: allow-list, approval, the kernel call, and the result sent back.

The calls of a step run concurrently. Every failure the model can act on (a kernel error, a tool outside the
allowed set, a refused approval, arguments that were not JSON) becomes an error tool result; anything else
(a bug in a hook, cancellation) propagates.
"""

from __future__ import annotations

import difflib
import fnmatch
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio
from pydantic_core import to_jsonable_python

from kavalai import FunctionKernel
from kavalai.agent._approval import Approval, ApprovalHook, OutsideApproval
from kavalai.agent._events import AgentEvent, ToolCallFinished, ToolCallStarted, ToolProgress
from kavalai.agent._result import ToolCallRecord
from kavalai.agent.budget import READ_ARTIFACT, OutputBudget, model_description, model_text
from kavalai.agent.code_mode import RUN_PYTHON, CodeMode, CodeModeError, function_names
from kavalai.agent.elicitation import recording_in_run
from kavalai.agent.resources import READ_RESOURCE, read_resource_result
from kavalai.agent.search import SEARCH_HINT, SEARCH_TOOLS, ToolSearch, model_result
from kavalai.durable import approval_answer, call_options, current_run, guarded, tool_gone
from kavalai.durable import step as durable_step
from kavalai.errors import (
    FunctionKernelException,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolOutputError,
    ToolTimeoutError,
)
from kavalai.llm.messages import ToolCall, ToolResultMessage, ToolSpec
from kavalai.llm.names import provider_name

__all__ = ["ToolRunner", "approval_step"]

_MAX_ERROR_CHARS: Final = 2000
#: Room for the hint that follows an error's message: error results are cut at the sum, whatever the budget.
_MAX_HINT_CHARS: Final = 200
#: The tools kavalai answers itself: their results are bounded even when no output budget is set.
_OURS: Final = frozenset({SEARCH_TOOLS, READ_RESOURCE, RUN_PYTHON, READ_ARTIFACT})
_HINTS: tuple[tuple[type[FunctionKernelException], str], ...] = (
    (ToolInputError, "Fix the arguments to match the tool's schema and call it again."),
    (ToolTimeoutError, "Try again with a smaller request, or continue without this result."),
    (ToolOutputError, "The tool misbehaved; try other arguments or another tool."),
    (ToolExecutionError, "Check the arguments, or try another approach."),
    (ToolNotFoundError, "Call only the tools you were given."),
)


@dataclass(frozen=True, slots=True)
class _Outcome:
    status: Literal["ok", "error", "denied"]
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None
    error_type: str | None = None
    edited: bool = False


class ToolRunner:
    """Runs one step's tool calls through the kernel for an agent run.

    Args:
        kernel: the kernel that runs the tools, or ``None`` for an agent without tools.
        allowed: the URIs offered to the model this run; calls to anything else are refused.
        approve: the approval hook, or ``None``.
        require_approval: URIs and globs that need approval; ``None`` means every tool.
        emit: reports events to the agent's observer.
        budget: how much of each result reaches the model (see :mod:`kavalai.agent.budget`), or ``None``.
        search: the index that answers ``search_tools`` calls (see :mod:`kavalai.agent.search`), or ``None``.
        code_mode: runs ``run_python`` snippets (see :mod:`kavalai.agent.code_mode`), or ``None``.
        wrapped: the URIs whose output model wraps a bare value as ``{"result": ...}``.
        resources: the MCP servers whose resources ``read_resource`` may read.
        sequential: run a step's calls one after another, in order (a durable run: each call's step position is
            then the same in every attempt), instead of concurrently.
    """

    @property
    def search_hint(self) -> str | None:
        """What the first request tells the model about searching, when it searches."""
        return SEARCH_HINT if self._search is not None else None

    def offer(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """``specs`` with the tools searches found since, appended in the order found (the start stays the same,
        so a provider's prompt cache holds)."""
        if self._search is None:
            return specs
        offered = {spec.name for spec in specs}
        added = [name for name in self._found if name not in offered]
        if not added:
            return specs
        return [
            *specs,
            *(ToolSpec.from_description(model_description(self._search.description(name))) for name in added),
        ]

    def __init__(
        self,
        kernel: FunctionKernel | None,
        allowed: Collection[str],
        *,
        approve: ApprovalHook | None,
        require_approval: Sequence[str] | None,
        emit: Callable[[AgentEvent], Awaitable[None]],
        budget: OutputBudget | None = None,
        search: ToolSearch | None = None,
        code_mode: CodeMode | None = None,
        wrapped: Collection[str] = (),
        resources: Collection[str] = (),
        sequential: bool = False,
        report_progress: bool = False,
    ) -> None:
        self._sequential = sequential
        self._report_progress = report_progress  # someone observes the run: tools' progress becomes events
        self._kernel = kernel
        self._budget = budget
        self._search = search
        self._code_mode = code_mode
        self._wrapped = frozenset(wrapped)  # tools whose output is {"result": value}: code mode returns the value
        self._resources = frozenset(resources)  # MCP servers whose resources read_resource may read
        self._step = 0
        self.inner_records: list[ToolCallRecord] = []  # the calls a code-mode snippet made, for the trace
        self._found: list[str] = []  # tools a search found, in the order found
        self._reads_artifacts = budget is not None and budget.overflow == "artifact"
        self._allowed = frozenset(allowed)
        self._approve = approve
        self._require = None if require_approval is None else tuple(require_approval)
        self._emit = emit

    async def run_step(self, step: int, calls: Sequence[ToolCall]) -> list[tuple[ToolResultMessage, ToolCallRecord]]:
        """Run ``calls`` concurrently; return their results and trace records in the order of ``calls``.

        A failing approval hook does not stop the other calls: they finish, and :class:`HookFailures` (raised
        afterwards) carries their results and every hook error.
        """
        self._step = step
        slots: list[tuple[ToolResultMessage, ToolCallRecord] | None] = [None] * len(calls)
        hook_errors: list[BaseException] = []

        async def run_one(index: int, call: ToolCall) -> None:
            try:
                slots[index] = await self._run_call(step, call)
            except _HookFailed as failed:
                hook_errors.append(failed.error)

        try:
            if self._sequential:
                for index, call in enumerate(calls):
                    await run_one(index, call)
            else:
                async with anyio.create_task_group() as group:
                    for index, call in enumerate(calls):
                        group.start_soon(run_one, index, call)
        except BaseExceptionGroup as group_error:
            # A failing observer is the caller's error: raise it as itself, not wrapped in a group.
            if len(group_error.exceptions) == 1:
                raise group_error.exceptions[0] from None
            raise
        done = [slot for slot in slots if slot is not None]
        if hook_errors:
            raise HookFailures(hook_errors, done)
        return done

    async def _run_call(self, step: int, call: ToolCall) -> tuple[ToolResultMessage, ToolCallRecord]:
        await self._emit(ToolCallStarted(step=step, call=call))
        started = time.perf_counter()
        outcome = await self._outcome(call)
        record = ToolCallRecord(
            step=step,
            call_id=call.id,
            uri=call.name,
            arguments=outcome.arguments,
            status=outcome.status,
            result=outcome.result,
            error=outcome.error,
            error_type=outcome.error_type,
            duration=time.perf_counter() - started,
            edited=outcome.edited,
        )
        await self._emit(ToolCallFinished(step=step, record=record))
        content = await self._model_text(call.name, outcome)
        message = ToolResultMessage(
            tool_call_id=call.id, name=call.name, content=content, is_error=outcome.status != "ok"
        )
        return message, record

    async def _model_text(self, name: str, outcome: _Outcome) -> str:
        """The text the model reads of ``outcome``: every tool result message crosses the model-facing gate
        (:func:`~kavalai.agent.budget.model_text`) here, errors and kavalai's own tools included."""
        if outcome.status != "ok":
            error = outcome.error or "The call failed."
            return model_text(self._budget, name, error, ours=True, limit=_MAX_ERROR_CHARS + _MAX_HINT_CHARS)
        content = json.dumps(outcome.result, ensure_ascii=False, separators=(",", ":"))
        if name == READ_ARTIFACT and self._reads_artifacts:
            return content  # a page of at most the budget, which budget.read() cut already
        if self._budget is not None:
            return await self._budget.fit(name, content)  # cut, or kept as an artifact the model reads on
        return model_text(None, name, content, ours=name in _OURS)

    async def _outcome(self, call: ToolCall) -> _Outcome:
        arguments = call.arguments
        if call.name == READ_RESOURCE and self._resources and self._kernel is not None:
            if arguments.get("server") not in self._resources:
                shown = ", ".join(sorted(self._resources))
                return _error(arguments, "ToolInputError", f"read_resource reads the resources of: {shown}.")
            try:
                return _Outcome("ok", arguments, result=await read_resource_result(self._kernel, arguments))
            except FunctionKernelException as exc:
                return _error(arguments, type(exc).__name__, _error_message(exc))
        if call.name == RUN_PYTHON and self._code_mode is not None:
            return await self._run_snippet(call, self._code_mode)
        if call.name == SEARCH_TOOLS and self._search is not None:
            query = arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                return _error(arguments, "ToolInputError", "Give search_tools a query: what the tool should do.")
            seen = () if arguments.get("show_seen") is True else self._found
            found = await self._search.asearch(query, exclude=frozenset(seen))
            self._found.extend(item["name"] for item in found if item["name"] not in self._found)
            return _Outcome("ok", arguments, result=model_result(found))
        if call.name == READ_ARTIFACT and self._reads_artifacts and self._budget is not None:
            try:
                return _Outcome("ok", arguments, result=await self._budget.read(arguments))
            except ToolInputError as exc:  # a bad handle: its message is short and quotes little of it
                return _error(arguments, "ToolInputError", exc.message)
        if call.name not in self._allowed or self._kernel is None:
            return _denied(arguments, self._unavailable(call.name))
        if call.arguments_error is not None:
            return _error(
                arguments,
                "ToolInputError",
                f"Your arguments were not a JSON object ({call.arguments_error}). Send them again as a JSON object.",
            )
        edited = False
        if self._approve is not None and self._needs_approval(call.name):
            try:
                decision = await _decide(self._approve, call)
            except Exception as exc:
                raise _HookFailed(exc) from exc
            if decision.action == "deny":
                reason = decision.reason or "not approved"
                return _denied(arguments, f"The call to {call.name} was refused: {reason}. Do not retry it as is.")
            if decision.action == "edit":
                arguments, edited = decision.arguments, True
        progress = self._progress(call) if self._report_progress else None
        try:
            with recording_in_run():  # a durable run keeps the answers to servers' input requests
                output = await self._kernel.call_tool(call.name, arguments, progress=progress, **call_options())
        except FunctionKernelException as exc:
            # a tool of the run's recorded tool list gone from the kernel here: the durable run stops, resumable
            refused = tool_gone(call.name, exc.message) if isinstance(exc, ToolNotFoundError) else None
            if refused is not None:
                raise refused from None
            return _Outcome("error", arguments, error=_error_message(exc), error_type=type(exc).__name__, edited=edited)
        try:
            # fallback=str: a Python tool may return objects JSON cannot describe; the model gets their text.
            result = to_jsonable_python(output, by_alias=True, fallback=str)
            json.dumps(result, ensure_ascii=False)  # what _run_call sends: checked here, where it can be an error
        except (ValueError, TypeError, RecursionError) as exc:  # a cycle, a structure nested too deeply, ...
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
            message = f"The result of {call.name} could not be written as JSON for you ({reason})."
            return _Outcome("error", arguments, error=message, error_type="ToolOutputError", edited=edited)
        return _Outcome("ok", arguments, result=result, edited=edited)

    def _progress(self, call: ToolCall) -> Callable[[float, float | None, str | None], Awaitable[None]]:
        """The progress callback of one call: each report becomes a ``ToolProgress`` event."""
        step = self._step

        async def report(progress: float, total: float | None, message: str | None) -> None:
            await self._emit(ToolProgress(step=step, call=call, progress=progress, total=total, message=message))

        return report

    async def _run_snippet(self, call: ToolCall, mode: CodeMode) -> _Outcome:
        arguments = call.arguments
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return _error(arguments, "ToolInputError", "Give run_python the Python snippet to run as 'code'.")
        names = function_names(sorted(self._allowed - {RUN_PYTHON}))
        functions = {name: self._inner_tool(call.id, uri) for uri, name in names.items()}
        try:
            result = await mode.run(code, functions)
        except CodeModeError as exc:
            printed = f" It printed before failing:\n{exc.output}" if exc.output else ""
            return _error(arguments, "CodeError", f"The snippet failed: {exc}.{printed}")
        return _Outcome("ok", arguments, result=to_jsonable_python(result, fallback=str))

    def _inner_tool(self, parent: str, uri: str) -> Callable[..., Awaitable[Any]]:
        """A tool as a code-mode snippet calls it: through this runner (allowed tools, approval), recorded."""
        count = [0]

        async def call(**kwargs: Any) -> Any:
            count[0] += 1
            inner = ToolCall(id=f"{parent}.{uri}.{count[0]}", name=uri, arguments=kwargs)
            _message, record = await self._run_call(self._step, inner)
            self.inner_records.append(record)
            if record.status != "ok":
                raise RuntimeError(record.error or f"{uri} failed")
            value = record.result
            if uri in self._wrapped and isinstance(value, dict) and set(value) == {"result"}:
                return value["result"]
            return value

        return call

    def _unavailable(self, name: str) -> str:
        message = f"Tool {name!r} is not available to you."
        by_name = {provider_name(uri): uri for uri in self._allowed}
        close = difflib.get_close_matches(provider_name(name), list(by_name), n=1, cutoff=0.85)
        if close:
            message += f" Did you mean {by_name[close[0]]}?"
        return f"{message} Call only the tools you were given."

    def _needs_approval(self, uri: str) -> bool:
        if self._require is None:
            return True
        return any(fnmatch.fnmatchcase(uri, pattern) for pattern in self._require)


class _HookFailed(Exception):
    """The approval hook failed for one call (carried out of the call's task without cancelling the others)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class HookFailures(Exception):
    """Raised by :meth:`ToolRunner.run_step` when approval hooks failed: the hook errors and the completed calls."""

    def __init__(self, errors: list[BaseException], done: list[tuple[ToolResultMessage, ToolCallRecord]]) -> None:
        super().__init__(f"{len(errors)} approval hook call(s) failed")
        self.errors = errors
        self.done = done


async def _decide(approve: ApprovalHook, call: ToolCall) -> Approval:
    """The hook's decision; in a durable run a journaled step, so a resumed run does not ask again."""
    if isinstance(approve, OutsideApproval):
        return await _wait_outside(approve, call)
    return await durable_step(
        f"approval {call.name}",
        lambda: _ask(approve, call),
        dump=_dump_approval,
        load=_approval,
        request=lambda: {"kind": "approval", "call": call.model_dump(mode="json")},
    )


async def approval_step(approve: ApprovalHook, request: Mapping[str, Any]) -> Any:
    """An approval step redone from its request (see :meth:`Agent.execute_step`): the decision as journaled."""
    call = ToolCall.model_validate(request["call"])
    return await guarded(lambda: _ask(approve, call), _dump_approval)


async def _wait_outside(approve: OutsideApproval, call: ToolCall) -> Approval:
    run = current_run()
    if run is None:
        return approve(call)  # raises, saying a durable run is needed
    question = {"tool": call.name, "arguments": call.arguments}
    answer = await run.wait_for_answer("approval", question, timeout=approve.timeout)
    return approve.on_timeout if answer is None else _approval(approval_answer(answer))


def _dump_approval(decision: Approval) -> dict[str, Any]:
    return {"action": decision.action, "reason": decision.reason, "arguments": decision.arguments}


def _approval(data: Any) -> Approval:
    action = data.get("action") if isinstance(data, dict) else None
    if action not in ("allow", "deny", "edit"):
        raise ValueError(f"The journaled approval {data!r} is not an allow, deny or edit decision.")
    return Approval(action, reason=data.get("reason"), arguments=dict(data.get("arguments") or {}))


async def _ask(approve: ApprovalHook, call: ToolCall) -> Approval:
    decision = approve(call)
    if inspect.isawaitable(decision):
        decision = await decision
    if isinstance(decision, bool):
        return Approval.allow() if decision else Approval.deny()
    if not isinstance(decision, Approval):
        raise TypeError(
            f"The approval hook returned {decision!r} for {call.name}; return an Approval "
            "(Approval.allow(), Approval.deny(reason), Approval.edit(arguments)) or a bool."
        )
    return decision


def _denied(arguments: dict[str, Any], message: str) -> _Outcome:
    return _Outcome("denied", arguments, error=message, error_type="ToolAccessDeniedError")


def _error(arguments: dict[str, Any], error_type: str, message: str) -> _Outcome:
    return _Outcome("error", arguments, error=message, error_type=error_type)


def _error_message(exc: FunctionKernelException) -> str:
    """The error as the model reads it: the kernel's message (bounded, it may quote a whole body) and a hint."""
    message = exc.message
    if len(message) > _MAX_ERROR_CHARS:
        message = f"{message[: _MAX_ERROR_CHARS - 3]}..."
    elif not message.endswith((".", "!", "?")):
        message = f"{message}."
    for cls, hint in _HINTS:
        if isinstance(exc, cls):
            return f"{message} {hint}"
    return message
