"""What a run produces: :class:`RunResult`, its trace of :class:`NodeTrace` records, and the streamed events."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic_core import PydanticSerializationError, to_jsonable_python

from kavalai.adapters.mcp import McpElicitation
from kavalai.workflow.errors import WorkflowError

if TYPE_CHECKING:
    from kavalai.workflow._types import DataType

__all__ = [
    "PLAIN",
    "InputRequested",
    "NodeFailed",
    "NodeFinished",
    "NodeProgress",
    "NodeStarted",
    "NodeTrace",
    "OutputData",
    "OutputList",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "ToolCallTrace",
    "WorkflowEvent",
    "jsonable",
]


class RunStatus(enum.StrEnum):
    """How a run ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"


@dataclass(slots=True)
class ToolCallTrace:
    """One tool call an ``agent`` node made.

    Attributes:
        tool: the tool URI.
        arguments: the arguments the model sent.
        output: the tool's output (JSON-ready), or ``None`` when it failed.
        error: the error text when the call failed.
    """

    tool: str
    arguments: dict[str, Any]
    output: Any = None
    error: str | None = None


@dataclass(slots=True)
class NodeTrace:
    """One visit of one node.

    Attributes:
        node: the node id.
        kind: the node kind (``"function"``, ``"if"``, ...).
        visit: the how-many-th visit of this node in the run (1 for the first; loops revisit).
        started_at: when the visit began (UTC).
        duration: seconds the visit took.
        status: ``"succeeded"`` or ``"failed"``.
        inputs: the resolved inputs (tool arguments, template variables), when the node has any.
        output: the validated output, JSON-ready, when the node succeeded.
        next: the node the run continued to, when there is one.
        error: the error text, when the node failed.
        attempts: how many times a ``function`` node called its tool.
        branch: for a node inside a parallel branch, ``"<parallel id>.<branch head>"``.
        tool_calls: for an ``agent`` node, the tool calls it made.
    """

    node: str
    kind: str
    visit: int
    started_at: datetime
    duration: float = 0.0
    status: Literal["succeeded", "failed"] = "succeeded"
    inputs: dict[str, Any] | None = None
    output: Any = None
    next: str | None = None
    error: str | None = None
    attempts: int = 1
    branch: str | None = None
    tool_calls: list[ToolCallTrace] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data."""
        data: dict[str, Any] = jsonable(
            {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "tool_calls"}
        )
        data["tool_calls"] = [jsonable(vars_of(call)) for call in self.tool_calls]
        return data


# A run records when it and each visit began as seconds since the epoch (a float it works out from the clock it reads
# for their duration anyway), and ``started_at`` makes the datetime the first time it is read: a datetime made at
# every visit cost more than the rest of the record. The slot itself is reached through its member descriptor.
def _read_as_datetime(kind: type, doc: str) -> None:
    """Make ``kind.started_at`` (a slot) hold a datetime or epoch seconds, and read as a datetime."""
    slot: Any = kind.__dict__["started_at"]

    def started_at(record: Any) -> datetime:
        value = slot.__get__(record, kind)
        if type(value) is float:
            value = datetime.fromtimestamp(value, UTC)
            slot.__set__(record, value)
        started: datetime = value
        return started

    kind.started_at = property(started_at, slot.__set__, doc=doc)  # type: ignore[attr-defined]


_read_as_datetime(NodeTrace, "When the visit began (UTC).")


@dataclass(slots=True)
class RunResult:
    """The outcome of one run.

    Attributes:
        run_id: a unique id of the run.
        workflow: the workflow's name.
        status: succeeded, failed or timed out.
        output: the validated output (an instance of the workflow's output type) when the run succeeded.
        error: the error that ended the run, when it did not succeed; ``error.node`` names the failed node.
        trace: every node visit up to the end or the failure, in the order they finished.
        started_at: when the run began (UTC).
        duration: seconds the run took.
    """

    run_id: str
    workflow: str
    status: RunStatus
    started_at: datetime
    output: Any = None
    error: WorkflowError | None = None
    trace: list[NodeTrace] = field(default_factory=list)
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.status is RunStatus.SUCCEEDED

    @property
    def completed(self) -> bool:
        """Whether the run reached an end node (Kaval.AI 1.0's ``status == "completed"``); the same as :attr:`ok`."""
        return self.status is RunStatus.SUCCEEDED

    @property
    def visited(self) -> list[str]:
        """The ids of the nodes visited, in the order their visits finished (Kaval.AI 1.0's ``trace``)."""
        return [record.node for record in self.trace]

    @property
    def failed_node(self) -> str | None:
        """The id of the node the run failed in, when it failed in one."""
        return self.error.node if self.error is not None else None

    def raise_for_status(self) -> RunResult:
        """Return ``self`` if the run succeeded, else raise its error."""
        if self.error is not None:
            raise self.error
        return self

    @property
    def output_data(self) -> Any:
        """The output as JSON-ready data (models dumped by alias), read as an attribute, as Kaval.AI 1.0's
        ``WorkflowState.output_data`` is: ``result.output_data == {"answer": 42}``.

        A dict or list comes as an :class:`OutputData` / :class:`OutputList`, which is that dict or list and may
        also be called, so ``result.output_data()`` (the method form of earlier kavalai releases) keeps working
        for them; :meth:`output_json` returns the same data as plain types, whatever its shape.
        """
        return _callable_data(jsonable(self.output))

    def output_json(self) -> Any:
        """The output as JSON-ready data of plain types (dicts, lists, strings, numbers, ``None``)."""
        return jsonable(self.output)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, output_type: DataType | None = None) -> RunResult:
        """A result back from :meth:`to_dict`'s data (a durable run's journaled outcome): the output validated by
        ``output_type`` when given, the error restored as the workflow error it was (with its fields) when the data
        holds its ``envelope``."""
        from kavalai.durable import restore_error

        status = RunStatus(data["status"])
        output = data.get("output")
        if status is RunStatus.SUCCEEDED and output_type is not None:
            output = output_type.validate(output)
        error: WorkflowError | None = None
        shown = data.get("error")
        if shown is not None:
            restored = restore_error(shown["envelope"]) if "envelope" in shown else None
            if isinstance(restored, WorkflowError):
                error = restored
            else:
                error = WorkflowError(str(shown.get("message", "")), node=data.get("failed_node"))
        trace = [_node_trace(item) for item in data.get("trace", [])]
        return cls(
            run_id=data["run_id"],
            workflow=data["workflow"],
            status=status,
            started_at=datetime.fromisoformat(data["started_at"]),
            output=output,
            error=error,
            trace=trace,
            duration=float(data.get("duration", 0.0)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The whole result as JSON-ready data."""
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status.value,
            "output": self.output_json(),
            "error": None if self.error is None else {"type": type(self.error).__name__, "message": str(self.error)},
            "failed_node": self.failed_node,
            "started_at": self.started_at.isoformat(),
            "duration": self.duration,
            "trace": [record.to_dict() for record in self.trace],
        }


_read_as_datetime(RunResult, "When the run began (UTC).")


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began."""

    run_id: str
    workflow: str
    input: Any
    type: Literal["run_started"] = "run_started"


@dataclass(frozen=True, slots=True)
class NodeStarted:
    """A node visit began."""

    run_id: str
    node: str
    kind: str
    visit: int
    branch: str | None = None
    type: Literal["node_started"] = "node_started"


@dataclass(frozen=True, slots=True)
class NodeFinished:
    """A node visit succeeded; ``trace`` holds its inputs, output and duration."""

    run_id: str
    trace: NodeTrace
    type: Literal["node_finished"] = "node_finished"


@dataclass(frozen=True, slots=True)
class NodeFailed:
    """A node visit failed; ``trace.error`` says why."""

    run_id: str
    trace: NodeTrace
    error: WorkflowError
    type: Literal["node_failed"] = "node_failed"


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended; ``result`` is what :meth:`WorkflowEngine.run` would have returned."""

    run_id: str
    result: RunResult
    type: Literal["run_finished"] = "run_finished"


@dataclass(frozen=True, slots=True)
class NodeProgress:
    """A node's tool call reported how far it is: ``progress`` of ``total`` (when known), with an optional message."""

    run_id: str
    node: str
    progress: float
    total: float | None
    message: str | None
    type: Literal["node_progress"] = "node_progress"


@dataclass(frozen=True, slots=True)
class InputRequested:
    """An MCP server (configured with ``elicitation="caller"``) asks the user for input during a tool call of the
    run; the run waits until the consumer of :meth:`WorkflowEngine.stream` calls :meth:`answer` or :meth:`decline`.

    Attributes:
        request: what is asked (``message``, the fields' JSON ``schema``, or a ``url`` to visit).
    """

    request: McpElicitation
    _reply: asyncio.Future[Mapping[str, Any] | None] = field(repr=False, compare=False)
    type: Literal["input_requested"] = "input_requested"

    def answer(self, values: Mapping[str, Any]) -> None:
        """Accept the request with ``values`` (the fields the schema asks for)."""
        if not self._reply.done():
            self._reply.set_result(dict(values))

    def decline(self) -> None:
        """Decline the request."""
        if not self._reply.done():
            self._reply.set_result(None)


#: Any event :meth:`WorkflowEngine.stream` yields.
WorkflowEvent = RunStarted | NodeStarted | NodeProgress | NodeFinished | NodeFailed | InputRequested | RunFinished


#: The types of values that are JSON-ready as they are.
PLAIN: Final = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data: models dumped by alias, dates as ISO strings, unknown objects as ``str``."""
    # Twice per node (its inputs and its output), so the common cases go first: a plain value as it is, then
    # pydantic's conversion without a fallback, which costs half as much as with one; only a value holding an
    # object pydantic cannot convert takes the second pass.
    if type(value) in PLAIN:
        return value
    try:
        return to_jsonable_python(value, by_alias=True)
    except PydanticSerializationError:
        return to_jsonable_python(value, by_alias=True, fallback=str)


class OutputData(dict[str, Any]):
    """A run's output dict (:attr:`RunResult.output_data`): a plain ``dict`` in every way, and callable, returning
    itself, for code that calls ``result.output_data()``."""

    __slots__ = ()

    def __call__(self) -> OutputData:
        """This dict (the method form of ``output_data`` of earlier kavalai releases)."""
        return self


class OutputList(list[Any]):
    """A run's output list (:attr:`RunResult.output_data`): a plain ``list``, and callable, returning itself."""

    __slots__ = ()

    def __call__(self) -> OutputList:
        """This list (the method form of ``output_data`` of earlier kavalai releases)."""
        return self


def _callable_data(value: Any) -> Any:
    if type(value) is dict:
        return OutputData(value)
    if type(value) is list:
        return OutputList(value)
    return value


def vars_of(obj: Any) -> dict[str, Any]:
    """The fields of a dataclass instance as a dict (works with ``slots=True``)."""
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def _node_trace(data: Mapping[str, Any]) -> NodeTrace:
    fields = {name: data[name] for name in NodeTrace.__dataclass_fields__ if name in data}
    fields["started_at"] = datetime.fromisoformat(data["started_at"])
    fields["tool_calls"] = [ToolCallTrace(**call) for call in data.get("tool_calls", [])]
    return NodeTrace(**fields)
