"""The checks Kaval.AI 1.0 makes when a document loads, run by :class:`KavalDocument`'s validator.

They raise :class:`~kavalai.workflow.WorkflowDefinitionError` (a ``ValueError``), so constructing the document model
directly fails with pydantic's ``ValidationError`` carrying upstream's wording, as upstream's models do, and the
loader re-raises the original error with its node and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import TYPE_CHECKING, Any, Protocol

from kavalai.llm.base import ModelSettings
from kavalai.secrets import get_logger
from kavalai.workflow._graph import did_you_mean
from kavalai.workflow.errors import WorkflowDefinitionError
from kavalai.workflow.kaval._node_models import (
    KavalAgentNode,
    KavalEndNode,
    KavalFunctionNode,
    KavalIfNode,
    KavalLlmNode,
    KavalParallelNode,
    KavalRagQueryNode,
    KavalStartNode,
    KavalSwitchNode,
)

if TYPE_CHECKING:
    from kavalai.workflow.kaval._node_models import KavalNode


class KavalDocument(Protocol):
    """What the checks read of a document (:class:`kavalai.workflow.kaval.KavalDocument`, which runs them as it
    is validated)."""

    nodes: list[Any]
    start_node: str | None
    data_types: dict[str, dict[str, Any]]
    llm_model: str | None
    llm_kwargs: dict[str, Any]

    @property
    def start(self) -> str:
        """The start node's name."""


__all__ = ["MODEL_NODES", "WRITERS", "check_document", "model_settings", "reachable", "targets"]

#: The nodes that write a context variable, and those of them whose output must be a declared data type (a
#: rag_query node's output shape is ours, not the author's).
WRITERS = (KavalLlmNode, KavalAgentNode, KavalFunctionNode, KavalRagQueryNode)
TYPEDWRITERS = (KavalLlmNode, KavalAgentNode, KavalFunctionNode)
MODEL_NODES = (KavalLlmNode, KavalAgentNode)

logger = get_logger("kavalai.workflow")

#: Upstream's ``llm_kwargs`` keys: the first two are applied, ``timeout_seconds`` bounds an llm node.
_SETTINGS = {"temperature": "temperature", "max_output_tokens": "max_tokens"}
_UNSUPPORTED_SETTINGS = frozenset({"top_p", "reasoning_effort", "service_tier", "stream_timeout_seconds"})


def check_document(spec: KavalDocument) -> None:
    """Every load-time check of upstream's ``WorkflowGraph``."""
    _Checks(spec).run()


class _Checks:
    def __init__(self, spec: KavalDocument) -> None:
        self.spec = spec

    def run(self) -> None:
        self._check_names()
        self._check_document()
        for node in self.spec.nodes:
            if isinstance(node, KavalParallelNode):
                self._parallel(node)

    def _check_names(self) -> None:
        names = [node.name for node in self.spec.nodes]
        dupes = sorted({name for name in names if names.count(name) > 1})
        if dupes:
            raise WorkflowDefinitionError(f"Duplicate node names: {dupes}", node=dupes[0], field="name")
        for node in self.spec.nodes:
            for target in targets(node):
                if target not in names:
                    raise WorkflowDefinitionError(
                        f"Node {node.name!r} transitions to unknown node {target!r}.{did_you_mean(target, names)}",
                        node=node.name,
                        field="next",
                    )

    def _check_document(self) -> None:
        spec = self.spec
        starts = [node.name for node in spec.nodes if isinstance(node, KavalStartNode)]
        if len(starts) != 1:
            raise WorkflowDefinitionError(
                f"Workflow must define exactly one 'start' node, found {len(starts)}.", field="nodes"
            )
        if spec.start_node is not None and spec.start_node != starts[0]:
            raise WorkflowDefinitionError(
                f"Field 'start' names {spec.start_node!r}, but the start node is {starts[0]!r}.", field="start"
            )
        ends = sorted({node.output for node in spec.nodes if isinstance(node, KavalEndNode)})
        if not ends:
            raise WorkflowDefinitionError("Workflow must define at least one 'end' node.", field="nodes")
        if len(ends) > 1:
            raise WorkflowDefinitionError(
                f"All 'end' nodes must return the same output data type, found {ends}.", field="nodes"
            )
        for node in spec.nodes:
            if isinstance(node, TYPEDWRITERS) and node.output not in spec.data_types:
                raise WorkflowDefinitionError(
                    f"Node {node.name!r} output {node.output!r} is not declared in data_types."
                    f"{did_you_mean(node.output, spec.data_types)}",
                    node=node.name,
                    field="output",
                )
            if isinstance(node, KavalRagQueryNode) and node.service and ("://" in node.service or "@" in node.service):
                raise WorkflowDefinitionError(
                    f"Node {node.name!r} service {node.service!r} looks like a connection string; a workflow names a "
                    "RAG service and the engine is given the retriever (rag_services=...).",
                    node=node.name,
                    field="service",
                )
        models = [("workflow 'llm_model'", spec.llm_model)] + [
            (f"node {node.name!r} llm_model", node.llm_model) for node in spec.nodes if isinstance(node, MODEL_NODES)
        ]
        for field, model in models:
            if model is not None:
                _check_model_name(model, field)
        model_settings("The workflow", spec.llm_kwargs)
        for node in spec.nodes:
            if isinstance(node, MODEL_NODES):
                model_settings(f"Node {node.name!r}", {**spec.llm_kwargs, **node.llm_kwargs}, node.name)

    def _parallel(self, node: KavalParallelNode) -> None:
        by_name = {n.name: n for n in self.spec.nodes}
        writes: dict[str, set[str]] = {}
        reach: dict[str, set[str]] = {}
        for entry in node.branches:
            if entry == node.next:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branch {entry!r} is also the join node ('next'), so it is empty.",
                    node=node.name,
                    field="branches",
                )
            members = reachable(entry, node.next, by_name)
            if node.name in members:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branch {entry!r} loops back into the parallel node; a branch must "
                    f"rejoin at {node.next!r}.",
                    node=node.name,
                    field="branches",
                )
            ends = [m for m in members if isinstance(by_name[m], KavalEndNode)]
            if ends or self.spec.start in members:
                reached = f"end node {ends[0]!r}" if ends else f"the start node {self.spec.start!r}"
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branch {entry!r} can reach {reached}; a branch must rejoin at "
                    f"{node.next!r}.",
                    node=node.name,
                    field="branches",
                )
            reach[entry] = set(members)
            writes[entry] = {n.output for m in members if isinstance(n := by_name[m], WRITERS)}
        for left, right in combinations(node.branches, 2):
            shared = sorted(reach[left] & reach[right])
            if shared:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branches {left!r} and {right!r} share node(s) {shared}; branch "
                    "subgraphs must be disjoint.",
                    node=node.name,
                    field="branches",
                )
            clash = sorted(writes[left] & writes[right])
            if clash:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branches {left!r} and {right!r} both write {clash}; each branch "
                    "must write its own output variable.",
                    node=node.name,
                    field="branches",
                )


def reachable(entry: str, stop: str, nodes: Mapping[str, KavalNode]) -> list[str]:
    """The node names reachable from ``entry`` without passing ``stop``."""
    seen: list[str] = []
    pending = [entry]
    while pending:
        current = pending.pop()
        if current == stop or current in seen or current not in nodes:
            continue
        seen.append(current)
        pending.extend(targets(nodes[current]))
    return seen


def targets(node: KavalNode) -> list[str]:
    """The names a node may transition to."""
    if isinstance(node, KavalIfNode):
        return [node.then, node.else_]
    if isinstance(node, KavalSwitchNode):
        return [*node.cases.values(), *([node.default] if node.default else [])]
    if isinstance(node, KavalParallelNode):
        return [*node.branches, node.next]
    if isinstance(node, KavalEndNode):
        return []
    return [node.next]


def _check_model_name(model: str, field: str) -> None:
    provider, slash, _ = model.partition("/")
    if not slash:
        raise WorkflowDefinitionError(
            f"The {field} is {model!r}, which is not in 'provider/model' form.", field="llm_model"
        )
    if "." in provider:
        raise WorkflowDefinitionError(
            f"The {field} names provider {provider!r}: a workflow names a provider, never an importable Python path.",
            field="llm_model",
        )
    from kavalai.llm.registry import PROVIDERS

    if provider not in PROVIDERS:
        # A warning, as upstream gives: the engine may be handed a client for this name (llm=, llms=).
        logger.warning(
            "The %s: Unsupported LLM provider %r (known: %s). The workflow loads; a node using it fails when it "
            "runs unless the engine is given a client for it (llm=..., llms={%r: client}).",
            field,
            provider,
            ", ".join(PROVIDERS),
            model,
        )


def model_settings(
    label: str, kwargs: Mapping[str, Any], node: str | None = None
) -> tuple[ModelSettings | None, float | None]:
    """Upstream's ``llm_kwargs`` as our settings and an llm node's timeout; keys we cannot honour are refused."""
    known = sorted({*_SETTINGS, *_UNSUPPORTED_SETTINGS, "timeout_seconds"})
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        hint = " The output cap is spelled 'max_output_tokens'." if "max_tokens" in unknown else ""
        raise WorkflowDefinitionError(
            f"{label} has unknown llm_kwargs {unknown}; the known keys are {known}.{hint}",
            node=node,
            field="llm_kwargs",
        )
    unsupported = sorted(set(kwargs) & _UNSUPPORTED_SETTINGS)
    if unsupported:
        raise WorkflowDefinitionError(
            f"{label}: llm_kwargs {unsupported} are not sent by kavalai's model clients; remove them "
            "(supported: temperature, max_output_tokens, timeout_seconds).",
            node=node,
            field="llm_kwargs",
        )
    for key, value in kwargs.items():
        if value is not None and not _valid_setting(key, value):
            raise WorkflowDefinitionError(
                f"{label} has invalid llm_kwargs: {key} must be a positive number, not {value!r}.",
                node=node,
                field=f"llm_kwargs.{key}",
            )
    values = {ours: kwargs[theirs] for theirs, ours in _SETTINGS.items() if kwargs.get(theirs) is not None}
    timeout = kwargs.get("timeout_seconds")
    return (ModelSettings(**values) if values else None), None if timeout is None else float(timeout)


def _valid_setting(key: str, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if key == "max_output_tokens":
        return isinstance(value, int) and value > 0
    return key == "temperature" or value > 0
