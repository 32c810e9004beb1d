"""Kaval.AI 1.0's ``WorkflowBuilder``: its fluent methods, building a Kaval.AI document that our engine runs.

Each method adds to a :class:`~kavalai.workflow.kaval.KavalDocument` (Kaval.AI's ``WorkflowGraph``) with
Kaval.AI's names and signatures; :meth:`KavalWorkflowBuilder.build` checks it and :meth:`build_engine` hands it to
:meth:`WorkflowEngine.from_dict <kavalai.workflow.WorkflowEngine.from_dict>`, so a workflow built this way is
translated, checked and run exactly as the same workflow written in YAML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kavalai.workflow.kaval._models import (
    KavalAgentNode,
    KavalArgument,
    KavalDocument,
    KavalEndNode,
    KavalFunctionNode,
    KavalIfNode,
    KavalLlmNode,
    KavalParallelNode,
    KavalPythonFunction,
    KavalRagQueryNode,
    KavalStartNode,
    KavalSwitchNode,
    KavalTemplate,
)

if TYPE_CHECKING:
    from kavalai.adapters.mcp import McpServer
    from kavalai.adapters.rest import RestServer
    from kavalai.workflow._engine import WorkflowEngine

__all__ = ["KAVAL_ONLY_METHODS", "KAVAL_ONLY_OPTIONS", "KavalWorkflowBuilder", "field_schema", "node_inputs"]

#: Python types Kaval.AI accepts as shorthand for a JSON Schema scalar type.
_TYPE_NAMES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array"}
_TYPE_NAMES[dict] = "object"

#: The builder methods only Kaval.AI's builder has (our :class:`~kavalai.workflow.WorkflowBuilder` hands them on).
KAVAL_ONLY_METHODS = frozenset(
    {"data_type", "data_model", "rag_query", "python_function", "rest_server", "mcp_server", "template", "build_engine"}
)
#: The constructor options only Kaval.AI's builder takes.
KAVAL_ONLY_OPTIONS = frozenset({"version", "llm_model", "llm_kwargs", "rag_service", "rag_collection"})

#: Kaval.AI's engine options and ours: ``build_engine`` accepts both spellings.
_ENGINE_RENAMES = {"max_node_visits": "max_visits", "run_timeout": "timeout", "default_llm_model": "llm"}
_ENGINE_REFUSED = {
    "agent_service": "kavalai keeps no sessions: pass history= (kavalai.workflow.kaval.InMemoryHistory or your own)",
    "task_logger": "every run's RunResult.trace and engine.stream() events hold what a task logger received",
    "default_llm_parameters": "set llm_kwargs on the builder or the node",
    "record_context": "the run's trace is the caller's to keep or drop",
}

FieldType = str | type | Mapping[str, Any]
InputSpec = KavalArgument | str | Mapping[str, Any]


def field_schema(value: FieldType) -> dict[str, Any]:
    """A field's JSON Schema from a type name (``"string"``), a Python type (``str``) or a schema (as given)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, type):
        if value not in _TYPE_NAMES:
            raise TypeError(f"Unsupported field type: {value!r}; use str, int, float, bool, list, dict or a schema.")
        return {"type": _TYPE_NAMES[value]}
    if isinstance(value, str):
        return {"type": value}
    raise TypeError(f"Unsupported field type: {value!r}; use a type name, a Python type or a JSON Schema dict.")


def node_inputs(inputs: Mapping[str, InputSpec] | None) -> dict[str, KavalArgument]:
    """A node's inputs as arguments: a string is a context path, a mapping an argument's fields."""
    result: dict[str, KavalArgument] = {}
    for key, spec in (inputs or {}).items():
        if isinstance(spec, KavalArgument):
            result[key] = spec
        elif isinstance(spec, str):
            result[key] = KavalArgument(type="context", value=spec)
        elif isinstance(spec, Mapping):
            result[key] = KavalArgument.model_validate(dict(spec))
        else:
            raise TypeError(f"Unsupported input spec for {key!r}: {spec!r}; use a context path, a dict or an argument.")
    return result


class KavalWorkflowBuilder:
    """Kaval.AI 1.0's fluent workflow builder; every method returns the builder.

    ``from kavalai.workflow import WorkflowBuilder`` gives this builder when called Kaval.AI's way (with one of
    ``llm_model``, ``llm_kwargs``, ``version``, ``rag_service``, ``rag_collection``, or starting with one of its
    own methods such as ``data_type``); ``kavalai.workflow.builder.WorkflowBuilder`` is always this one.
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        version: str = "1.0",
        llm_model: str | None = None,
        llm_kwargs: Mapping[str, Any] | None = None,
        rag_service: str | None = None,
        rag_collection: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.version = version
        self.llm_model = llm_model
        self.llm_kwargs = dict(llm_kwargs or {})
        self.rag_service = rag_service
        self.rag_collection = rag_collection
        self._data_types: dict[str, dict[str, Any]] = {}
        self._data_models: dict[str, type[BaseModel]] = {}
        self._nodes: list[Any] = []
        self._rest_servers: list[dict[str, Any]] = []
        self._mcp_servers: list[dict[str, Any]] = []
        self._functions: list[KavalPythonFunction] = []
        self._templates: list[KavalTemplate] = []

    # ------------------------------------------------------------------------------------------------ types

    def data_type(
        self,
        name: str,
        fields: Mapping[str, FieldType] | None = None,
        *,
        schema: Mapping[str, Any] | None = None,
        ref: str | None = None,
    ) -> KavalWorkflowBuilder:
        """Declare a data type: an object of ``fields`` (``{"intent": str}``), a JSON Schema ``schema``, or an
        alias (``ref``) of another type."""
        if schema is not None:
            self._data_types[name] = dict(schema)
        elif ref is not None:
            self._data_types[name] = {"$ref": ref}
        else:
            properties = {field: field_schema(tp) for field, tp in (fields or {}).items()}
            self._data_types[name] = {"type": "object", "properties": properties}
        return self

    def data_model(self, name: str, model: type[BaseModel]) -> KavalWorkflowBuilder:
        """Declare a data type as a Pydantic model, used as it is by the engine (:meth:`build_engine`); the
        document records its JSON Schema."""
        self._data_models[name] = model
        self._data_types[name] = model.model_json_schema()
        return self

    # ------------------------------------------------------------------------------------------------ nodes

    def start(self, next: str, *, name: str = "start") -> KavalWorkflowBuilder:
        """Add the start node, leading to ``next``."""
        return self._add(KavalStartNode(name=name, next=next))

    def end(self, *, name: str = "end", output: str = "output") -> KavalWorkflowBuilder:
        """Add an end node returning the context variable ``output``."""
        return self._add(KavalEndNode(name=name, output=output))

    def llm(
        self,
        name: str,
        *,
        prompt: str,
        output: str,
        next: str,
        inputs: Mapping[str, InputSpec] | None = None,
        use_history: bool = True,
        history_limit: int = 50,
        history_max_chars: int | None = None,
        llm_model: str | None = None,
        llm_kwargs: Mapping[str, Any] | None = None,
        stream_output: bool = False,
        stream_delta: bool = False,
    ) -> KavalWorkflowBuilder:
        """Add a node making one model call; its structured answer is stored under ``output``."""
        return self._add(
            KavalLlmNode(
                name=name,
                prompt=prompt,
                output=output,
                next=next,
                inputs=node_inputs(inputs),
                use_history=use_history,
                history_limit=history_limit,
                history_max_chars=history_max_chars,
                llm_model=llm_model,
                llm_kwargs=dict(llm_kwargs or {}),
                stream_output=stream_output,
                stream_delta=stream_delta,
            )
        )

    def agent(
        self,
        name: str,
        *,
        prompt: str,
        output: str,
        next: str,
        inputs: Mapping[str, InputSpec] | None = None,
        allowed_tools: Sequence[str] | None = None,
        max_steps: int = 10,
        use_history: bool = True,
        history_limit: int = 50,
        history_max_chars: int | None = None,
        llm_model: str | None = None,
        llm_kwargs: Mapping[str, Any] | None = None,
        stream_output: bool = False,
        stream_delta: bool = False,
        stream_instructions: bool = False,
        stream_partials: bool = False,
    ) -> KavalWorkflowBuilder:
        """Add a tool-calling agent node; its final answer is stored under ``output``."""
        return self._add(
            KavalAgentNode(
                name=name,
                prompt=prompt,
                output=output,
                next=next,
                inputs=node_inputs(inputs),
                allowed_tools=None if allowed_tools is None else list(allowed_tools),
                max_steps=max_steps,
                use_history=use_history,
                history_limit=history_limit,
                history_max_chars=history_max_chars,
                llm_model=llm_model,
                llm_kwargs=dict(llm_kwargs or {}),
                stream_output=stream_output,
                stream_delta=stream_delta,
                stream_instructions=stream_instructions,
                stream_partials=stream_partials,
            )
        )

    def function(
        self,
        name: str,
        *,
        tool: str,
        output: str,
        next: str,
        inputs: Mapping[str, InputSpec] | None = None,
        method: str | None = None,
    ) -> KavalWorkflowBuilder:
        """Add a node calling the tool ``tool`` (``method``: the HTTP method of a ``rest://`` call, when given)."""
        fields: dict[str, Any] = {"name": name, "tool": tool, "output": output, "next": next}
        if method is not None:  # unwritten, a registered REST tool keeps its own method (as in a YAML file)
            fields["method"] = method
        return self._add(KavalFunctionNode(inputs=node_inputs(inputs), **fields))

    def rag_query(
        self,
        name: str,
        *,
        query: str,
        output: str,
        next: str,
        service: str | None = None,
        collection: str | None = None,
        top_k: int = 5,
        source_ids: Sequence[str] | None = None,
        match: Mapping[str, str | int | float | bool] | None = None,
        keep_best: bool = False,
        min_similarity: float | None = None,
        store: str = "results",
    ) -> KavalWorkflowBuilder:
        """Add a retrieval node: ``query`` (a template) goes to the retriever; the hits, or their joined text
        (``store="content"``), are stored under ``output``."""
        return self._add(
            KavalRagQueryNode.model_validate(
                {
                    "name": name,
                    "query": query,
                    "output": output,
                    "next": next,
                    "service": service,
                    "collection": collection,
                    "top_k": top_k,
                    "source_ids": None if source_ids is None else list(source_ids),
                    "match": None if match is None else dict(match),
                    "keep_best": keep_best,
                    "min_similarity": min_similarity,
                    "store": store,
                }
            )
        )

    def parallel(
        self, name: str, *, branches: Sequence[str], next: str, max_concurrency: int | None = None
    ) -> KavalWorkflowBuilder:
        """Add a node running each branch (from its first node up to ``next``) concurrently."""
        return self._add(
            KavalParallelNode(name=name, branches=list(branches), next=next, max_concurrency=max_concurrency)
        )

    def if_(self, name: str, *, condition: str, then: str, else_: str) -> KavalWorkflowBuilder:
        """Add a node continuing to ``then`` when ``condition`` holds, else to ``else_``."""
        return self._add(
            KavalIfNode.model_validate({"name": name, "condition": condition, "then": then, "else": else_})
        )

    def switch(
        self, name: str, *, expr: str, cases: Mapping[str, str] | None = None, default: str | None = None
    ) -> KavalWorkflowBuilder:
        """Add a node continuing to the case equal to ``expr`` (as text), else to ``default``."""
        return self._add(KavalSwitchNode(name=name, expr=expr, cases=dict(cases or {}), default=default))

    # -------------------------------------------------------------------------------------------- resources

    def python_function(self, name: str, path: str) -> KavalWorkflowBuilder:
        """Register the function at the dotted import ``path`` as the tool ``python://<name>``."""
        self._functions.append(KavalPythonFunction(name=name, path=path))
        return self

    def rest_server(self, server: RestServer | Mapping[str, Any]) -> KavalWorkflowBuilder:
        """Declare a REST server (a :class:`~kavalai.RestServer` or its fields)."""
        self._rest_servers.append(_fields(server))
        return self

    def mcp_server(self, server: McpServer | Mapping[str, Any]) -> KavalWorkflowBuilder:
        """Declare an MCP server (a :class:`~kavalai.McpServer` or its fields)."""
        self._mcp_servers.append(_fields(server))
        return self

    def template(self, name: str, value: str) -> KavalWorkflowBuilder:
        """Declare a text fragment prompts read as ``{{ templates.<name> }}``."""
        self._templates.append(KavalTemplate(name=name, value=value))
        return self

    # ------------------------------------------------------------------------------------------------ build

    def build(self) -> KavalDocument:
        """Check and return the document (Kaval.AI's ``WorkflowGraph``).

        Raises:
            pydantic.ValidationError: the document is invalid (as Kaval.AI's ``WorkflowGraph(...)`` raised).
        """
        return KavalDocument.model_validate(self._document())

    def build_engine(self, **options: Any) -> WorkflowEngine:
        """The document on a :class:`~kavalai.workflow.WorkflowEngine`, its :meth:`data_model` models used as
        they are. ``options`` are those of :meth:`WorkflowEngine.from_dict
        <kavalai.workflow.WorkflowEngine.from_dict>` (``client_factory``, ``rag_services``, ``history``, ``llm``,
        ``kernel``, ...); Kaval.AI's ``max_node_visits``, ``run_timeout`` and ``default_llm_model`` are taken as
        ``max_visits``, ``timeout`` and ``llm``.

        Raises:
            WorkflowDefinitionError: the document is invalid (``validation failed: ...``).
            TypeError: an option kavalai replaces with another (``agent_service``, ``task_logger``, ...), naming it.
        """
        from kavalai.workflow._engine import WorkflowEngine

        for option, instead in _ENGINE_REFUSED.items():
            if option in options:
                raise TypeError(f"build_engine({option}=...) is Kaval.AI 1.0's; {instead}.")
        models = {**self._data_models, **dict(options.pop("data_models", None) or {})}
        for old, new in _ENGINE_RENAMES.items():
            if old in options:
                options[new] = options.pop(old)
        return WorkflowEngine.from_dict(self._document(), data_models=models, **options)

    # ---------------------------------------------------------------------------------------------- helpers

    def _add(self, node: Any) -> KavalWorkflowBuilder:
        self._nodes.append(node)
        return self

    def _document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "llm_model": self.llm_model,
            "llm_kwargs": self.llm_kwargs,
            "rag_service": self.rag_service,
            "rag_collection": self.rag_collection,
            "data_types": self._data_types,
            "nodes": [
                {"type": node.type, **node.model_dump(by_alias=True, exclude_unset=True)} for node in self._nodes
            ],
            "rest_servers": self._rest_servers,
            "mcp_servers": self._mcp_servers,
            "python_functions": [f.model_dump() for f in self._functions],
            "templates": [t.model_dump() for t in self._templates],
        }


def _fields(server: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(server, BaseModel):
        return server.model_dump(exclude_unset=True, by_alias=True)
    return dict(server)
