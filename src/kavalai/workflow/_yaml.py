"""The YAML loader: a workflow document -> a checked :class:`Workflow` plus the kernel it declares.

Strings in the kernel sections (``python_functions``, ``tools``, ``rest_servers``, ``mcp_servers``, ``models``)
may use ``${VAR}`` and ``${VAR:-default}`` to read environment variables; ``${WORKFLOW_DIR}`` is the directory of
the YAML file and ``${PYTHON}`` the running Python interpreter. Python modules named in ``python_functions``,
``models`` and a REST server's ``app`` are imported normally, or else looked up relative to the YAML file's
directory; relative paths (an ``fs`` group's ``root``, an MCP server's ``cwd``, an ``openapi`` file) are relative to
it too.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kavalai.documents import load_yaml
from kavalai.errors import ConfigurationError, ToolRegistrationError
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
from kavalai.workflow._services import ServedRestApp, Service
from kavalai.workflow._sizes import DEFAULT_MAX_SIZE
from kavalai.workflow._types import TypeRegistry
from kavalai.workflow.errors import WorkflowDefinitionError

if TYPE_CHECKING:
    from kavalai import FunctionKernel
    from kavalai.agent.budget import OutputBudget
    from kavalai.llm.base import LLMClient

__all__ = ["LoadedWorkflow", "load_workflow_file", "workflow_from_document"]

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


@dataclass(slots=True)
class LoadedWorkflow:
    """What a YAML document declares.

    Attributes:
        workflow: the checked graph.
        kernel: the kernel with the declared tools and servers registered (nothing connected yet).
        models: client factories from the ``models`` section, by name (the engine creates and closes them).
        services: what the engine starts with its connections: OpenAPI imports and the REST apps it serves.
        output_budget: the ``output_budget`` section, or ``None``.
    """

    workflow: Workflow
    kernel: FunctionKernel
    models: dict[str, Callable[[], LLMClient]] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    output_budget: OutputBudget | None = None


def load_workflow_file(path: Path, *, kernel: FunctionKernel | None = None) -> LoadedWorkflow:
    """Read, check and load the workflow YAML at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkflowDefinitionError(f"Cannot read workflow file {str(path)!r}: {exc.strerror}.") from None
    try:  # bounded: size, and aliases expanded past a limit ("billion laughs") refused before anything is built
        document = load_yaml(text, source=f"Workflow file {str(path)!r}")
    except ConfigurationError as exc:
        raise WorkflowDefinitionError(str(exc)) from None
    return load_document(document, base_dir=path.resolve().parent, kernel=kernel, source=str(path))


def load_document(
    document: Any, *, base_dir: Path, kernel: FunctionKernel | None = None, source: str = "<document>"
) -> LoadedWorkflow:
    """Load a parsed YAML document (a dict): the graph, then the kernel sections."""
    spec = _parse(document, source)
    workflow = _workflow(spec)
    if kernel is None:
        from kavalai import FunctionKernel

        kernel = FunctionKernel()
    env = {**os.environ, "WORKFLOW_DIR": str(base_dir), "PYTHON": sys.executable}
    loader = _KernelLoader(kernel, base_dir, env)
    services = loader.register(spec)
    return LoadedWorkflow(
        workflow=workflow,
        kernel=kernel,
        models=loader.models(spec),
        services=services,
        output_budget=_output_budget(spec.output_budget, base_dir),
    )


def _output_budget(section: _OutputBudget | None, base_dir: Path) -> OutputBudget | None:
    if section is None:
        return None
    from kavalai.agent.budget import FileArtifactStore, MemoryArtifactStore, OutputBudget

    store = (
        MemoryArtifactStore() if section.artifact_dir is None else FileArtifactStore(base_dir / section.artifact_dir)
    )
    return OutputBudget(section.max_chars, dict(section.per_tool), section.overflow, store)


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


def _check_model_id(model_id: str, field: str) -> None:
    from kavalai.llm.registry import PROVIDERS

    provider, _, model = model_id.partition("/")
    if provider not in PROVIDERS or not model:
        raise WorkflowDefinitionError(
            f"Field {field!r}: {model_id!r} is not a model id such as 'openai/gpt-4.1-mini' "
            f"(providers: {', '.join(PROVIDERS)}).{did_you_mean(provider, PROVIDERS)}",
            field=field,
        )


def _guarded_factory(make: Callable[[], Any], field: str) -> Callable[[], LLMClient]:
    def factory() -> LLMClient:
        try:
            client: LLMClient = make()
        except Exception as exc:
            raise WorkflowDefinitionError(f"Field {field!r}: {exc}", field=field) from exc
        return client

    return factory


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "Workflow"


class _KernelLoader:
    """Registers a document's tools and servers on a kernel (by :func:`kavalai.config.build_kernel`, the one
    place configuration becomes a kernel), and makes what only workflows have: served REST apps and models."""

    def __init__(self, kernel: FunctionKernel, base_dir: Path, env: Mapping[str, str]) -> None:
        self.kernel = kernel
        self.base_dir = base_dir
        self.env = env

    def register(self, spec: _Document) -> list[Service]:
        from kavalai.config import ConfigFieldError, KernelConfig, UnsetVariableError, build_kernel

        # Servers with an `app` are served by the engine for the length of a run; build_kernel gets the rest, and
        # its field paths are numbered back to the document's own indexes.
        served = [(i, server) for i, server in enumerate(spec.rest_servers) if "app" in server]
        plain = [i for i, server in enumerate(spec.rest_servers) if "app" not in server]
        config = KernelConfig(
            python_functions=[
                e if isinstance(e, str) else e.model_dump(exclude_none=True) for e in spec.python_functions
            ],
            tools=[e if isinstance(e, str) else {"group": e.group, **(e.model_extra or {})} for e in spec.tools],
            rest_servers=[spec.rest_servers[i] for i in plain],
            mcp_servers=spec.mcp_servers,
            base_dir=self.base_dir,
        )
        try:
            build_kernel(config, kernel=self.kernel, env=self.env)
        except UnsetVariableError as exc:
            raise self._unset(exc.variable) from None
        except ConfigFieldError as exc:
            field = _renumber(exc.field, plain)
            raise WorkflowDefinitionError(f"Field {field!r}: {exc.reason}", field=field) from exc.__cause__
        services: list[Service] = []
        for i, server in served:
            services.append(self._served_app(self._expand(dict(server)), f"rest_servers[{i}]"))
        return services

    def models(self, spec: _Document) -> dict[str, Callable[[], LLMClient]]:
        factories: dict[str, Callable[[], LLMClient]] = {}
        for name, entry in spec.models.items():
            field = f"models.{name}"
            model = _Model(model=entry) if isinstance(entry, str) else entry
            if (model.factory is None) == (model.model is None):
                raise WorkflowDefinitionError(f"Field {field!r} needs one of 'factory' or 'model'.", field=field)
            if model.factory is not None:
                make = self._import(self._expand(model.factory), field)
                if not callable(make):
                    raise WorkflowDefinitionError(
                        f"Field {field!r}: {model.factory!r} is not a function returning an LLM client.", field=field
                    )
            else:
                from kavalai.llm.registry import make_client

                model_id = self._expand(model.model)
                _check_model_id(model_id, field)
                make = functools.partial(make_client, model_id)
            factories[name] = _guarded_factory(make, field)
        return factories

    def _served_app(self, raw: dict[str, Any], field: str) -> Service:
        from kavalai.adapters.rest import RestServer

        tools = raw.pop("rest_tools", [])
        openapi = raw.pop("openapi", None)
        include, exclude = raw.pop("include", None), raw.pop("exclude", None)
        app = raw.pop("app")
        if isinstance(openapi, str) and not openapi.startswith("/") and "://" not in openapi:
            openapi = self.base_dir / openapi  # a Path: the kernel then reads it as a file that must exist
        if "url" in raw or "url_env" in raw:
            raise WorkflowDefinitionError(
                f"Field {field!r}: give either 'app' (a REST app the engine serves) or 'url', not both.", field=field
            )
        served = self._import(app, f"{field}.app") if isinstance(app, str) else app
        self._guard(field, lambda: RestServer(**raw, url="http://127.0.0.1"))  # check the other fields now

        async def register(kernel: FunctionKernel, url: str, first: bool) -> None:
            server = self._guard(field, lambda: RestServer(**raw, url=url))
            self._guard(field, lambda: kernel.register_rest_server(server, replace=not first))
            if not first:
                return
            for j, tool in enumerate(tools):
                self._rest_tool(kernel, server.name, dict(tool), f"{field}.rest_tools[{j}]")
            if openapi is not None:
                try:
                    await kernel.register_openapi(server.name, openapi, include=include, exclude=exclude)
                except ToolRegistrationError as exc:  # an unreadable or invalid spec (not an unreachable server)
                    raise WorkflowDefinitionError(f"Field '{field}.openapi': {exc}", field=f"{field}.openapi") from exc

        return ServedRestApp(served, register, field=f"{field}.app")

    def _rest_tool(self, kernel: FunctionKernel, server: str, tool: dict[str, Any], field: str) -> None:
        name = tool.pop("name", None)
        method = tool.pop("method", "GET")
        if not isinstance(name, str):
            raise WorkflowDefinitionError(f"Field {field!r} needs a 'name'.", field=field)
        self._guard(field, lambda: kernel.register_rest_tool(server, name, method, **tool))

    # ----------------------------------------------------------------------------------------------- helpers

    def _guard(self, field: str, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except WorkflowDefinitionError:
            raise
        except (ValidationError, ValueError, TypeError, ToolRegistrationError) as exc:
            from kavalai.config import configuration_problem

            raise WorkflowDefinitionError(f"Field {field!r}: {configuration_problem(exc)}", field=field) from None

    def _expand(self, value: Any) -> Any:
        from kavalai.config import UnsetVariableError, expand_env

        try:
            return expand_env(value, self.env)
        except UnsetVariableError as exc:
            raise self._unset(exc.variable) from None

    @staticmethod
    def _unset(name: str) -> WorkflowDefinitionError:
        return WorkflowDefinitionError(
            f"The workflow reads ${{{name}}}, but the environment variable {name} is not set.", field=name
        )

    def _import(self, dotted: str, field: str) -> Any:
        from kavalai.config import import_dotted

        try:
            return import_dotted(dotted, self.base_dir)
        except ConfigurationError as exc:
            raise WorkflowDefinitionError(f"Field {field!r}: {exc}.", field=field) from None


def _renumber(field: str, plain: list[int]) -> str:
    """A ``rest_servers[k]`` field of the servers given to build_kernel, as the document's own index."""
    match = re.match(r"rest_servers\[(\d+)\]", field)
    if match is None:
        return field
    return f"rest_servers[{plain[int(match.group(1))]}]{field[match.end() :]}"
