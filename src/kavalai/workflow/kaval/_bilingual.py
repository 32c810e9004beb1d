"""The one ``WorkflowBuilder`` of ``kavalai.workflow``: kavalai's typed builder, which also speaks Kaval.AI 1.0's
vocabulary.

Kaval.AI code imports its builder from ``kavalai.workflow`` (and ``kavalai.workflow.builder``), the same name as
ours, so one class answers both. It is kavalai's builder (:class:`kavalai.workflow._builder.WorkflowBuilder`) until
a call says otherwise, once, for the life of the builder:

- a Kaval.AI constructor option (``llm_model``, ``llm_kwargs``, ``version``, ``rag_service``, ``rag_collection``);
- a method only Kaval.AI's builder has (``data_type``, ``data_model``, ``rag_query``, ``python_function``,
  ``rest_server``, ``mcp_server``, ``template``, ``build_engine``);
- a call only Kaval.AI's signature fits: ``start("first")`` (the next node, positionally), ``start(name=...)``,
  ``end(name=... | output=...)``, ``function(..., method=...)``, ``switch(..., expr=...)``, ``parallel(...,
  max_concurrency=...)``, or an ``llm``/``agent`` option only Kaval.AI has (``use_history``, ``llm_model``, ...).

From then on every method builds Kaval.AI's document (held by a :class:`KavalWorkflowBuilder` inside), and
:meth:`WorkflowBuilder.build` returns it (Kaval.AI's ``WorkflowGraph``), as Kaval.AI's ``build()`` did. A start
and an end node added kavalai's way before that (``start(next=...)``, ``end()``), which read the same in both
vocabularies, are carried over; anything else is refused with an error saying which vocabulary the builder speaks.

The builder is an ordinary object: the same class whichever vocabulary it speaks (``isinstance`` holds), with no
attribute lookups that change it, so it copies, deep-copies and pickles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from kavalai.workflow._builder import TypeRef
from kavalai.workflow._builder import WorkflowBuilder as _TypedBuilder
from kavalai.workflow._nodes import EndNode, RetryPolicy, StartNode
from kavalai.workflow.errors import WorkflowDefinitionError

if TYPE_CHECKING:
    from kavalai.workflow._engine import WorkflowEngine
    from kavalai.workflow._graph import Workflow
    from kavalai.workflow.kaval._builder import KavalWorkflowBuilder

__all__ = ["KavalStyleWorkflowBuilder", "WorkflowBuilder"]


class WorkflowBuilder(_TypedBuilder):
    """Builds a :class:`~kavalai.workflow.Workflow` node by node (kavalai's vocabulary), or Kaval.AI 1.0's document
    (its vocabulary) when called Kaval.AI's way: see the module's documentation and docs/migrating_from_kaval.md.

    Example::

        workflow = (
            WorkflowBuilder("count-words", input=Folder, output=Count)
            .start(next="listing")
            .function("listing", tool="python://fs.ls", inputs={"path": "input.folder"}, next="done")
            .end("done", outputs={"files": "len(listing.result)"})
            .build()
        )
    """

    #: Whether a new builder speaks Kaval.AI's vocabulary from the start (``kavalai.workflow.builder``'s does).
    _speaks_kaval: ClassVar[bool] = False

    def __init__(
        self,
        name: str,
        *,
        input: TypeRef = "object",
        output: TypeRef = "object",
        description: str = "",
        version: str | None = None,
        llm_model: str | None = None,
        llm_kwargs: Mapping[str, Any] | None = None,
        rag_service: str | None = None,
        rag_collection: str | None = None,
    ) -> None:
        super().__init__(name, input=input, output=output, description=description)
        options = {
            "version": version,
            "llm_model": llm_model,
            "llm_kwargs": llm_kwargs,
            "rag_service": rag_service,
            "rag_collection": rag_collection,
        }
        given: dict[str, Any] = {key: value for key, value in options.items() if value is not None}
        self._kaval: KavalWorkflowBuilder | None = None
        if given or self._speaks_kaval:
            if (input, output) != ("object", "object"):
                raise TypeError("input= and output= are kavalai's; in Kaval.AI's vocabulary declare data_type()s")
            self._kaval = _kaval_builder(name, description, given)

    @property
    def vocabulary(self) -> str:
        """``"kaval"`` once the builder speaks Kaval.AI 1.0's vocabulary, else ``"kavalai"``."""
        return "kavalai" if self._kaval is None else "kaval"

    # ------------------------------------------------------------------------------------ Kaval.AI's only

    def data_type(
        self,
        name: str,
        fields: Mapping[str, Any] | None = None,
        *,
        schema: Mapping[str, Any] | None = None,
        ref: str | None = None,
    ) -> WorkflowBuilder:
        """Kaval.AI's: declare a data type by ``fields``, a JSON ``schema`` or a ``ref`` (see
        :meth:`KavalWorkflowBuilder.data_type`)."""
        self._in_kaval("data_type").data_type(name, fields, schema=schema, ref=ref)
        return self

    def data_model(self, name: str, model: type[Any]) -> WorkflowBuilder:
        """Kaval.AI's: declare a data type as a Pydantic model, used as it is."""
        self._in_kaval("data_model").data_model(name, model)
        return self

    def rag_query(self, name: str, **fields: Any) -> WorkflowBuilder:
        """Kaval.AI's ``rag_query`` node (see :meth:`KavalWorkflowBuilder.rag_query`)."""
        self._in_kaval("rag_query").rag_query(name, **fields)
        return self

    def python_function(self, name: str, path: str) -> WorkflowBuilder:
        """Kaval.AI's: register the function at the dotted ``path`` as ``python://<name>``."""
        self._in_kaval("python_function").python_function(name, path)
        return self

    def rest_server(self, server: Any) -> WorkflowBuilder:
        """Kaval.AI's: add a REST server (a :class:`~kavalai.RestServer` or its fields)."""
        self._in_kaval("rest_server").rest_server(server)
        return self

    def mcp_server(self, server: Any) -> WorkflowBuilder:
        """Kaval.AI's: add an MCP server (a :class:`~kavalai.McpServer` or its fields)."""
        self._in_kaval("mcp_server").mcp_server(server)
        return self

    def template(self, name: str, value: str) -> WorkflowBuilder:
        """Kaval.AI's: a text fragment prompts read as ``{{ templates.<name> }}``."""
        self._in_kaval("template").template(name, value)
        return self

    def build_engine(self, **options: Any) -> WorkflowEngine:
        """Kaval.AI's: the document on a :class:`~kavalai.workflow.WorkflowEngine` (see
        :meth:`KavalWorkflowBuilder.build_engine`)."""
        return self._in_kaval("build_engine").build_engine(**options)

    # --------------------------------------------------------------------------------------- both: nodes

    def start(self, id: str = "start", *, next: str | None = None, name: str | None = None) -> WorkflowBuilder:
        """Add the start node: ``start(next="first")`` (kavalai's), or ``start("first")`` (Kaval.AI's: the next
        node positionally, ``name=`` the start node's)."""
        kaval = self._kaval_if("start", name is not None or (next is None and id != "start"))
        if kaval is None:
            return cast(WorkflowBuilder, super().start(id, next=cast(str, next)))
        if next is None:
            kaval.start(id, name=name or "start")
        else:
            kaval.start(next, name=name or id)
        return self

    def end(
        self,
        id: str = "end",
        *,
        outputs: Mapping[str, Any] | None = None,
        name: str | None = None,
        output: str | None = None,
    ) -> WorkflowBuilder:
        """Add an end node: ``end("done", outputs={...})`` (kavalai's) or ``end(name=..., output="output")``
        (Kaval.AI's: the context variable it returns)."""
        kaval = self._kaval_if("end", name is not None or output is not None)
        if kaval is None:
            return cast(WorkflowBuilder, super().end(id, outputs=outputs))
        _only_kavalai("end", outputs=outputs)
        kaval.end(name=name or id, output=output or "output")
        return self

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
        method: str | None = None,
    ) -> WorkflowBuilder:
        """Add a node that calls the tool at ``tool`` (Kaval.AI's: ``output`` names the context key, ``method``
        a REST tool's method)."""
        kaval = self._kaval_if("function", method is not None)
        if kaval is None:
            built = super().function(
                id, tool=tool, inputs=inputs, output=output, next=next, timeout=timeout, retry=retry
            )
            return cast(WorkflowBuilder, built)
        _only_kavalai("function", timeout=timeout, retry=retry)
        kaval.function(id, tool=tool, output=cast(str, output), next=cast(str, next), inputs=inputs, method=method)
        return self

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
        **kaval_options: Any,
    ) -> WorkflowBuilder:
        """Add a node that makes one model call (Kaval.AI's: ``output`` names the context key; its options
        ``use_history``, ``llm_model``, ``llm_kwargs``, ``stream_output``, ... as keywords)."""
        kaval = self._kaval_if("llm", bool(kaval_options))
        if kaval is None:
            built = super().llm(
                id, prompt=prompt, inputs=inputs, system=system, model=model, output=output, next=next, timeout=timeout
            )
            return cast(WorkflowBuilder, built)
        _only_kavalai("llm", system=system, model=model, timeout=timeout)
        kaval.llm(id, prompt=prompt, output=cast(str, output), next=cast(str, next), inputs=inputs, **kaval_options)
        return self

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
        **kaval_options: Any,
    ) -> WorkflowBuilder:
        """Add a node that runs an agent (Kaval.AI's: ``output`` names the context key; its options as
        keywords)."""
        kaval = self._kaval_if("agent", bool(kaval_options))
        if kaval is None:
            built = super().agent(
                id,
                prompt=prompt,
                inputs=inputs,
                instructions=instructions,
                allowed_tools=allowed_tools,
                max_steps=max_steps,
                model=model,
                output=output,
                next=next,
                timeout=timeout,
            )
            return cast(WorkflowBuilder, built)
        _only_kavalai("agent", instructions=instructions, model=model, timeout=timeout)
        if max_steps is not None:
            kaval_options["max_steps"] = max_steps
        kaval.agent(
            id,
            prompt=prompt,
            output=cast(str, output),
            next=cast(str, next),
            inputs=inputs,
            allowed_tools=allowed_tools,
            **kaval_options,
        )
        return self

    def if_(self, id: str, *, condition: str, then: str, else_: str) -> WorkflowBuilder:
        """Add a node that continues to ``then`` when ``condition`` holds, else to ``else_`` (both vocabularies)."""
        if self._kaval is not None:
            self._kaval.if_(id, condition=condition, then=then, else_=else_)
            return self
        return cast(WorkflowBuilder, super().if_(id, condition=condition, then=then, else_=else_))

    def switch(
        self,
        id: str,
        *,
        value: str | None = None,
        cases: Mapping[Any, str] | None = None,
        default: str | None = None,
        expr: str | None = None,
    ) -> WorkflowBuilder:
        """Add a node that continues to the case equal to ``value`` (Kaval.AI's: ``expr``), else ``default``."""
        kaval = self._kaval_if("switch", expr is not None)
        if kaval is None:
            return cast(WorkflowBuilder, super().switch(id, value=cast(str, value), cases=cases or {}, default=default))
        _only_kavalai("switch", value=value)
        kaval.switch(id, expr=cast(str, expr), cases=dict(cases or {}), default=default)
        return self

    def parallel(
        self,
        id: str,
        *,
        branches: Sequence[str],
        next: str | None = None,
        timeout: float | None = None,
        max_concurrency: int | None = None,
    ) -> WorkflowBuilder:
        """Add a node that runs ``branches`` concurrently, then continues to ``next`` (Kaval.AI's:
        ``max_concurrency``)."""
        kaval = self._kaval_if("parallel", max_concurrency is not None)
        if kaval is None:
            return cast(WorkflowBuilder, super().parallel(id, branches=branches, next=next, timeout=timeout))
        _only_kavalai("parallel", timeout=timeout)
        kaval.parallel(id, branches=branches, next=cast(str, next), max_concurrency=max_concurrency)
        return self

    def build(self) -> Workflow:
        """Check the graph and return the :class:`~kavalai.workflow.Workflow`; in Kaval.AI's vocabulary, Kaval.AI's
        checked document (its ``WorkflowGraph``), as its ``build()`` returned."""
        if self._kaval is not None:
            return cast("Workflow", self._kaval.build())
        return super().build()

    # ---------------------------------------------------------------------------------------------- helpers

    def _kaval_if(self, method: str, kaval_shaped: bool) -> KavalWorkflowBuilder | None:
        """The Kaval.AI builder to send ``method`` to: when the builder speaks Kaval.AI's vocabulary already, or
        this call is Kaval.AI-shaped (it then starts to); ``None`` for kavalai's."""
        if self._kaval is None and kaval_shaped:
            return self._in_kaval(method)
        return self._kaval

    def _in_kaval(self, method: str) -> KavalWorkflowBuilder:
        """The Kaval.AI builder, made now (carrying over a start and a plain end added before) when the builder
        did not speak Kaval.AI's vocabulary yet."""
        if self._kaval is not None:
            return self._kaval
        carried = [node for node in self._nodes if isinstance(node, StartNode | EndNode)]
        plain_ends = all(node.outputs is None for node in carried if isinstance(node, EndNode))
        if len(carried) != len(self._nodes) or not plain_ends or self._types.declared or self._typed_ends():
            raise WorkflowDefinitionError(
                f"WorkflowBuilder.{method}() is Kaval.AI 1.0's, and this builder already speaks kavalai's vocabulary "
                "(it holds kavalai nodes or types): build a Kaval.AI workflow with Kaval.AI's calls from the start, "
                "or use declare_type() and the nodes' output= here.",
                field=method,
            )
        kaval = _kaval_builder(self._name, self._description, {})
        for node in carried:
            if isinstance(node, StartNode):
                kaval.start(cast(str, node.next), name=node.id)
            else:
                kaval.end(name=node.id)
        self._nodes = []
        self._kaval = kaval
        return kaval

    def _typed_ends(self) -> bool:
        return (self._input, self._output) != ("object", "object")


class KavalStyleWorkflowBuilder(WorkflowBuilder):
    """``kavalai.workflow.builder.WorkflowBuilder``: the same builder, speaking Kaval.AI 1.0's vocabulary from the
    start (Kaval.AI code imports it from there)."""

    _speaks_kaval = True


def _only_kavalai(method: str, **given: Any) -> None:
    """Refuse kavalai-only options on a builder that speaks Kaval.AI's vocabulary, naming them."""
    named = [key for key, value in given.items() if value is not None]
    if named:
        raise TypeError(
            f"{method}({', '.join(f'{key}=' for key in named)}) is kavalai's; this builder speaks Kaval.AI 1.0's "
            "vocabulary (see docs/migrating_from_kaval.md)"
        )


def _kaval_builder(name: str, description: str, options: dict[str, Any]) -> KavalWorkflowBuilder:
    """Kaval.AI's builder, imported when a builder first speaks its vocabulary (not with ``kavalai.workflow``)."""
    from kavalai.workflow.kaval._builder import KavalWorkflowBuilder

    return KavalWorkflowBuilder(name, description=description, **options)
