"""WorkflowBuilder: define a workflow in Python, fluently, with Pydantic models as its data types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from kavalai.workflow._graph import DEFAULT_MAX_VISITS, Workflow, checked_timeout, field_problem
from kavalai.workflow._nodes import (
    AgentNode,
    EndNode,
    FunctionNode,
    IfNode,
    LlmNode,
    NodeBase,
    ParallelNode,
    RetryPolicy,
    StartNode,
    SwitchNode,
)
from kavalai.workflow._sizes import DEFAULT_MAX_SIZE
from kavalai.workflow._types import TypeRegistry, type_name_of
from kavalai.workflow.errors import WorkflowDefinitionError

__all__ = ["WorkflowBuilder", "node_from_fields"]

#: A data type: a Pydantic model (or any type pydantic validates), or the name of a declared or built-in type.
TypeRef = type[Any] | str | Any


class WorkflowBuilder:
    """Builds a :class:`Workflow` node by node; :meth:`build` checks the whole graph.

    Example::

        workflow = (
            WorkflowBuilder("count-words", input=Folder, output=Count)
            .start(next="listing")
            .function("listing", tool="python://fs.ls", inputs={"path": "input.folder"}, next="done")
            .end("done", outputs={"files": "len(listing.result)"})
            .build()
        )

    Types may be given as Python types anywhere (they are declared under their class name) or as the names of
    types declared with :meth:`declare_type`.

    ``kavalai.workflow.WorkflowBuilder`` is this builder speaking Kaval.AI 1.0's vocabulary too (its subclass in
    ``kavalai.workflow.kaval``); this class knows only kavalai's.
    """

    def __init__(
        self,
        name: str,
        *,
        input: TypeRef = "object",
        output: TypeRef = "object",
        description: str = "",
    ) -> None:
        self._name = name
        self._description = description
        self._types = TypeRegistry()
        self._nodes: list[NodeBase] = []
        self._input = self._ref(input)
        self._output = self._ref(output)
        self._max_visits = DEFAULT_MAX_VISITS
        self._timeout: float | None = None
        self._max_value_size = DEFAULT_MAX_SIZE

    def declare_type(self, annotation: Any, name: str | None = None) -> WorkflowBuilder:
        """Declare a data type under ``name`` (by default its class name)."""
        self._ref(annotation, name)
        return self

    def limits(
        self, *, max_visits: int | None = None, timeout: float | None = None, max_value_size: int | None = None
    ) -> WorkflowBuilder:
        """Set the node-visit limit, the run timeout in seconds and the size limit of the values expressions and
        templates build (characters or items, see :class:`Workflow`); a limit not given is left as it was.

        Raises:
            WorkflowDefinitionError: ``timeout`` is not positive seconds (``math.inf`` and more than a year are
                clamped to a year: the one rule of ``kavalai.kernel.limit_seconds``).
        """
        seconds = checked_timeout(timeout)
        if max_value_size is not None:
            self._max_value_size = max_value_size
        if max_visits is not None:
            self._max_visits = max_visits
        if seconds is not None:
            self._timeout = seconds
        return self

    def start(self, id: str = "start", *, next: str) -> WorkflowBuilder:
        """Add the start node."""
        return self._add(StartNode, id=id, next=next)

    def end(self, id: str = "end", *, outputs: Mapping[str, Any] | None = None) -> WorkflowBuilder:
        """Add an end node; ``outputs`` maps output fields to paths, ``{"expr": ...}`` or literals."""
        return self._add(EndNode, id=id, outputs=None if outputs is None else dict(outputs))

    def function(
        self,
        id: str,
        *,
        tool: str,
        inputs: Mapping[str, Any] | None = None,
        output: TypeRef | None = None,
        next: str | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
    ) -> WorkflowBuilder:
        """Add a node that calls the tool at ``tool`` with ``inputs`` and validates its output by ``output``."""
        return self._add(
            FunctionNode,
            id=id,
            tool=tool,
            inputs=dict(inputs or {}),
            output=self._optional_ref(output),
            next=next,
            timeout=timeout,
            retry=retry,
        )

    def agent(
        self,
        id: str,
        *,
        prompt: str,
        inputs: Mapping[str, Any] | None = None,
        instructions: str | None = None,
        allowed_tools: Sequence[str] | None = None,
        max_steps: int | None = None,
        model: str | None = None,
        output: TypeRef | None = None,
        next: str | None = None,
        timeout: float | None = None,
    ) -> WorkflowBuilder:
        """Add a node that runs an agent on the engine's kernel with the rendered ``prompt``."""
        return self._add(
            AgentNode,
            id=id,
            prompt=prompt,
            inputs=dict(inputs or {}),
            instructions=instructions,
            allowed_tools=None if allowed_tools is None else list(allowed_tools),
            max_steps=max_steps,
            model=model,
            output=self._optional_ref(output),
            next=next,
            timeout=timeout,
        )

    def llm(
        self,
        id: str,
        *,
        prompt: str,
        inputs: Mapping[str, Any] | None = None,
        system: str | None = None,
        model: str | None = None,
        output: TypeRef | None = None,
        next: str | None = None,
        timeout: float | None = None,
    ) -> WorkflowBuilder:
        """Add a node that makes one model call, with a structured answer when ``output`` is a model."""
        return self._add(
            LlmNode,
            id=id,
            prompt=prompt,
            inputs=dict(inputs or {}),
            system=system,
            model=model,
            output=self._optional_ref(output),
            next=next,
            timeout=timeout,
        )

    def if_(self, id: str, *, condition: str, then: str, else_: str) -> WorkflowBuilder:
        """Add a node that continues to ``then`` when ``condition`` holds, else to ``else_``."""
        return self._add(IfNode, id=id, condition=condition, then=then, **{"else": else_})

    def switch(self, id: str, *, value: str, cases: Mapping[Any, str], default: str | None = None) -> WorkflowBuilder:
        """Add a node that continues to the node of the case equal to ``value``, else to ``default``."""
        return self._add(SwitchNode, id=id, value=value, cases=dict(cases), default=default)

    def parallel(
        self, id: str, *, branches: Sequence[str], next: str | None = None, timeout: float | None = None
    ) -> WorkflowBuilder:
        """Add a node that runs the branches starting at ``branches`` concurrently, then continues to ``next``."""
        return self._add(ParallelNode, id=id, branches=list(branches), next=next, timeout=timeout)

    def add_node(self, node: NodeBase) -> WorkflowBuilder:
        """Add a node model built elsewhere."""
        self._nodes.append(node)
        return self

    def build(self) -> Workflow:
        """Check the graph and return the :class:`Workflow`.

        Raises:
            WorkflowDefinitionError: an unknown node, an undeclared type, several start nodes, an unreachable
                node or an end that cannot be reached; the message names the node and field.
        """
        return Workflow(
            name=self._name,
            description=self._description,
            nodes=self._nodes,
            types=self._types,
            input_type=self._input,
            output_type=self._output,
            max_visits=self._max_visits,
            timeout=self._timeout,
            max_value_size=self._max_value_size,
        )

    # ------------------------------------------------------------------------------------------------ helpers

    def _add(self, cls: type[NodeBase], **fields: Any) -> WorkflowBuilder:
        self._nodes.append(node_from_fields(cls, fields))
        return self

    def _optional_ref(self, annotation: TypeRef | None) -> str | None:
        return None if annotation is None else self._ref(annotation)

    def _ref(self, annotation: TypeRef, name: str | None = None) -> str:
        if isinstance(annotation, str) and name is None:
            return annotation
        name = name or type_name_of(annotation)
        if name in self._types and name not in self._types.declared:
            return name  # a built-in scalar such as str -> "string"
        try:
            self._types.add(name, annotation)
        except ValueError as exc:
            raise WorkflowDefinitionError(
                f"Workflow {self._name!r}: {exc}; give one of them another name.", field="types"
            ) from None
        return name


def node_from_fields(cls: type[NodeBase], fields: Mapping[str, Any], *, position: int | None = None) -> NodeBase:
    """Validate ``fields`` into a node of class ``cls``; raise :class:`WorkflowDefinitionError` naming the node
    (by id, else by its 1-based ``position`` in the list) and the field."""
    node_id = fields.get("id")
    try:
        return cls.model_validate(dict(fields))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in error["loc"]) or None
        problems = "; ".join(field_problem(e, cls.model_fields) for e in exc.errors(include_url=False))
        if isinstance(node_id, str):
            label = f"Node {node_id!r}"
        else:
            label = "A node" if position is None else f"Node #{position}"
        raise WorkflowDefinitionError(
            f"{label} ({cls.model_fields['kind'].default}): {problems}",
            node=node_id if isinstance(node_id, str) else None,
            field=field,
        ) from None
