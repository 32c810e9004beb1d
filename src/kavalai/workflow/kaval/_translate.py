"""A Kaval.AI 1.0 document -> our :class:`~kavalai.workflow.Workflow`, plus the tools it declares on a kernel.

Every check upstream makes at load is made here too (one start node, end nodes sharing one output type, outputs
declared in ``data_types``, model names in ``provider/model`` form, independent parallel branches), then the
graph itself is checked by :class:`~kavalai.workflow.Workflow` like any other.
"""

from __future__ import annotations

import importlib
import importlib.util
import keyword
import sys
from collections.abc import Callable, Iterable, Mapping
from itertools import combinations
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kavalai.errors import FunctionKernelException
from kavalai.llm.base import ModelSettings
from kavalai.workflow import ExpressionError, NodeBase, Workflow, WorkflowDefinitionError, compile_expression
from kavalai.workflow._graph import _RESERVED, did_you_mean
from kavalai.workflow._types import TypeRegistry
from kavalai.workflow.kaval._dialect import kaval_json_schema
from kavalai.workflow.kaval._models import (
    KavalAgentNode,
    KavalArgument,
    KavalDocument,
    KavalEndNode,
    KavalFunctionNode,
    KavalIfNode,
    KavalLlmNode,
    KavalNode,
    KavalParallelNode,
    KavalRagQueryNode,
    KavalStartNode,
    KavalSwitchNode,
)
from kavalai.workflow.kaval._nodes import (
    KavalAgentStep,
    KavalBranch,
    KavalEnd,
    KavalFunctionStep,
    KavalLlmStep,
    KavalParallel,
    KavalRagStep,
    KavalStart,
    KavalSwitch,
)
from kavalai.workflow.kaval._runtime import PLACEHOLDER, History, KavalRuntime, Retriever

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["is_kaval_document", "load_kaval_document", "parse_kaval_document"]

_KAVAL_KEYS = frozenset({"data_types", "llm_model", "llm_kwargs", "version", "templates", "rag_service",
                         "rag_collection", "start"})  # fmt: skip
#: Upstream's ``llm_kwargs`` keys: the first two are applied, ``timeout_seconds`` bounds an llm node.
_SETTINGS = {"temperature": "temperature", "max_output_tokens": "max_tokens"}
_UNSUPPORTED_SETTINGS = frozenset({"top_p", "reasoning_effort", "service_tier", "stream_timeout_seconds"})


def is_kaval_document(document: Any) -> bool:
    """Whether a parsed YAML document has the Kaval.AI 1.0 shape: nodes with ``name``/``type`` (ours have
    ``id``/``kind``), or a top-level key only that format has (``data_types``, ``llm_model``, ``start``, ...)."""
    if not isinstance(document, Mapping):
        return False
    nodes = document.get("nodes")
    if isinstance(nodes, list) and nodes and isinstance(nodes[0], Mapping):
        first = nodes[0]
        if "kind" in first or "id" in first:
            return False
        if "type" in first or "name" in first:
            return True
    return any(key in document for key in _KAVAL_KEYS)


def parse_kaval_document(document: Any, *, source: str = "<document>") -> KavalDocument:
    """Check a parsed document against the Kaval.AI 1.0 schema."""
    try:
        return KavalDocument.model_validate(document)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problems = "; ".join(f"field {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in errors[:5])
        first = ".".join(map(str, errors[0]["loc"])) if errors else None
        raise WorkflowDefinitionError(f"Kaval.AI workflow {source!r}: {problems}", field=first) from None


def load_kaval_document(
    document: Any,
    *,
    kernel: FunctionKernel,
    base_dir: Path,
    rag_services: Retriever | Mapping[str, Retriever] | None = None,
    history: History | None = None,
    source: str = "<document>",
) -> Workflow:
    """Check a Kaval.AI 1.0 document, register its tools and servers on ``kernel`` and return our graph."""
    spec = parse_kaval_document(document, source=source)
    services: dict[str, Retriever]
    if rag_services is None:
        services = {}
    elif isinstance(rag_services, Mapping):
        services = dict(rag_services)
    else:
        services = {"default": rag_services}
    workflow = _Translator(spec, services, history).workflow()
    _register(spec, kernel, base_dir)
    return workflow


class _Translator:
    def __init__(self, spec: KavalDocument, services: dict[str, Retriever], history: History | None) -> None:
        self.spec = spec
        self.types = TypeRegistry()
        self.ids = {node.name: _node_id(node.name) for node in spec.nodes}
        self.outputs = frozenset(node.output for node in spec.nodes if isinstance(node, _WRITERS))
        self.runtime = KavalRuntime(
            spec.name,
            llm_model=spec.llm_model,
            templates={t.name: t.value for t in spec.templates},
            outputs=self.outputs,
            rag_services=services,
            rag_service=spec.rag_service,
            rag_collection=spec.rag_collection,
            history=history,
        )
        self.join: dict[str, str] = {}  # node name -> the join node that ends its parallel branch

    def workflow(self) -> Workflow:
        spec = self.spec
        for name in spec.data_types:
            try:
                self.types.add_json_schema(name, kaval_json_schema(name, spec.data_types))
            except (ValueError, TypeError) as exc:
                raise WorkflowDefinitionError(
                    f"Type {name!r} is not a usable JSON Schema: {exc}", field=f"data_types.{name}"
                ) from None
        self._check_document()
        for node in spec.nodes:
            if isinstance(node, KavalParallelNode):
                self._parallel(node)
        nodes = [self._node(node) for node in spec.nodes]
        ends = {node.output for node in spec.nodes if isinstance(node, KavalEndNode)}
        output = next(iter(ends), "output")
        return Workflow(
            name=spec.name,
            description=spec.description,
            nodes=nodes,
            types=self.types,
            input_type="input" if "input" in spec.data_types else "any",
            output_type=output if output in spec.data_types else "any",
        )

    # ------------------------------------------------------------------------------------------- document checks

    def _check_document(self) -> None:
        spec = self.spec
        starts = [node.name for node in spec.nodes if isinstance(node, KavalStartNode)]
        if len(starts) != 1:
            raise WorkflowDefinitionError(
                f"Workflow must define exactly one 'start' node, found {len(starts)}.", field="nodes"
            )
        if spec.start is not None and spec.start != starts[0]:
            raise WorkflowDefinitionError(
                f"Field 'start' names {spec.start!r}, but the start node is {starts[0]!r}.", field="start"
            )
        ends = sorted({node.output for node in spec.nodes if isinstance(node, KavalEndNode)})
        if not ends:
            raise WorkflowDefinitionError("Workflow must define at least one 'end' node.", field="nodes")
        if len(ends) > 1:
            raise WorkflowDefinitionError(
                f"All 'end' nodes must return the same output data type, found {ends}.", field="nodes"
            )
        for node in spec.nodes:
            if isinstance(node, _TYPED_WRITERS) and node.output not in spec.data_types:
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
        models = [("llm_model", spec.llm_model)] + [
            (f"nodes.{node.name}.llm_model", node.llm_model) for node in spec.nodes if isinstance(node, _MODEL_NODES)
        ]
        for field, model in models:
            if model is not None:
                _check_model_name(model, field)
        _settings("The workflow", spec.llm_kwargs)

    def _parallel(self, node: KavalParallelNode) -> None:
        by_name = {n.name: n for n in self.spec.nodes}
        writes: dict[str, set[str]] = {}
        for entry in node.branches:
            if entry == node.next:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branch {entry!r} is also the join node ('next'), so it is empty.",
                    node=node.name,
                    field="branches",
                )
            members = _reachable(entry, node.next, by_name)
            if node.name in members:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branch {entry!r} loops back into the parallel node; a branch must "
                    f"rejoin at {node.next!r}.",
                    node=node.name,
                    field="branches",
                )
            for member in members:
                self.join[member] = node.next
            writes[entry] = {n.output for m in members if isinstance(n := by_name[m], _WRITERS)}
        for left, right in combinations(node.branches, 2):
            clash = sorted(writes[left] & writes[right])
            if clash:
                raise WorkflowDefinitionError(
                    f"Parallel node {node.name!r}: branches {left!r} and {right!r} both write {clash}; each branch "
                    "must write its own output variable.",
                    node=node.name,
                    field="branches",
                )

    # ------------------------------------------------------------------------------------------------- nodes

    def _target(self, source: str, target: str | None) -> str | None:
        """The id of a transition target; ``None`` where a branch reaches its join node (the branch ends)."""
        if target is None:
            return None
        if self.join.get(source) == target:
            return None
        if target not in self.ids:
            raise WorkflowDefinitionError(
                f"Node {source!r} transitions to unknown node {target!r}.{did_you_mean(target, self.ids)}",
                node=source,
                field="next",
            )
        return self.ids[target]

    def _node(self, node: KavalNode) -> NodeBase:
        node_id, name = self.ids[node.name], node.name
        if isinstance(node, KavalStartNode):
            return KavalStart(id=node_id, next=self._target(name, node.next))
        if isinstance(node, KavalEndNode):
            return KavalEnd(id=node_id, returns=node.output)
        if isinstance(node, KavalParallelNode):
            return KavalParallel(
                id=node_id,
                branches=[self.ids.get(b, b) for b in node.branches],
                next=self._target(name, node.next),
            )
        if isinstance(node, KavalIfNode):
            return KavalBranch(
                id=node_id,
                condition=node.condition,
                then=self._target(name, node.then),
                else_=self._target(name, node.else_),
                expression=self._expression(name, "condition", node.condition),
                runtime=self.runtime,
            )
        if isinstance(node, KavalSwitchNode):
            return KavalSwitch(
                id=node_id,
                expr=node.expr,
                cases={key: self._target(name, target) for key, target in node.cases.items()},
                default=self._target(name, node.default),
                has_default=node.default is not None,
                expression=self._expression(name, "expr", node.expr),
                runtime=self.runtime,
            )
        common: dict[str, Any] = {
            "id": node_id,
            "next": self._target(name, node.next),
            "output": node.output,
            "runtime": self.runtime,
            "data_type": self.types.get(node.output) if node.output in self.spec.data_types else None,
        }
        if isinstance(node, KavalFunctionNode):
            self._inputs(name, node.inputs)
            method = node.method if "method" in node.model_fields_set else None
            return KavalFunctionStep(tool=node.tool, inputs=node.inputs, method=method, **common)
        if isinstance(node, KavalRagQueryNode):
            self._template(name, "query", node.query)
            for key, value in (node.match or {}).items():
                if isinstance(value, str):
                    self._template(name, f"match.{key}", value)
            return KavalRagStep(
                query=node.query,
                service=node.service,
                collection=node.collection,
                top_k=node.top_k,
                source_ids=node.source_ids,
                match=node.match,
                keep_best=node.keep_best,
                min_similarity=node.min_similarity,
                store_as=node.store,
                **common,
            )
        assert isinstance(node, _MODEL_NODES)  # the union is exhausted above
        self._inputs(name, node.inputs)
        self._template(name, "prompt", node.prompt)
        settings, timeout = _settings(f"Node {name!r}", {**self.spec.llm_kwargs, **node.llm_kwargs}, name)
        model_fields: dict[str, Any] = {
            "prompt": node.prompt,
            "inputs": node.inputs,
            "use_history": node.use_history,
            "history_limit": node.history_limit,
            "history_max_chars": node.history_max_chars,
            "llm_model": node.llm_model,
            "settings": settings,
        }
        if isinstance(node, KavalAgentNode):
            return KavalAgentStep(allowed_tools=node.allowed_tools, max_steps=node.max_steps, **model_fields, **common)
        return KavalLlmStep(timeout=timeout, **model_fields, **common)

    # ---------------------------------------------------------------------------------------- text checks

    def _known(self) -> set[str]:
        return {"input", *self.outputs}

    def _root_check(self, node: str, field: str, source: str, names: Iterable[str]) -> None:
        for root in sorted(set(names) - self._known()):
            raise WorkflowDefinitionError(
                f"Node {node!r}: field {field!r}: {source!r} reads {root!r}, which is neither 'input' nor the "
                f"output of any node.{did_you_mean(root, self._known())}",
                node=node,
                field=field,
            )

    def _expression(self, node: str, field: str, source: str) -> Any:
        try:
            expression = compile_expression(source)
        except ExpressionError as exc:
            raise WorkflowDefinitionError(
                f"Node {node!r}: field {field!r}: {exc.message}", node=node, field=field
            ) from None
        self._root_check(node, field, source, expression.names)
        return expression

    def _inputs(self, node: str, inputs: Mapping[str, KavalArgument]) -> None:
        for key, argument in inputs.items():
            if argument.type == "context":
                path = argument.value if argument.value is not None else argument.name or key
                if not isinstance(path, str):
                    raise WorkflowDefinitionError(
                        f"Node {node!r}: field 'inputs.{key}': a context input's value is a path such as "
                        f"'input.user_message', not {path!r}.",
                        node=node,
                        field=f"inputs.{key}",
                    )
                self._expression(node, f"inputs.{key}", path)

    def _template(self, node: str, field: str, source: str) -> None:
        for match in PLACEHOLDER.finditer(source):
            prefix, path = match.group(1), match.group(2).strip()
            if prefix == "templates" and path not in self.runtime.templates:
                raise WorkflowDefinitionError(
                    f"Node {node!r}: field {field!r} reads templates.{path}, which is not declared under "
                    f"'templates'.{did_you_mean(path, self.runtime.templates)}",
                    node=node,
                    field=field,
                )
            if prefix == "context":
                self._expression(node, field, path)


_WRITERS = (KavalLlmNode, KavalAgentNode, KavalFunctionNode, KavalRagQueryNode)
_MODEL_NODES = (KavalLlmNode, KavalAgentNode)
#: The writers whose output must be a declared data type (a rag_query node's output shape is ours).
_TYPED_WRITERS = (KavalLlmNode, KavalAgentNode, KavalFunctionNode)


def _node_id(name: str) -> str:
    """The upstream name, unless expressions reserve it (``input``, ``len``, keywords): then ``<name>#``."""
    return f"{name}#" if name in _RESERVED or keyword.iskeyword(name) else name


def _reachable(entry: str, stop: str, nodes: Mapping[str, KavalNode]) -> list[str]:
    seen: list[str] = []
    pending = [entry]
    while pending:
        current = pending.pop()
        if current == stop or current in seen or current not in nodes:
            continue
        seen.append(current)
        pending.extend(_targets(nodes[current]))
    return seen


def _targets(node: KavalNode) -> list[str]:
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
            f"Field {field!r} is {model!r}, which is not in 'provider/model' form.", field=field
        )
    if "." in provider:
        raise WorkflowDefinitionError(
            f"Field {field!r} names provider {provider!r}: a workflow names a provider, never an importable Python "
            "path.",
            field=field,
        )


def _settings(
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


# ------------------------------------------------------------------------------------------------ kernel sections


def _register(spec: KavalDocument, kernel: FunctionKernel, base_dir: Path) -> None:
    from kavalai import McpServer, RestServer, pythontool
    from kavalai.adapters.python import is_pythontool

    for i, entry in enumerate(spec.python_functions):
        field = f"python_functions[{i}]"
        func = _import(entry.path, field, base_dir)
        if not callable(func):
            raise WorkflowDefinitionError(f"Field {field!r}: {entry.path!r} is not a function.", field=field)
        tool = func if is_pythontool(func) else pythontool(func)
        _guard(field, kernel.register_python_tool, entry.name, tool)
    for i, raw in enumerate(spec.rest_servers):
        field = f"rest_servers[{i}]"
        server = _guard(field, RestServer, **raw)
        _guard(field, kernel.register_rest_server, server)
    for i, raw in enumerate(spec.mcp_servers):
        field = f"mcp_servers[{i}]"
        mcp = _guard(field, McpServer, **raw)
        _guard(field, kernel.register_mcp_server, mcp)


def _guard(field: str, action: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return action(*args, **kwargs)
    except (ValidationError, ValueError, TypeError, FunctionKernelException) as exc:
        raise WorkflowDefinitionError(f"Field {field!r}: {exc}", field=field) from None


def _import(dotted: str, field: str, base_dir: Path) -> Any:
    module_name, _, attribute = dotted.rpartition(".")
    if not module_name:
        raise WorkflowDefinitionError(
            f"Field {field!r}: {dotted!r} is not a dotted path such as 'package.module.function'.", field=field
        )
    module = _module(module_name, field, base_dir)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise WorkflowDefinitionError(
            f"Field {field!r}: module {module_name!r} has no attribute {attribute!r}.", field=field
        ) from None


def _module(name: str, field: str, base_dir: Path) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not name.startswith(exc.name):
            raise
    path = base_dir.joinpath(*name.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(name, path) if path.is_file() else None
    if spec is None or spec.loader is None:
        raise WorkflowDefinitionError(
            f"Field {field!r}: cannot import module {name!r} (not importable, and no {path.name} next to the "
            "workflow file).",
            field=field,
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
