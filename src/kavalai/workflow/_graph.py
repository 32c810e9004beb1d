"""A validated workflow graph: nodes, types, bindings and limits, checked once before any run.

:class:`Workflow` is what :class:`~kavalai.workflow.WorkflowBuilder` and the YAML loader produce. Building one
runs every check the engine relies on, so a definition error surfaces before a model is called or a tool runs.
"""

from __future__ import annotations

import difflib
import keyword
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from kavalai.kernel import limit_seconds
from kavalai.workflow._expressions import FUNCTIONS, Expression, compile_expression, is_path
from kavalai.workflow._ledger import FLAT, flat_size
from kavalai.workflow._nodes import (
    AgentNode,
    EndNode,
    FunctionNode,
    IfNode,
    LlmNode,
    NodeBase,
    ParallelNode,
    StartNode,
    SwitchNode,
)
from kavalai.workflow._sizes import DEFAULT_MAX_SIZE
from kavalai.workflow._templates import check_template
from kavalai.workflow._types import DataType, TypeRegistry
from kavalai.workflow.errors import ExpressionError, WorkflowDefinitionError, quoted

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = [
    "DEFAULT_MAX_VISITS",
    "Binding",
    "FunctionCall",
    "PlanRow",
    "Reading",
    "Workflow",
    "check_tools",
    "checked_timeout",
    "checked_visits",
    "did_you_mean",
]

#: One binding of a node as a run reads it: ``(name, literal, expression, field, path)`` (see :meth:`Workflow.plan`).
PlanRow: TypeAlias = tuple[str, Any, "Expression | None", str, "tuple[str, tuple[Any, ...]] | None"]

#: A node's bindings when each is a literal or a plain path (most nodes'), as a run reads them without the evaluator:
#: ``(template, size, paths)``: the bindings in order, the literals in place (a path's value fills its key);
#: the size the run ledger counts for the literals and the dict (``-1`` when it must size the whole itself); and
#: each path binding as ``(name, root, keys)`` (see :meth:`Workflow.reading`).
Reading: TypeAlias = tuple[dict[str, Any], int, tuple[tuple[str, str, tuple[Any, ...]], ...]]

#: A function node as a run calls it: its tool URI, the node after it, whether its call is a plain one (no
#: timeout, no retry policy, no declared output type to check), and its :meth:`~Workflow.reading`.
FunctionCall: TypeAlias = tuple[str, "str | None", bool, "Reading | None"]

#: The node-visit limit when none is given.
DEFAULT_MAX_VISITS: Final = 1000
_RESERVED: Final = frozenset({"input", "get", "True", "False", "None", *FUNCTIONS})
_NO_BINDINGS: Final[Reading] = ({}, 2, ())


def _reading(plan: tuple[PlanRow, ...]) -> Reading | None:
    """:meth:`Workflow.reading` of a node's plan, worked out once: the literals' part of the ledger's size is
    :func:`~kavalai.workflow._ledger.flat_size` of them, and each path binding adds its key's four characters."""
    template: dict[str, Any] = {}
    literals: dict[str, Any] = {}
    paths: list[tuple[str, str, tuple[Any, ...]]] = []
    for name, literal, expression, _, path in plan:
        if expression is None:
            if type(literal) in (dict, list):
                return None  # each run is given a copy of its own (_runners._resolve): a tool may change it
            template[name] = literals[name] = literal
        elif path is None:
            return None
        else:
            template[name] = None  # its place in the order; the run puts the path's value there
            paths.append((name, path[0], path[1]))
    size = flat_size(literals) if len(plan) <= FLAT else -1
    return template, size + 4 * len(paths) if size >= 0 else -1, tuple(paths)


@dataclass(frozen=True, slots=True)
class Binding:
    """One entry of an ``inputs`` mapping, compiled: a context path, an expression, or a literal."""

    kind: Literal["path", "expr", "literal"]
    value: Any
    field: str = ""

    def resolve(self, context: Mapping[str, Any], *, node: str) -> Any:
        """The bound value in ``context``; raise :class:`ExpressionError` naming ``node`` and the field if it is
        missing."""
        if isinstance(self.value, Expression):
            return self.value.evaluate(context, node=node, field=self.field)
        return self.value


class Workflow:
    """A checked workflow graph.

    Attributes:
        name: the workflow's name.
        description: what it does.
        types: its named data types.
        input_type: the type the run input is validated by.
        output_type: the type the run output is validated by.
        nodes: the nodes by id, in definition order.
        start: the id of the start node.
        max_visits: the most node visits a run may make (loops are allowed; runaway loops are stopped).
        timeout: the default run timeout in seconds, or ``None``.
        max_value_size: the most characters of a text, or items of a list, one expression or template operation
            of a run may build (checked before it is built), and the most characters a template may render.
    """

    def __init__(
        self,
        *,
        name: str,
        nodes: Sequence[NodeBase],
        types: TypeRegistry,
        input_type: str | None,
        output_type: str | None,
        description: str = "",
        max_visits: int = DEFAULT_MAX_VISITS,
        timeout: float | None = None,
        max_value_size: int = DEFAULT_MAX_SIZE,
    ) -> None:
        if not isinstance(max_value_size, int) or isinstance(max_value_size, bool) or max_value_size < 1:
            raise WorkflowDefinitionError(
                f"Workflow field 'max_value_size' must be a positive integer, not {max_value_size!r}"
            )
        self.max_value_size = max_value_size
        self.name = name
        self.description = description
        self.types = types
        self.max_visits = checked_visits(max_visits)
        self.timeout = checked_timeout(timeout)
        self.nodes: dict[str, NodeBase] = _index(nodes)
        self.input_type = self._type(input_type, "input", None)
        self.output_type = self._type(output_type, "output", None)
        self.start = _single_start(self.nodes)
        self._bindings: dict[str, dict[str, Binding]] = {}
        self._plans: dict[str, tuple[PlanRow, ...]] = {}
        self._readings: dict[str, Reading | None] = {}
        #: Each node's kind as traces name it (``"function"``, ``"if"``, ...).
        self.kinds: dict[str, str] = {
            node.id: str(getattr(node, "kind", type(node).__name__)) for node in self.nodes.values()
        }
        self._expressions: dict[str, Expression] = {}
        self.node_types: dict[str, DataType] = {}
        for node in self.nodes.values():
            self._check_node(node)
        _check_graph(self.nodes, self.start)
        #: Each function node as a run calls it (read once a visit, not from the node: a pydantic model's fields
        #: cost a ``__getattr__`` hook each): see :data:`FunctionCall`.
        self.calls: dict[str, FunctionCall] = {
            node.id: (
                node.tool,
                node.next,
                node.timeout is None and node.retry is None and node.id not in self.node_types,
                self.reading(node.id),
            )
            for node in self.nodes.values()
            if type(node) is FunctionNode
        }

    # ------------------------------------------------------------------------------------------------ lookups

    def bindings(self, node_id: str) -> dict[str, Binding]:
        """The compiled ``inputs`` (or an end node's ``outputs``) of a node."""
        return self._bindings.get(node_id, {})

    def plan(self, node_id: str) -> tuple[PlanRow, ...]:
        """A node's bindings as ``(name, literal, expression, field, path)`` rows, the form a run reads them in: a
        literal row has ``expression`` ``None``; an expression row's literal is unused, and its ``path`` is the
        expression's :attr:`~Expression.path` (``None`` unless it is a plain path through dicts)."""
        return self._plans.get(node_id, ())

    def reading(self, node_id: str) -> Reading | None:
        """A node's bindings as a run reads them when each is a literal or a plain path through dicts (see
        :data:`Reading`): ``None`` when one needs the evaluator. A node without bindings reads as an empty dict."""
        return self._readings.get(node_id, _NO_BINDINGS)

    def expression(self, node_id: str) -> Expression:
        """The compiled condition of an ``if`` node or value of a ``switch`` node."""
        return self._expressions[node_id]

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r}: {len(self.nodes)} nodes, {self.input_type.name} -> {self.output_type.name}>"

    # ----------------------------------------------------------------------------------------------- checking

    def _type(self, name: str | None, field: str, node: str | None) -> DataType:
        where = f"Node {node!r}" if node else f"Workflow {self.name!r}"
        if not name:
            raise WorkflowDefinitionError(
                f"{where}: field {field!r} is missing; name a declared type or one of: string, integer, "
                "number, boolean, object, array, any.",
                node=node,
                field=field,
            )
        found = self.types.get(name)
        if found is None:
            raise WorkflowDefinitionError(
                f"{where}: field {field!r} names the undeclared type {name!r}.{did_you_mean(name, self.types)} "
                "Declare it under 'types:' (YAML) or pass a Pydantic model (Python).",
                node=node,
                field=field,
            )
        return found

    def _check_node(self, node: NodeBase) -> None:
        if node.id in _RESERVED or keyword.iskeyword(node.id):
            raise WorkflowDefinitionError(
                f"Node id {node.id!r} is reserved (it is a name expressions use); choose another id.",
                node=node.id,
                field="id",
            )
        for field, target in node.successors():
            self._check_target(node.id, field, target)
        if isinstance(node, ParallelNode):
            for i, head in enumerate(node.branches):
                self._check_target(node.id, f"branches[{i}]", head)
                if head in node.branches[:i]:
                    raise WorkflowDefinitionError(
                        f"Node {node.id!r}: field 'branches[{i}]' names {head!r} a second time; list each branch once.",
                        node=node.id,
                        field=f"branches[{i}]",
                    )
        if isinstance(node, FunctionNode):
            _check_uri(node)
        if isinstance(node, FunctionNode | AgentNode | LlmNode):
            self._bindings[node.id] = self._compile_bindings(node.id, "inputs", node.inputs)
            if node.output is not None:
                self.node_types[node.id] = self._type(node.output, "output", node.id)
        if isinstance(node, AgentNode | LlmNode):
            self._check_model_node(node)
        if isinstance(node, FunctionNode) and node.retry is not None:
            _check_retry_on(node)
        if isinstance(node, EndNode) and node.outputs is not None:
            self._bindings[node.id] = self._compile_bindings(node.id, "outputs", node.outputs)
        if isinstance(node, IfNode | SwitchNode):
            source = node.condition if isinstance(node, IfNode) else node.value
            field = "condition" if isinstance(node, IfNode) else "value"
            self._expressions[node.id] = self._compile(node.id, field, source)

    def _check_model_node(self, node: AgentNode | LlmNode) -> None:
        templates = {"prompt": node.prompt}
        extra = node.instructions if isinstance(node, AgentNode) else node.system
        if extra is not None:
            templates["instructions" if isinstance(node, AgentNode) else "system"] = extra
        names = {"input", *node.inputs}
        for field, source in templates.items():
            check_template(source, names, node=node.id, field=field)
        declared = self.node_types.get(node.id)
        if declared is not None and not declared.is_model and declared.annotation is not str:
            raise WorkflowDefinitionError(
                f"Node {node.id!r}: field 'output' names type {declared.name!r}; a model's answer is either text "
                "('string') or a structured object type.",
                node=node.id,
                field="output",
            )

    def _check_target(self, node: str, field: str, target: str) -> None:
        if target not in self.nodes:
            raise WorkflowDefinitionError(
                f"Node {node!r}: field {field!r} names the unknown node {target!r}.{did_you_mean(target, self.nodes)}",
                node=node,
                field=field,
            )
        if isinstance(self.nodes[target], StartNode):
            raise WorkflowDefinitionError(
                f"Node {node!r}: field {field!r} leads back to the start node {target!r}; loop to the node "
                "after it instead.",
                node=node,
                field=field,
            )

    def _compile_bindings(self, node: str, field: str, mapping: Mapping[str, Any]) -> dict[str, Binding]:
        compiled: dict[str, Binding] = {}
        for key, raw in mapping.items():
            compiled[key] = self._binding(node, f"{field}.{key}", raw)
        self._plans[node] = tuple(
            (key, b.value, None, b.field, None)
            if not isinstance(b.value, Expression)
            else (key, b.value, b.value, b.field, b.value.path)
            for key, b in compiled.items()
        )
        self._readings[node] = _reading(self._plans[node])
        return compiled

    def _binding(self, node: str, field: str, raw: Any) -> Binding:
        if isinstance(raw, Mapping) and len(raw) == 1 and "literal" in raw:
            return Binding("literal", raw["literal"], field)
        if isinstance(raw, Mapping) and len(raw) == 1 and "expr" in raw:
            return Binding("expr", self._compile(node, field, raw["expr"]), field)
        if isinstance(raw, Mapping) and _looks_like_binding(raw):
            return self._foreign_binding(node, field, raw)
        if isinstance(raw, str) and is_path(raw):
            (root,) = compile_expression(raw).names
            known = self._known_names()
            if root in known:
                return Binding("path", self._compile(node, field, raw), field)
            close = did_you_mean(root, known)
            if close:  # most likely a misspelt path; a literal that looks like one is written {literal: ...}
                raise WorkflowDefinitionError(
                    f"Node {node!r}: field {field!r}: {raw!r} reads {root!r}, which is neither 'input' nor a node id."
                    f"{close} (For the text itself, write {{literal: {raw!r}}}.)",
                    node=node,
                    field=field,
                )
        return Binding("literal", raw, field)

    def _foreign_binding(self, node: str, field: str, raw: Mapping[str, Any]) -> Binding:
        """A mapping shaped like a binding is bound or refused, never passed on as data: Kaval.AI 1.0's
        ``{type: literal|context, value: ...}`` is bound; anything else with ``literal``/``expr`` is refused."""
        kind, value = raw.get("type"), raw.get("value", raw.get("name"))
        if kind == "literal" and set(raw) <= {"type", "value"}:
            return Binding("literal", raw.get("value"), field)
        if kind == "context" and set(raw) <= {"type", "value", "name"} and isinstance(value, str):
            return Binding("path", self._compile(node, field, value), field)
        raise WorkflowDefinitionError(
            f"Node {node!r}: field {field!r} is {dict(raw)!r}, which looks like a binding but is not one this format "
            "has. Write a context path ('input.pond'), {expr: ...} or {literal: ...}; a Kaval.AI 1.0 'history' input "
            "needs the Kaval.AI format (nodes with name/type).",
            node=node,
            field=field,
        )

    def _compile(self, node: str, field: str, source: Any) -> Expression:
        try:
            expression = compile_expression(source)
        except ExpressionError as exc:
            raise WorkflowDefinitionError(
                f"Node {node!r}: field {field!r}: {exc.message}", node=node, field=field
            ) from None
        unknown = sorted(expression.names - self._known_names())
        if unknown:
            raise WorkflowDefinitionError(
                f"Node {node!r}: field {field!r}: expression {quoted(expression.source)} reads "
                f"{quoted(unknown[0])}, which is neither 'input' nor a node id."
                f"{did_you_mean(unknown[0], self._known_names())}",
                node=node,
                field=field,
            )
        return expression

    def _known_names(self) -> set[str]:
        return {"input", *self.nodes}


def check_tools(workflow: Workflow, kernel: FunctionKernel) -> None:
    """Check that every ``function`` node's tool and every ``allowed_tools`` entry of an ``agent`` node names a
    tool the kernel has (call it once the kernel's servers are connected, so their tools are listed).

    Raises:
        WorkflowDefinitionError: naming the node, the field and the missing tool, with close matches.
    """
    from kavalai.errors import FunctionKernelException

    for node in workflow.nodes.values():
        if isinstance(node, FunctionNode):
            try:
                kernel.get_tool_definition(node.tool)
            except FunctionKernelException as exc:
                raise WorkflowDefinitionError(
                    f"Node {node.id!r}: field 'tool': {exc.message}", node=node.id, field="tool"
                ) from None
        elif isinstance(node, AgentNode):
            for i, entry in enumerate(node.allowed_tools or ()):
                field = f"allowed_tools[{i}]"
                try:
                    kernel.select_tools([entry])  # a glob that matches nothing is an error there too
                except FunctionKernelException as exc:
                    raise WorkflowDefinitionError(
                        f"Node {node.id!r}: field {field!r}: {exc.message}", node=node.id, field=field
                    ) from None


def _check_uri(node: FunctionNode) -> None:
    from kavalai.errors import InvalidToolURIError
    from kavalai.kernel import ToolURI

    try:
        ToolURI.parse(node.tool)
    except InvalidToolURIError as exc:
        raise WorkflowDefinitionError(
            f"Node {node.id!r}: field 'tool': {exc.message}", node=node.id, field="tool"
        ) from None


def _check_retry_on(node: FunctionNode) -> None:
    import kavalai.errors
    import kavalai.workflow.errors

    known = {*kavalai.errors.__all__, *kavalai.workflow.errors.__all__}
    for name in node.retry.retry_on if node.retry else ():
        if name not in known:
            raise WorkflowDefinitionError(
                f"Node {node.id!r}: field 'retry.retry_on' names {name!r}, which is not a kavalai error class."
                f"{did_you_mean(name, known)}",
                node=node.id,
                field="retry.retry_on",
            )


def _index(nodes: Sequence[NodeBase]) -> dict[str, NodeBase]:
    indexed: dict[str, NodeBase] = {}
    for node in nodes:
        if node.id in indexed:
            raise WorkflowDefinitionError(f"Node id {node.id!r} is used twice; ids must be unique.", node=node.id)
        indexed[node.id] = node
    if not indexed:
        raise WorkflowDefinitionError("The workflow has no nodes; it needs a start node and an end node.")
    return indexed


def _single_start(nodes: Mapping[str, NodeBase]) -> str:
    starts = [node.id for node in nodes.values() if isinstance(node, StartNode)]
    if not starts:
        raise WorkflowDefinitionError("The workflow has no start node; add one (kind: start).", field="nodes")
    if len(starts) > 1:
        raise WorkflowDefinitionError(
            f"The workflow has {len(starts)} start nodes ({', '.join(map(repr, starts))}); it needs exactly one.",
            node=starts[1],
            field="kind",
        )
    return starts[0]


def _region(nodes: Mapping[str, NodeBase], head: str) -> tuple[list[str], list[ParallelNode]]:
    """The nodes reachable from ``head`` without entering parallel branches, and the parallel nodes met."""
    seen: dict[str, None] = {}
    stack = [head]
    parallels: list[ParallelNode] = []
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen[current] = None
        node = nodes[current]
        if isinstance(node, ParallelNode):
            parallels.append(node)
        stack.extend(target for _, target in reversed(node.successors()))
    return list(seen), parallels


def _check_graph(nodes: Mapping[str, NodeBase], start: str) -> None:
    owner: dict[str, str] = {}  # node id -> the region it belongs to ("main" or "<parallel>.<head>")
    pending: list[tuple[str, str]] = [("main", start)]
    while pending:
        region, head = pending.pop()
        members, parallels = _region(nodes, head)
        for member in members:
            if region != "main" and isinstance(nodes[member], EndNode):
                raise WorkflowDefinitionError(
                    f"End node {member!r} is reached inside {_region_name(region)}; a branch ends at a node "
                    "without 'next' and the run continues after the parallel node.",
                    node=member,
                )
            if member in owner and owner[member] != region:
                raise WorkflowDefinitionError(
                    f"Node {member!r} is reached from both {_region_name(owner[member])} and "
                    f"{_region_name(region)}; a parallel branch must not share nodes with the rest of the graph.",
                    node=member,
                )
            owner[member] = region
        if region == "main":
            _check_main_path(nodes, members)
        pending.extend((f"{p.id}.{branch}", branch) for p in parallels for branch in p.branches)
    unreachable = [node for node in nodes if node not in owner]
    if unreachable:
        raise WorkflowDefinitionError(
            f"Node {unreachable[0]!r} cannot be reached from the start node {start!r}; link it in or remove it.",
            node=unreachable[0],
        )


def _check_main_path(nodes: Mapping[str, NodeBase], members: list[str]) -> None:
    for member in members:
        node = nodes[member]
        if not isinstance(node, EndNode) and not node.successors():
            raise WorkflowDefinitionError(
                f"Node {member!r} has no 'next' node; outside a parallel branch every node except an end "
                "node needs one.",
                node=member,
                field="next",
            )
    if not any(isinstance(nodes[member], EndNode) for member in members):
        raise WorkflowDefinitionError(
            "No end node can be reached from the start node; every run must be able to finish.", field="next"
        )


def _region_name(region: str) -> str:
    if region == "main":
        return "the main path"
    parallel, head = region.split(".", 1)
    return f"branch {head!r} of parallel node {parallel!r}"


def _looks_like_binding(raw: Mapping[Any, Any]) -> bool:
    """``{type: literal|context|history, value: ...}`` (Kaval.AI 1.0), or ``literal``/``expr`` beside other keys."""
    if raw.get("type") in ("literal", "context", "history") and set(raw) <= {"type", "value", "name"}:
        return True
    return ("literal" in raw or "expr" in raw) and len(raw) > 1


def did_you_mean(name: str, options: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``options``, or an empty string."""
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def field_problem(error: Mapping[str, Any], fields: Iterable[str]) -> str:
    """One pydantic error of a workflow document as ``field 'x': what``; an unknown field gets a did-you-mean
    among ``fields`` (``otuput`` -> ``output``)."""
    where = ".".join(map(str, error["loc"])) or "(node)"
    if error.get("type") == "extra_forbidden":
        name = str(error["loc"][-1]) if error["loc"] else where
        return f"field {where!r} is not a known field.{did_you_mean(name, fields)}"
    return f"field {where!r}: {error['msg']}"


def checked_visits(value: int, what: str = "Workflow field 'max_visits'") -> int:
    """``value`` if it is a positive integer, else a :class:`WorkflowDefinitionError` (a ``ValueError``)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WorkflowDefinitionError(f"{what} must be a positive integer, not {value!r}.")
    return value


def checked_timeout(value: float | None, what: str = "Workflow field 'timeout'") -> float | None:
    """``value`` if it is ``None`` or a positive number of seconds, else a :class:`WorkflowDefinitionError`."""
    try:
        return limit_seconds(value, what=what)
    except ValueError as exc:
        raise WorkflowDefinitionError(f"{exc}.") from None
