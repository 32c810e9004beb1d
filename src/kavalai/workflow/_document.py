"""Our workflow documents: a parsed document -> a checked :class:`Workflow` plus the kernel it declares (the
dialect :mod:`kavalai.workflow._load` reads when no other recognises a document).

The graph sections (``nodes``, ``types``, ``input``, ``output``, ``limits``) are read here; the kernel sections
(``python_functions``, ``tools``, ``rest_servers``, ``mcp_servers``, ``models``, ``output_budget``) go to
:func:`kavalai.config.build_document`, which owns "document -> kernel, services, models": ``${VAR}``,
``${WORKFLOW_DIR}`` (the file's folder) and ``${PYTHON}``; modules imported normally or from the file's folder;
relative paths relative to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kavalai.errors import ConfigurationError
from kavalai.kernel import Seconds
from kavalai.workflow._builder import node_from_fields
from kavalai.workflow._graph import DEFAULT_MAX_VISITS, Workflow, did_you_mean, field_problem
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
from kavalai.workflow._parts import LoadedWorkflow
from kavalai.workflow._services import ServedRestApp
from kavalai.workflow._sizes import DEFAULT_MAX_SIZE
from kavalai.workflow._types import TypeRegistry
from kavalai.workflow.errors import WorkflowDefinitionError

if TYPE_CHECKING:
    from kavalai import FunctionKernel
    from kavalai.config import BuiltDocument, RegisterApp
    from kavalai.llm.base import LLMClient

__all__ = ["load_document", "workflow_from_document"]

_NODE_KINDS: dict[str, type[NodeBase]] = {
    cls.model_fields["kind"].default: cls
    for cls in (StartNode, EndNode, FunctionNode, AgentNode, LlmNode, IfNode, SwitchNode, ParallelNode)
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Limits(_Section):
    max_visits: int = Field(DEFAULT_MAX_VISITS, ge=1)
    timeout: Seconds | None = Field(None)
    max_value_size: int = Field(DEFAULT_MAX_SIZE, ge=1)


class _PythonFunction(_Section):
    function: str
    name: str | None = None
    timeout: Seconds | None = Field(None)


class _Bundled(_Section):
    model_config = ConfigDict(extra="allow")
    group: str


class _Model(_Section):
    factory: str | None = None
    model: str | None = None


class _OutputBudget(_Section):
    max_chars: int = Field(20_000, ge=1)
    per_tool: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    overflow: Literal["truncate", "artifact"] = "truncate"
    artifact_dir: str | None = None


class _Document(_Section):
    name: str = "workflow"
    description: str = ""
    input: str | dict[str, Any] | None = None
    output: str | dict[str, Any] | None = None
    types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    limits: _Limits = Field(default_factory=_Limits)
    python_functions: list[str | _PythonFunction] = Field(default_factory=list)
    tools: list[str | _Bundled] = Field(default_factory=list)
    rest_servers: list[dict[str, Any]] = Field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    models: dict[str, str | _Model] = Field(default_factory=dict)
    output_budget: _OutputBudget | None = None
    tracing: bool | None = None  # read by `kavalai run` and `kavalai worker` (kavalai.cli._tracing)
    nodes: list[dict[str, Any]]


def load_document(
    document: Any, *, base_dir: Path, source: str = "<document>", kernel: FunctionKernel | None = None
) -> LoadedWorkflow:
    """Load a parsed document (a dict) of ours: the graph, then the kernel sections (on ``kernel``, a new one by
    default).

    Raises:
        WorkflowDefinitionError: the document is invalid, naming the document, the node or section and field.
    """
    spec = _parse(document, source)
    workflow = _workflow(spec)
    built = built_sections(_kernel_sections(spec), base_dir=base_dir, kernel=kernel)
    return LoadedWorkflow(
        workflow=workflow,
        kernel=built.kernel,
        owns_kernel=kernel is None,
        models={name: _defined(make) for name, make in built.models.items()},
        services=[ServedRestApp(app.app, _registered(app.register), field=app.field) for app in built.served],
        output_budget=built.output_budget,
    )


def _kernel_sections(spec: _Document) -> dict[str, Any]:
    """The sections :func:`kavalai.config.build_document` reads, as plain data (checked here for their shape)."""
    return {
        "python_functions": [
            entry if isinstance(entry, str) else entry.model_dump(exclude_none=True) for entry in spec.python_functions
        ],
        "tools": [
            entry if isinstance(entry, str) else {"group": entry.group, **(entry.model_extra or {})}
            for entry in spec.tools
        ],
        "rest_servers": spec.rest_servers,
        "mcp_servers": spec.mcp_servers,
        "models": {
            name: entry if isinstance(entry, str) else entry.model_dump(exclude_none=True)
            for name, entry in spec.models.items()
        },
        "output_budget": None if spec.output_budget is None else spec.output_budget.model_dump(),
    }


def _defined(make: Callable[[], LLMClient]) -> Callable[[], LLMClient]:
    """A model factory whose failure (a missing API key) is a definition error naming the field."""

    def factory() -> LLMClient:
        try:
            return make()
        except ConfigurationError as exc:
            raise definition_error(exc) from exc.__cause__

    return factory


def _registered(register: RegisterApp) -> RegisterApp:
    """A served app's registration whose configuration errors are definition errors naming the field."""

    async def registered(kernel: FunctionKernel, url: str, first: bool) -> None:
        try:
            await register(kernel, url, first)
        except ConfigurationError as exc:
            raise definition_error(exc) from exc.__cause__

    return registered


def definition_error(exc: ConfigurationError, *, reads: str = "The workflow") -> WorkflowDefinitionError:
    """A configuration error of a document's sections (from :mod:`kavalai.config`) as the definition error a
    workflow raises: the field it names, or the variable that is not set."""
    from kavalai.config import ConfigFieldError, UnsetVariableError

    if isinstance(exc, UnsetVariableError):
        name = exc.variable
        return WorkflowDefinitionError(
            f"{reads} reads ${{{name}}}, but the environment variable {name} is not set.", field=name
        )
    if isinstance(exc, ConfigFieldError):
        return WorkflowDefinitionError(f"Field {exc.field!r}: {exc.reason}", field=exc.field)
    return WorkflowDefinitionError(str(exc))


def built_sections(
    sections: Mapping[str, Any], *, base_dir: Path, kernel: FunctionKernel | None, reads: str = "The workflow"
) -> BuiltDocument:
    """:func:`kavalai.config.build_document` of a document's sections, its errors as definition errors."""
    from kavalai.config import build_document

    try:
        return build_document(sections, base_dir=base_dir, kernel=kernel)
    except ConfigurationError as exc:
        raise definition_error(exc, reads=reads) from exc.__cause__


def workflow_from_document(document: Any, *, source: str = "<document>") -> Workflow:
    """Only the checked graph of a parsed YAML document (no kernel sections are applied)."""
    return _workflow(_parse(document, source))


def _parse(document: Any, source: str) -> _Document:
    if not isinstance(document, Mapping):
        raise WorkflowDefinitionError(f"Workflow {source!r}: the document must be a mapping with a 'nodes' list.")
    try:
        return _Document.model_validate(document)
    except ValidationError as exc:
        fields = list(_Document.model_fields)
        problems = "; ".join(field_problem(e, fields) for e in exc.errors(include_url=False)[:5])
        first = ".".join(map(str, exc.errors(include_url=False)[0]["loc"]))
        raise WorkflowDefinitionError(f"Workflow {source!r}: {problems}", field=first) from None


def _workflow(spec: _Document) -> Workflow:
    types = TypeRegistry()
    for name, schema in spec.types.items():
        _declare(types, name, schema, f"types.{name}")
    input_type = _inline_type(types, spec.input, f"{_camel(spec.name)}Input", "input")
    output_type = _inline_type(types, spec.output, f"{_camel(spec.name)}Output", "output")
    nodes = [_node(raw, i) for i, raw in enumerate(spec.nodes)]
    return Workflow(
        name=spec.name,
        description=spec.description,
        nodes=nodes,
        types=types,
        input_type=input_type,
        output_type=output_type,
        max_visits=spec.limits.max_visits,
        timeout=spec.limits.timeout,
        max_value_size=spec.limits.max_value_size,
    )


def _declare(types: TypeRegistry, name: str, schema: Mapping[str, Any], field: str) -> None:
    if name in types:
        raise WorkflowDefinitionError(f"Type {name!r} is declared twice (or shadows a built-in type).", field=field)
    try:
        types.add_json_schema(name, schema)
    except (ValueError, TypeError) as exc:
        raise WorkflowDefinitionError(f"Type {name!r} is not a usable JSON Schema: {exc}", field=field) from None


def _inline_type(types: TypeRegistry, ref: str | dict[str, Any] | None, name: str, field: str) -> str | None:
    if isinstance(ref, dict):
        _declare(types, name, ref, field)
        return name
    return ref


def _node(raw: Mapping[str, Any], index: int) -> NodeBase:
    node_id = raw.get("id")
    label = f"Node {node_id!r}" if isinstance(node_id, str) else f"Node #{index + 1}"
    kind = raw.get("kind")
    cls = _NODE_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        kinds = ", ".join(_NODE_KINDS)
        raise WorkflowDefinitionError(
            f"{label}: field 'kind' is {kind!r}; it must be one of: {kinds}.{did_you_mean(str(kind), _NODE_KINDS)}",
            node=node_id if isinstance(node_id, str) else None,
            field="kind",
        )
    return node_from_fields(cls, raw, position=index + 1)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "Workflow"
