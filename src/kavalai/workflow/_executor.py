"""One run of a workflow: walks the graph, enforces the limits, records the trace and reports events.

The main path and every parallel branch are walked by the same loop (:meth:`Execution._walk`); a parallel node
runs its branches in a task group and joins them. Events are handed to an ``emit`` callback the moment they
happen, so a streaming consumer sees branch nodes start and finish while the branches run.

What a visit costs besides the node's own work is kept to what the run records (``bench/scale.py`` measures it
against a direct ``call_tool``): events are built only when someone streams them, spans only when a tracer
provider is set, and a cancel scope only around a node (or a run) that has a timeout.
"""

from __future__ import annotations

import collections
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import anyio

from kavalai.durable import current_run
from kavalai.errors import FunctionKernelException
from kavalai.kernel import deadline
from kavalai.tracing import annotate, span, tracing_configured
from kavalai.workflow._graph import Workflow
from kavalai.workflow._ledger import RunLedger
from kavalai.workflow._nodes import EndNode, FunctionNode, IfNode, NodeBase, ParallelNode, SwitchNode
from kavalai.workflow._result import (
    NodeFailed,
    NodeFinished,
    NodeProgress,
    NodeStarted,
    NodeTrace,
    RunFinished,
    RunResult,
    RunStarted,
    RunStatus,
    WorkflowEvent,
    jsonable,
)
from kavalai.workflow._runners import (
    NodeEnv,
    Outcome,
    call_function,
    context_and_json,
    resolved_now,
    run_function,
    run_simple_node,
    to_context,
    tool_failure,
)
from kavalai.workflow._sizes import max_size, size_limit
from kavalai.workflow.errors import (
    NodeError,
    NodeTimeoutError,
    RunTimeoutError,
    VisitLimitError,
    WorkflowError,
    failure_text,
)

if TYPE_CHECKING:
    from kavalai import FunctionKernel
    from kavalai.agent.budget import OutputBudget
    from kavalai.llm.base import LLMClient


def _is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic turned into Python by pyo3 (pydantic-core's, at one of its limits): a
    ``BaseException`` named ``PanicException``, whose class pyo3 makes at run time (nothing to import)."""
    return type(exc).__name__ == "PanicException"


__all__ = ["Emit", "Execution", "new_run_id"]

LlmResolver = Callable[[str | None, str], Awaitable["LLMClient"]]
#: Receives every event of a run as it happens; must not block.
Emit = Callable[[WorkflowEvent], None]

_new_record: Final = object.__new__
_CANCELLED = "cancelled before it finished: another branch failed or a timeout ran out"
_now = time.monotonic  # anyio.current_time() on asyncio, without its backend look-up
_BRANCHING = (IfNode, SwitchNode)  # a tuple made once: `IfNode | SwitchNode` builds a union at every visit
#: Per node class: (is a parallel node, is a branching node, is an end node). Read by exact class: isinstance() of
#: a node class is an ABC check (pydantic's model metaclass), a few of them at every visit of a start or end node.
_roles: dict[type, tuple[bool, bool, bool]] = {}


def _role(node: NodeBase) -> tuple[bool, bool, bool]:
    kind = type(node)
    role = _roles.get(kind)
    if role is None:
        role = _roles[kind] = (issubclass(kind, ParallelNode), issubclass(kind, _BRANCHING), issubclass(kind, EndNode))
    return role


def _ignore(event: WorkflowEvent) -> None:
    """The ``emit`` of a run nobody streams."""


def new_run_id() -> str:
    """A new run's id: a random (version 4) UUID as 32 hex digits, what ``uuid.uuid4().hex`` gives, without making
    the ``UUID`` object (which cost more than half of what making the id costs, once a run).

    The random bytes are read from the operating system (``os.urandom``) for :data:`_IDS_AT_ONCE` ids at a time: a
    system call a run cost as much as a tenth of a ten-node run on a machine whose system calls are slow. A child
    process forgets the ids its parent read (``os.register_at_fork``), so no two processes hand out the same."""
    try:
        return _ids.pop()
    except IndexError:
        # the version (4) and the variant (RFC 4122) bits of every id set at once, on the bytes as one integer
        raw = int.from_bytes(os.urandom(_READ), "big") & _KEEP | _SET
        ids = raw.to_bytes(_READ, "big").hex()
        _ids.extend([ids[start : start + 32] for start in range(32, 2 * _READ, 32)])
        return ids[:32]


_IDS_AT_ONCE: Final = 64
_READ: Final = 16 * _IDS_AT_ONCE
# Byte 6 of each id keeps its low four bits and gets the version 4; byte 8 keeps its low six and gets the variant.
_KEEP: Final = int.from_bytes(bytes(0x0F if i % 16 == 6 else 0x3F if i % 16 == 8 else 0xFF for i in range(_READ)))
_SET: Final = int.from_bytes(bytes(0x40 if i % 16 == 6 else 0x80 if i % 16 == 8 else 0 for i in range(_READ)))
# Ids read ahead; deque's pop() and extend() are atomic, so runs on several threads never share one.
_ids: collections.deque[str] = collections.deque()
if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_ids.clear)


class Execution:
    """The state of one run: its context values, trace, visit counts and the events it reports."""

    def __init__(
        self,
        workflow: Workflow,
        kernel: FunctionKernel,
        llm_for: LlmResolver,
        run_input: Any,
        *,
        max_visits: int,
        timeout: float | None,
        emit: Emit | None = None,
        run_id: str | None = None,
        budget: OutputBudget | None = None,
    ) -> None:
        self.workflow = workflow
        self.budget = budget
        self.kernel = kernel
        self.llm_for = llm_for
        self.run_id = run_id or new_run_id()
        self.values: dict[str, Any] = {"input": run_input}
        self.trace: list[NodeTrace] = []
        self.max_visits = max_visits
        self.timeout = timeout
        self._emit = emit or _ignore
        self._streamed = emit is not None  # events are built only for someone who receives them
        self._visits = 0
        self._per_node: dict[str, int] = {}
        self._main: NodeTrace | None = None  # the record of the main-path node running now
        self._traced = False
        self._ledger = RunLedger(workflow.max_value_size)
        self._epoch = 0.0  # the epoch seconds at clock 0 (set when the run starts)

    async def run(self) -> RunResult:
        """Run the workflow; emit every event, :class:`RunFinished` last; return the result (never raise it)."""
        clock, epoch = _now(), time.time()
        self._epoch = epoch - clock  # a visit began at this plus the clock then, in epoch seconds
        # RunResult(run_id, workflow, status, started_at, output, error, trace): by position, as NodeTrace's
        result = RunResult(
            self.run_id,
            self.workflow.name,
            RunStatus.SUCCEEDED,
            epoch,  # type: ignore[arg-type]  # epoch seconds, read as a datetime (RunResult.started_at)
            None,
            None,
            self.trace,
        )
        if self._streamed:
            run_input = jsonable(self.values["input"])
            self._emit(RunStarted(run_id=self.run_id, workflow=self.workflow.name, input=run_input))
        env = self._env()
        self._traced = tracing_configured()  # spans per node only when someone records them
        limit = self.workflow.max_value_size
        try:
            if self._traced or self.budget is not None or limit != max_size():
                with (
                    size_limit(limit),
                    self._span(f"workflow {self.workflow.name}", "kavalai.workflow.name", self.workflow.name),
                    self._artifact_scope(),
                ):
                    result.output = await self._walk_main(env)
            else:  # the usual run: its size limit already in force, no span, no artifact scope, not even empty ones
                result.output = await self._walk_main(env)
        except WorkflowError as exc:
            result.status = RunStatus.TIMED_OUT if isinstance(exc, RunTimeoutError) else RunStatus.FAILED
            result.output = None
            result.error = exc
        except BaseException as exc:  # MemoryError, or pydantic-core's PanicException: a failed run, never raised
            if not isinstance(exc, Exception) and not _is_panic(exc):
                raise  # a cancel, an exit, a process dying: not the run's failure
            result.status, result.output = RunStatus.FAILED, None
            result.error = WorkflowError(f"The run of workflow {self.workflow.name!r} failed: {type(exc).__name__}")
        result.duration = _now() - clock
        if self._streamed:
            self._emit(RunFinished(run_id=self.run_id, result=result))
        return result

    def _walk_main(self, env: NodeEnv) -> Awaitable[Any]:
        """The walk of the main path (under the run's deadline when it has one): the coroutine itself."""
        if self.timeout is None:
            return self._walk(self.workflow.start, env, branch=None)
        return self._walk_within(self.timeout, env)

    def _span(self, name: str, key: str, value: str) -> contextlib.AbstractContextManager[Any]:
        if not self._traced:
            return contextlib.nullcontext()
        attributes = {key: value}
        if key == "kavalai.workflow.name":
            attributes["kavalai.workflow.run_id"] = self.run_id
        return span(name, attributes)

    # -------------------------------------------------------------------------------------------- visiting

    def _artifact_scope(self) -> contextlib.AbstractContextManager[None]:
        """The run's artifact scope: what its model nodes keep as artifacts, its agent nodes may read."""
        if self.budget is None:
            return contextlib.nullcontext()
        from kavalai.agent.budget import run_scope

        return run_scope()

    def _env(self) -> NodeEnv:
        # NodeEnv(workflow, kernel, values, llm_for, previous, budget, progress, durable): by position (once a run)
        progress = self._progress if self._streamed else None
        return NodeEnv(
            self.workflow,
            self.kernel,
            self.values,
            self.llm_for,
            None,
            self.budget,
            progress,
            current_run() is not None,
        )

    def _progress(self, node: str, progress: float, total: float | None, message: str | None) -> None:
        self._emit(NodeProgress(self.run_id, node, progress, total, message))

    async def _walk(self, head: str, env: NodeEnv, *, branch: str | None) -> Any:
        """Visit nodes from ``head`` along ``next`` until a node has none; return the last node's output."""
        current: str | None = head
        output: Any = None
        nodes, kinds, values, ledger = self.workflow.nodes, self.workflow.kinds, self.values, self._ledger
        calls = self.workflow.calls if not self._traced else {}  # function nodes called straight: the common case
        kernel = self.kernel
        plain = env.progress is None and not env.durable  # a plain node's one call needs no options
        per_node, trace = self._per_node, self.trace
        while current is not None:
            node_id = current
            node = nodes[node_id]
            clock = _now()
            self._visits += 1
            if self._visits > self.max_visits:
                raise self._visit_limit(node_id)
            visit = per_node[node_id] = per_node.get(node_id, 0) + 1
            # NodeTrace(...)'s stores without type.__call__ nor __init__'s frame (half the record's making, once a
            # node): every field (tests/workflow/test_nodes.py checks the list); the start in epoch seconds, which the
            # record makes a datetime of when it is read (NodeTrace.started_at).
            kind = kinds[node_id]
            record = _new_record(NodeTrace)
            record.node = node_id
            record.kind = kind
            record.visit = visit
            record.started_at = self._epoch + clock  # type: ignore[assignment]  # epoch seconds, read as a datetime
            record.duration = 0.0
            record.status = "succeeded"
            record.inputs = record.output = record.next = record.error = None
            record.attempts = 1
            record.branch = branch
            record.tool_calls = []
            if branch is None:
                self._main = record
            if self._streamed:
                self._emit(NodeStarted(self.run_id, node_id, kind, visit, branch))
            try:
                call = calls.get(node_id)  # a function node (with no span to open): no coroutine in between
                if call is not None:
                    read = resolved_now(values, call[3])
                    arguments, inputs_size = read
                    try:
                        if arguments is not None and call[2] and plain:  # one attempt, no options: the usual node
                            # call_function's work without its coroutine: the inputs' copy is their JSON form when
                            # they are plain values (their size known), and the tool's failure names the node
                            record.inputs = arguments.copy() if inputs_size >= 0 else jsonable(arguments)
                            try:
                                output = await kernel.call_tool(call[0], arguments)
                            except FunctionKernelException as exc:
                                raise tool_failure(node, exc, 1) from exc  # type: ignore[arg-type]
                        else:
                            output, inputs_size = await call_function(node, env, record, call, read)  # type: ignore[arg-type]
                    except WorkflowError:
                        raise
                    except Exception as exc:
                        raise _node_error(node, exc) from exc
                    current = call[1]
                    context, record.output, size = context_and_json(output)
                    values[node_id] = context
                    if size >= 0 and inputs_size >= 0:  # a flat output and flat inputs (the usual): sizes known
                        ledger.hold_visit(node_id, context, record, size, size + inputs_size)
                    else:
                        ledger.hold(node_id, context, size)
                        ledger.record(record, inputs_size)
                    previous = context
                else:
                    output, current = await self._visit(node, env, record)
                    record.output = jsonable(output)
                    _, branching, end = _role(node)
                    # a branching node passes on what came before it; an end node its output; any other the
                    # context form _visit stored (a model dumped once, not once more here)
                    previous = env.previous if branching else to_context(output) if end else values[node_id]
            except anyio.get_cancelled_exc_class():
                self._close(record, clock, error=_CANCELLED)
                raise
            except WorkflowError as exc:
                self._close(record, clock, error=str(exc))
                self._emit(NodeFailed(self.run_id, record, exc))
                raise
            record.next, record.duration = current, _now() - clock
            if call is None:  # a function node's values were counted as they were stored
                ledger.record(record)
            trace.append(record)
            if self._streamed:
                self._emit(NodeFinished(self.run_id, record))
            env.previous = previous
        return output

    def _visit_limit(self, node: str) -> VisitLimitError:
        return VisitLimitError(
            f"The run reached its limit of {self.max_visits} node visits at node {node!r}; a loop "
            "probably never takes its exit. Raise max_visits if the workflow really needs more.",
            node=node,
            limit=self.max_visits,
        )

    def _close(self, record: NodeTrace, clock: float, *, error: str | None = None) -> None:
        record.duration = _now() - clock
        if error is not None:
            record.status = "failed"
            record.error = error
        self._ledger.record(record)
        self.trace.append(record)

    async def _walk_within(self, seconds: float, env: NodeEnv) -> Any:
        """The walk under the run's deadline, which the tool calls of its nodes inherit: when it passes, the call
        running is cut and the run ends timed out, whatever error the cut made on its way up."""
        scope = deadline(seconds, what=f"run of workflow {self.workflow.name!r}")
        try:
            with scope:
                return await self._walk(self.workflow.start, env, branch=None)
        except Exception as exc:
            # cut by the deadline, or stopped by it in a thread the cut could not reach (a metered evaluation)
            if scope.expired or (scope.deadline is not None and _now() >= scope.deadline):
                raise self._run_timed_out() from exc
            raise

    def _run_timed_out(self) -> RunTimeoutError:
        record = self._main
        node = record.node if record is not None else None
        error = RunTimeoutError(
            f"The run timed out after {self.timeout:g} s while node {node!r} was running.",
            node=node,
            timeout=self.timeout or 0.0,
        )
        if record is not None:
            record.error = str(error)
            self._emit(NodeFailed(self.run_id, record, error))
        return error

    async def _visit(self, node: NodeBase, env: NodeEnv, record: NodeTrace) -> Outcome:
        # A function node applies its timeout to each attempt through the kernel, so retries stay possible.
        # Read from the fields (__dict__): getattr() of a field a node kind lacks is a costly pydantic miss.
        timeout = None if type(node) is FunctionNode else node.__dict__.get("timeout")
        outcome: Outcome | None = None
        try:
            if timeout is None and not self._traced:
                outcome = await self._start(node, env, record)
            else:
                with self._span(f"workflow.node {node.id}", "kavalai.workflow.node", node.id) as current:
                    annotate(current, {"kavalai.workflow.node_kind": record.kind})
                    if timeout is None:
                        outcome = await self._start(node, env, record)
                    else:
                        with anyio.move_on_after(timeout):
                            outcome = await self._start(node, env, record)
        except WorkflowError:
            raise
        except Exception as exc:
            raise _node_error(node, exc) from exc
        if outcome is None:
            raise NodeTimeoutError(
                f"Node {node.id!r} did not finish within its timeout of {timeout:g} s.",
                node=node.id,
                timeout=timeout or 0.0,
            )
        if not _role(node)[2]:  # not an end node
            self.values[node.id] = context = to_context(outcome[0])
            self._ledger.hold(node.id, context)
        return outcome

    def _start(self, node: NodeBase, env: NodeEnv, record: NodeTrace) -> Awaitable[Outcome]:
        # The node's coroutine itself, awaited by _visit: no coroutine of its own in between.
        if type(node) is FunctionNode:  # the common kind, straight to its runner
            return run_function(node, env, record)
        if _role(node)[0] and isinstance(node, ParallelNode):
            return self._parallel(node, record)
        return run_simple_node(node, env, record)

    # -------------------------------------------------------------------------------------------- parallel

    async def _parallel(self, node: ParallelNode, record: NodeTrace) -> Outcome:
        outputs: dict[str, Any] = {}
        failures: list[WorkflowError] = []
        record.inputs = {"branches": list(node.branches)}

        async def branch(head: str, scope: anyio.CancelScope) -> None:
            env = self._env()
            try:
                await self._walk(head, env, branch=f"{node.id}.{head}")
            except WorkflowError as exc:
                failures.append(exc)
                scope.cancel()
            else:
                outputs[head] = env.previous

        if current_run() is not None:
            # In a durable run the branches run one after another, so that every step has the same position in
            # every attempt of the run (concurrent branches would take positions in the order their calls end).
            with anyio.CancelScope() as scope:
                for head in node.branches:
                    await branch(head, scope)
                    if failures:
                        break
        else:
            async with anyio.create_task_group() as group:
                for head in node.branches:
                    group.start_soon(branch, head, group.cancel_scope)
        if failures:
            raise failures[0]
        return {head: outputs.get(head) for head in node.branches}, node.next


def _node_error(node: NodeBase, exc: Exception) -> NodeError:
    """The :class:`NodeError`, naming the node, that a failure other than a workflow error becomes."""
    if isinstance(exc, FunctionKernelException):
        return NodeError(f"Node {node.id!r}: {exc.message}", node=node.id, uri=exc.uri)
    return NodeError(f"Node {node.id!r} failed: {failure_text(exc)}", node=node.id)
