"""A Kaval.AI 1.0 document -> our :class:`~kavalai.workflow.Workflow`, plus the tools it declares on a kernel.

Every check upstream makes at load is made here too (one start node, end nodes sharing one output type, outputs
declared in ``data_types``, model names in ``provider/model`` form, independent parallel branches), then the
graph itself is checked by :class:`~kavalai.workflow.Workflow` like any other.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from kavalai.workflow._expressions import compile_expression
from kavalai.workflow._graph import _RESERVED, Workflow, did_you_mean
from kavalai.workflow._nodes import NodeBase
from kavalai.workflow._types import TypeRegistry
from kavalai.workflow.errors import ExpressionError, WorkflowDefinitionError, quoted
from kavalai.workflow.kaval._checks import MODEL_NODES, WRITERS, model_settings, reachable
from kavalai.workflow.kaval._dialect import kaval_json_schema
from kavalai.workflow.kaval._models import (
    KavalAgentNode,
    KavalArgument,
    KavalDocument,
    KavalEndNode,
    KavalFunctionNode,
    KavalIfNode,
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

__all__ = ["load_kaval_document", "parse_kaval_document"]

#: Upstream's ``llm_kwargs`` keys: the first two are applied, ``timeout_seconds`` bounds an llm node.
_SETTINGS = {"temperature": "temperature", "max_output_tokens": "max_tokens"}
_UNSUPPORTED_SETTINGS = frozenset({"top_p", "reasoning_effort", "service_tier", "stream_timeout_seconds"})


#: What every message about an invalid Kaval.AI document starts with (Kaval.AI 1.0's tests match these words).
FAILED = "validation failed"


def parse_kaval_document(document: Any, *, source: str = "<document>") -> KavalDocument:
    """Check a parsed document against the Kaval.AI 1.0 schema and upstream's load-time checks.

    Raises:
        WorkflowDefinitionError: ``validation failed: Kaval.AI workflow '<source>': <the problem>``; ``source``
            names the file (or the text's first line), never the whole document.
    """
    try:
        return KavalDocument.model_validate(document)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        for error in errors:  # a document-level check: re-raise it as it was, with its node and field
            cause = (error.get("ctx") or {}).get("error")
            if isinstance(cause, WorkflowDefinitionError):
                raise _invalid(source, cause) from None
        problems = "; ".join(f"field {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in errors[:5])
        first = ".".join(map(str, errors[0]["loc"])) if errors else None
        raise _invalid(source, WorkflowDefinitionError(problems, field=first)) from None


def load_kaval_document(
    document: Any,
    *,
    kernel: FunctionKernel,
    base_dir: Path,
    rag_services: Retriever | Mapping[str, Retriever] | None = None,
    history: History | None = None,
    source: str = "<document>",
    data_models: Mapping[str, type[BaseModel]] | None = None,
) -> Workflow:
    """Check a Kaval.AI 1.0 document, register its tools and servers on ``kernel`` and return our graph.

    Raises:
        WorkflowDefinitionError: the document is invalid; the message starts ``validation failed: Kaval.AI
            workflow '<source>': `` and names the node or section and the field.
    """
    spec = parse_kaval_document(document, source=source)
    services: dict[str, Retriever]
    if rag_services is None:
        services = {}
    elif isinstance(rag_services, Mapping):
        services = dict(rag_services)
    else:
        services = {"default": rag_services}
    try:
        workflow = _Translator(spec, services, history, dict(data_models or {})).workflow()
        _register(spec, kernel, base_dir)
    except WorkflowDefinitionError as exc:
        raise _invalid(source, exc) from exc.__cause__
    return workflow


def _invalid(source: str, cause: WorkflowDefinitionError) -> WorkflowDefinitionError:
    return WorkflowDefinitionError(
        f"{FAILED}: Kaval.AI workflow {source!r}: {cause.message}", node=cause.node, field=cause.field
    )


class _Translator:
    def __init__(
        self,
        spec: KavalDocument,
        services: dict[str, Retriever],
        history: History | None,
        models: dict[str, type[BaseModel]],
    ) -> None:
        self.spec = spec
        self.models = models
        self.types = TypeRegistry()
        self.ids = {node.name: _node_id(node.name) for node in spec.nodes}
        self.outputs = frozenset(node.output for node in spec.nodes if isinstance(node, WRITERS))
        self.runtime = KavalRuntime(
            spec.name,
            llm_model=spec.llm_model,
            templates={t.name: t.value for t in spec.templates},
            rag_services=services,
            rag_service=spec.rag_service,
            rag_collection=spec.rag_collection,
            history=history,
        )
        self.join: dict[str, str] = {}  # node name -> the join node that ends its parallel branch

    def workflow(self) -> Workflow:
        spec = self.spec
        for name in spec.data_types:
            if name in self.models:  # a Pydantic model given for it (Kaval.AI's data_models=): used as it is
                self.types.add(name, self.models[name])
                continue
            try:
                self.types.add_json_schema(name, kaval_json_schema(name, spec.data_types))
            except (ValueError, TypeError) as exc:
                raise WorkflowDefinitionError(
                    f"Type {name!r} is not a usable JSON Schema: {exc}", field=f"data_types.{name}"
                ) from None
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

    def _parallel(self, node: KavalParallelNode) -> None:
        """Note which join node ends each branch member (the document checks made the branches independent)."""
        by_name = {n.name: n for n in self.spec.nodes}
        for entry in node.branches:
            for member in reachable(entry, node.next, by_name):
                self.join[member] = node.next

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
        assert isinstance(node, MODEL_NODES)  # the union is exhausted above
        self._inputs(name, node.inputs)
        self._template(name, "prompt", node.prompt)
        settings, timeout = model_settings(f"Node {name!r}", {**self.spec.llm_kwargs, **node.llm_kwargs}, name)
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
                f"Node {node!r}: field {field!r}: {quoted(source)} reads {quoted(root)}, which is neither 'input' nor "
                f"the output of any node.{did_you_mean(root, self._known())}",
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


def _node_id(name: str) -> str:
    """The upstream name, unless expressions reserve it (``input``, ``len``, keywords): then ``<name>#``."""
    return f"{name}#" if name in _RESERVED or keyword.iskeyword(name) else name


# ------------------------------------------------------------------------------------------------ kernel sections


def _register(spec: KavalDocument, kernel: FunctionKernel, base_dir: Path) -> None:
    """The tool sections, registered by :func:`kavalai.config.build_kernel` (the one place configuration becomes
    a kernel): ``{name, path}`` functions and the servers' fields as Kaval.AI 1.0 wrote them."""
    from kavalai.config import ConfigFieldError, KernelConfig, UnsetVariableError, build_kernel

    try:
        config = KernelConfig(
            python_functions=[{"function": entry.path, "name": entry.name} for entry in spec.python_functions],
            rest_servers=[dict(raw) for raw in spec.rest_servers],
            mcp_servers=[dict(raw) for raw in spec.mcp_servers],
            base_dir=base_dir,
        )
        build_kernel(config, kernel=kernel)
    except UnsetVariableError as exc:
        raise WorkflowDefinitionError(
            f"The workflow reads ${{{exc.variable}}}, but the environment variable {exc.variable} is not set.",
            field=exc.variable,
        ) from None
    except ConfigFieldError as exc:
        raise WorkflowDefinitionError(f"Field {exc.field!r}: {exc.reason}", field=exc.field) from exc.__cause__
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False, include_input=False)
        )
        raise WorkflowDefinitionError(f"The tool sections are invalid: {problems}") from None
