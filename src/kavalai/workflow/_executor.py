"""One run of a workflow: walks the graph, enforces the limits, records the trace and produces events.

The run is an async generator of events that never holds a cancel scope or task group across a ``yield``, so a
consumer may stop iterating at any point. Each node visit is awaited inside the run's deadline scope; a parallel
node runs its branches in a task group that closes before the branches' events are yielded.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from kavalai.errors import FunctionKernelException
from kavalai.workflow._graph import Workflow
from kavalai.workflow._nodes import EndNode, IfNode, NodeBase, ParallelNode, SwitchNode
from kavalai.workflow._result import (
    NodeFailed,
    NodeFinished,
    NodeStarted,
    NodeTrace,
    RunFinished,
    RunResult,
    RunStarted,
    RunStatus,
    WorkflowEvent,
    jsonable,
)
from kavalai.workflow._runners import NodeEnv, run_simple_node, to_context
from kavalai.workflow.errors import (
    NodeError,
    NodeTimeoutError,
    RunTimeoutError,
    VisitLimitError,
    WorkflowError,
)

if TYPE_CHECKING:
    from kavalai.kernel import FunctionKernel
    from kavalai.llm.base import LLMClient

__all__ = ["Execution"]

LlmResolver = Callable[[str | None, str], Awaitable["LLMClient"]]


_CANCELLED = "cancelled before it finished: another branch failed or a timeout ran out"


class Execution:
    """The state of one run: its context values, trace, visit counts and deadline."""

    def __init__(
        self,
        workflow: Workflow,
        kernel: FunctionKernel,
        llm_for: LlmResolver,
        run_input: Any,
        *,
        max_visits: int,
        timeout: float | None,
    ) -> None:
        self.workflow = workflow
        self.kernel = kernel
        self.llm_for = llm_for
        self.run_id = uuid.uuid4().hex
        self.values: dict[str, Any] = {"input": run_input}
        self.trace: list[NodeTrace] = []
        self.max_visits = max_visits
        self.timeout = timeout
        self._visits = 0
        self._per_node: Counter[str] = Counter()
        self._deadline = math.inf

    async def events(self) -> AsyncIterator[WorkflowEvent]:
        """Run the workflow, yielding every event; the last one is :class:`RunFinished`."""
        started_at = datetime.now(UTC)
        clock = anyio.current_time()
        if self.timeout is not None:
            self._deadline = clock + self.timeout
        yield RunStarted(run_id=self.run_id, workflow=self.workflow.name, input=jsonable(self.values["input"]))
        result = RunResult(
            run_id=self.run_id,
            workflow=self.workflow.name,
            status=RunStatus.SUCCEEDED,
            started_at=started_at,
            trace=self.trace,
        )
        env = self._env()
        current: str | None = self.workflow.start
        try:
            while current is not None:
                node = self.workflow.nodes[current]
                buffer: list[WorkflowEvent] = []
                record = self._begin(node, None)
                yield NodeStarted(run_id=self.run_id, node=node.id, kind=record.kind, visit=record.visit)
                try:
                    output, current = await self._step(node, env, record, buffer)
                except WorkflowError:
                    for event in buffer:
                        yield event
                    raise
                for event in buffer:
                    yield event
                yield self._finished(record)
                if isinstance(node, EndNode):
                    result.output = output
        except WorkflowError as exc:
            result.status = RunStatus.TIMED_OUT if isinstance(exc, RunTimeoutError) else RunStatus.FAILED
            result.error = exc
            if self.trace and self.trace[-1].status == "failed":
                yield NodeFailed(run_id=self.run_id, trace=self.trace[-1], error=exc)
        result.duration = anyio.current_time() - clock
        yield RunFinished(run_id=self.run_id, result=result)

    # -------------------------------------------------------------------------------------------- visiting

    def _env(self) -> NodeEnv:
        return NodeEnv(workflow=self.workflow, kernel=self.kernel, values=self.values, llm_for=self.llm_for)

    def _begin(self, node: NodeBase, branch: str | None) -> NodeTrace:
        self._visits += 1
        if self._visits > self.max_visits:
            raise VisitLimitError(
                f"The run reached its limit of {self.max_visits} node visits at node {node.id!r}; a loop "
                "probably never takes its exit. Raise max_visits if the workflow really needs more.",
                node=node.id,
                limit=self.max_visits,
            )
        self._per_node[node.id] += 1
        kind = str(getattr(node, "kind", type(node).__name__))
        return NodeTrace(
            node=node.id, kind=kind, visit=self._per_node[node.id], started_at=datetime.now(UTC), branch=branch
        )

    def _finished(self, record: NodeTrace) -> NodeFinished:
        return NodeFinished(run_id=self.run_id, trace=record)

    async def _step(
        self, node: NodeBase, env: NodeEnv, record: NodeTrace, buffer: list[WorkflowEvent]
    ) -> tuple[Any, str | None]:
        """Visit ``node`` within the run's deadline; record the trace; return ``(output, next)``."""
        clock = anyio.current_time()
        outcome: tuple[Any, str | None] | None = None
        try:
            with anyio.move_on_after(self._deadline - clock):
                outcome = await self._visit(node, env, record, buffer)
        except WorkflowError as exc:
            self._close(record, clock, error=exc)
            raise
        if outcome is None:  # the run's deadline passed
            error = RunTimeoutError(
                f"The run timed out after {self.timeout:g} s while node {node.id!r} was running.",
                node=node.id,
                timeout=self.timeout or 0.0,
            )
            self._close(record, clock, error=error)
            raise error
        output, next_id = outcome
        record.output = jsonable(output)
        record.next = next_id
        self._close(record, clock)
        if not isinstance(node, IfNode | SwitchNode):
            env.previous = to_context(output)
        return output, next_id

    def _close(self, record: NodeTrace, clock: float, *, error: BaseException | None = None) -> None:
        record.duration = anyio.current_time() - clock
        if error is not None:
            record.status = "failed"
            record.error = str(error)
        self.trace.append(record)

    async def _visit(
        self, node: NodeBase, env: NodeEnv, record: NodeTrace, buffer: list[WorkflowEvent]
    ) -> tuple[Any, str | None]:
        timeout = None if _times_itself(node) else getattr(node, "timeout", None)
        outcome: tuple[Any, str | None] | None = None
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            outcome = await self._run_node(node, env, record, buffer)
        if outcome is None:
            raise NodeTimeoutError(
                f"Node {node.id!r} did not finish within its timeout of {timeout:g} s.",
                node=node.id,
                timeout=timeout or 0.0,
            )
        if not isinstance(node, EndNode | ParallelNode):  # a parallel node stores its joined output itself
            self.values[node.id] = to_context(outcome[0])
        return outcome

    async def _run_node(
        self, node: NodeBase, env: NodeEnv, record: NodeTrace, buffer: list[WorkflowEvent]
    ) -> tuple[Any, str | None]:
        try:
            if isinstance(node, ParallelNode):
                return await self._parallel(node, record, buffer)
            return await run_simple_node(node, env, record)
        except WorkflowError:
            raise
        except FunctionKernelException as exc:
            raise NodeError(f"Node {node.id!r}: {exc.message}", node=node.id, uri=exc.uri) from exc
        except Exception as exc:
            raise NodeError(f"Node {node.id!r} failed: {type(exc).__name__}: {exc}", node=node.id) from exc

    # -------------------------------------------------------------------------------------------- parallel

    async def _parallel(
        self, node: ParallelNode, record: NodeTrace, buffer: list[WorkflowEvent]
    ) -> tuple[Any, str | None]:
        outputs: dict[str, Any] = {}
        failures: list[WorkflowError] = []
        record.inputs = {"branches": list(node.branches)}
        async with anyio.create_task_group() as group:
            for head in node.branches:
                group.start_soon(self._branch, node, head, outputs, failures, group.cancel_scope, buffer)
        if failures:
            raise failures[0]
        output = {head: outputs.get(head) for head in node.branches}
        self.values[node.id] = output
        return output, node.next

    async def _branch(
        self,
        parallel: ParallelNode,
        head: str,
        outputs: dict[str, Any],
        failures: list[WorkflowError],
        scope: anyio.CancelScope,
        buffer: list[WorkflowEvent],
    ) -> None:
        branch = f"{parallel.id}.{head}"
        env = self._env()
        current: str | None = head
        try:
            while current is not None:
                node = self.workflow.nodes[current]
                record = self._begin(node, branch)
                buffer.append(NodeStarted(self.run_id, node.id, record.kind, record.visit, branch))
                clock = anyio.current_time()
                try:
                    output, current = await self._visit(node, env, record, buffer)
                except anyio.get_cancelled_exc_class():
                    self._close(record, clock, error=RuntimeError(_CANCELLED))
                    raise
                except WorkflowError as exc:
                    self._close(record, clock, error=exc)
                    buffer.append(NodeFailed(self.run_id, record, exc))
                    raise
                record.output, record.next = jsonable(output), current
                self._close(record, clock)
                buffer.append(NodeFinished(self.run_id, record))
                if not isinstance(node, IfNode | SwitchNode):
                    env.previous = to_context(output)
            outputs[head] = env.previous
        except WorkflowError as exc:
            failures.append(exc)
            scope.cancel()


def _times_itself(node: NodeBase) -> bool:
    # A function node applies its timeout to each attempt through the kernel, so retries stay possible.
    return getattr(node, "kind", None) == "function"
