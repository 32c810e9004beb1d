"""Kaval.AI 1.0 nodes as nodes of our graph.

Start, end and parallel nodes are our own kinds (so the graph checks, the executor's branching and the run's
input and output validation apply unchanged); the other kinds run themselves through ``execute``, reading and
writing upstream's run context. Every node is an ordinary :class:`~kavalai.workflow.NodeBase`, so node-visit
limits, timeouts, the trace and the event stream are the engine's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kavalai.llm.base import ModelSettings
from kavalai.workflow._expressions import Expression
from kavalai.workflow._nodes import EndNode, NodeBase, ParallelNode, StartNode
from kavalai.workflow._result import NodeTrace, ToolCallTrace
from kavalai.workflow._types import DataType
from kavalai.workflow.errors import NodeError
from kavalai.workflow.kaval._models import KavalArgument
from kavalai.workflow.kaval._runtime import (
    KavalRuntime,
    RagHit,
    as_text,
    context_of,
    evaluate_async,
    plain,
    render,
    render_value,
    resolve_inputs,
)

if TYPE_CHECKING:
    from kavalai.llm.base import LLMClient
    from kavalai.llm.messages import Message
    from kavalai.workflow._runners import NodeEnv

__all__ = [
    "KavalAgentStep",
    "KavalBranch",
    "KavalEnd",
    "KavalFunctionStep",
    "KavalLlmStep",
    "KavalParallel",
    "KavalRagStep",
    "KavalStart",
    "KavalSwitch",
]

Outcome = tuple[Any, str | None]


class KavalStart(StartNode):
    """A start node whose id is the upstream node name (any text)."""

    id: str = Field(min_length=1)


class KavalParallel(ParallelNode):
    """A parallel node whose id is the upstream node name; ``next`` is the join node."""

    id: str = Field(min_length=1)


class KavalEnd(EndNode):
    """Returns the context variable ``returns``, validated by the workflow's output type."""

    id: str = Field(min_length=1)
    returns: str = "output"

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """The value of ``returns`` in the run context."""
        from kavalai.workflow._runners import check_fits

        context = context_of(env)
        if self.returns not in context:
            raise NodeError(
                f"Node {self.id!r}: field 'output' returns the context variable {self.returns!r}, which no node has "
                "written on this run's path.",
                node=self.id,
                field="output",
            )
        value = context[self.returns]
        return check_fits(
            env.workflow.output_type, value, node=self.id, what="the workflow output", field="output"
        ), None


class _Step(NodeBase):
    """A node that runs itself; ``runtime`` is the document's shared settings."""

    id: str = Field(min_length=1)
    next: str | None = None
    output: str = ""
    data_type: DataType | None = Field(None, exclude=True, repr=False)
    runtime: KavalRuntime = Field(exclude=True, repr=False)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def successors(self) -> list[tuple[str, str]]:
        """``next``, unless the node ends a parallel branch."""
        return [("next", self.next)] if self.next is not None else []

    def store(self, env: NodeEnv, value: Any) -> Any:
        """Validate ``value`` by the output's data type and store it in the context under ``output``."""
        from kavalai.workflow._runners import check_fits

        if self.data_type is not None:
            value = check_fits(self.data_type, value, node=self.id, what="the output", field="output")
        context_of(env)[self.output] = plain(value)
        return value


class _ModelStep(_Step):
    prompt: str
    inputs: dict[str, KavalArgument] = Field(default_factory=dict)
    use_history: bool = True
    history_limit: int = 50
    history_max_chars: int | None = None
    llm_model: str | None = None
    settings: ModelSettings | None = Field(None, exclude=True)
    timeout: float | None = None

    async def instructions(self, env: NodeEnv, record: NodeTrace) -> tuple[str, dict[str, Any]]:
        """The rendered prompt with the resolved inputs under ``INPUT DATA:`` (upstream's system message)."""
        inputs = await resolve_inputs(self.runtime, env, self.inputs, node=self.id)
        text = await render(self.runtime, env, self.prompt, node=self.id, field="prompt")
        if inputs:
            text = "\n".join([text, "INPUT DATA:", *(f"{key}:{as_text(value)}" for key, value in inputs.items())])
        record.inputs = {"prompt": text, **plain(inputs)}
        return prompt_text(env, self.id, text, "prompt"), inputs

    async def client(self, env: NodeEnv) -> LLMClient:
        """The node's model, else the document's, else the engine's ``llm``."""
        return await env.llm_for(self.llm_model or self.runtime.llm_model, self.id)

    async def history(self) -> list[Message]:
        """Earlier chat messages, when ``use_history`` is on and the engine was given a history."""
        if not self.use_history or self.runtime.history is None or self.history_limit == 0:
            return []
        return list(await self.runtime.history.messages(limit=self.history_limit, max_chars=self.history_max_chars))

    def response_model(self) -> type[BaseModel] | None:
        """The output's data type when it is a model (a structured answer), else ``None`` (text)."""
        if self.data_type is not None and self.data_type.is_model:
            model: type[BaseModel] = self.data_type.annotation
            return model
        return None


def user_message(env: NodeEnv, node: str) -> str:
    """The run's request as a chat message: the input's ``user_message``, else the whole input as text."""
    run_input = context_of(env).get("input")
    if isinstance(run_input, dict) and isinstance(run_input.get("user_message"), str):
        return prompt_text(env, node, str(run_input["user_message"]), "user message")
    return prompt_text(env, node, as_text(run_input), "user message")


def prompt_text(env: NodeEnv, node: str, text: str, what: str) -> str:
    """A model node's text through the model-facing gate (:func:`kavalai.agent.budget.model_prompt`)."""
    from kavalai.agent.budget import model_prompt

    return model_prompt(env.budget, node, text, what)


class KavalLlmStep(_ModelStep):
    """One model call: the prompt as the system message, then the history and the run's request."""

    kind: Literal["llm"] = "llm"

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """Call the model and store its (structured) answer."""
        from kavalai.llm.base import parse_structured
        from kavalai.llm.messages import SystemMessage, UserMessage

        text, _ = await self.instructions(env, record)
        messages: list[Message] = [SystemMessage(content=text), *await self.history()]
        messages.append(UserMessage(content=user_message(env, self.id)))
        client = await self.client(env)
        model = self.response_model()
        response = await client.complete(messages, response_model=model, settings=self.settings)
        if model is None:
            return self.store(env, response.text), self.next
        if not isinstance(response.parsed, model):
            response = parse_structured(response, model, provider=client.provider, model=client.model)
        return self.store(env, response.parsed), self.next


class KavalAgentStep(_ModelStep):
    """A tool-calling agent: the prompt as its instructions, the run's request as its task."""

    kind: Literal["agent"] = "agent"
    allowed_tools: list[str] | None = None
    max_steps: int = 10

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """Run the agent on the engine's kernel and store its final answer."""
        from kavalai.agent import Agent, MaxStepsExceededError

        text, _ = await self.instructions(env, record)
        agent: Agent[Any] = Agent(
            await self.client(env),
            kernel=env.kernel,
            instructions=text,
            allowed_tools=self.allowed_tools,
            max_steps=self.max_steps,
            output_type=self.response_model(),
            settings=self.settings,
        )
        try:
            result = await agent.run(user_message(env, self.id), history=await self.history())
        except MaxStepsExceededError as exc:
            if exc.result is not None:
                record.tool_calls = [_trace(call) for call in exc.result.tool_calls]
            raise NodeError(f"Node {self.id!r}: {exc}", node=self.id, field="max_steps") from exc
        record.tool_calls = [_trace(call) for call in result.tool_calls]
        return self.store(env, result.output), self.next


def _trace(call: Any) -> ToolCallTrace:
    from kavalai.workflow._result import jsonable

    return ToolCallTrace(
        tool=call.uri,
        arguments=jsonable(call.arguments),
        output=jsonable(call.result) if call.ok else None,
        error=None if call.ok else call.error,
    )


class KavalFunctionStep(_Step):
    """Calls one tool with the resolved inputs; ``method`` is the HTTP method of a ``rest://`` call."""

    kind: Literal["function"] = "function"
    tool: str
    inputs: dict[str, KavalArgument] = Field(default_factory=dict)
    method: str | None = None

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """Call the tool (validated into the output's data type) and store the result."""
        arguments = await resolve_inputs(self.runtime, env, self.inputs, node=self.id)
        record.inputs = plain(arguments)
        options: dict[str, Any] = {}
        if self.method is not None:
            options["method"] = self.method.upper()
        if self.data_type is not None:
            options["output_type"] = self.data_type.annotation
        result = await env.kernel.call_tool(self.tool, arguments, **options)
        return self.store(env, result), self.next


class KavalBranch(NodeBase):
    """Upstream's ``if``: ``condition`` over the run context."""

    kind: Literal["if"] = "if"
    id: str = Field(min_length=1)
    condition: str
    then: str | None
    else_: str | None
    expression: Expression = Field(exclude=True, repr=False)
    runtime: KavalRuntime = Field(exclude=True, repr=False)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def successors(self) -> list[tuple[str, str]]:
        """``then`` and ``else`` (a target that is the join of the enclosing parallel node ends the branch)."""
        return [(field, target) for field, target in (("then", self.then), ("else", self.else_)) if target]

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """Evaluate the condition and choose the arm."""
        record.inputs = {"condition": self.condition}
        value = bool(await _evaluate(self.expression, self.runtime, env, node=self.id, field="condition"))
        return value, self.then if value else self.else_


class KavalSwitch(NodeBase):
    """Upstream's ``switch``: ``expr`` as text (booleans as ``true``/``false``) picks a case, else ``default``."""

    kind: Literal["switch"] = "switch"
    id: str = Field(min_length=1)
    expr: str
    cases: dict[str, str | None]
    default: str | None = None
    has_default: bool = False
    expression: Expression = Field(exclude=True, repr=False)
    runtime: KavalRuntime = Field(exclude=True, repr=False)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def successors(self) -> list[tuple[str, str]]:
        """Every case's node and the default."""
        found = [(f"cases.{key}", target) for key, target in self.cases.items() if target]
        return found + ([("default", self.default)] if self.default else [])

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """Evaluate ``expr`` and choose the case."""
        record.inputs = {"expr": self.expr}
        value = await _evaluate(self.expression, self.runtime, env, node=self.id, field="expr")
        key = ("true" if value else "false") if isinstance(value, bool) else str(value)
        if key in self.cases:
            return value, self.cases[key]
        if self.has_default:
            return value, self.default
        cases = ", ".join(repr(case) for case in self.cases) or "none"
        raise NodeError(
            f"Node {self.id!r}: field 'expr' is {key!r}, which matches no case ({cases}) and there is no default.",
            node=self.id,
            field="expr",
        )


async def _evaluate(expression: Expression, runtime: KavalRuntime, env: NodeEnv, *, node: str, field: str) -> Any:
    return await evaluate_async(expression.source, context_of(env), node=node, field=field)


class KavalRagStep(_Step):
    """Queries a retriever (read-only) and stores the hits, or their text joined by blank lines."""

    kind: Literal["rag_query"] = "rag_query"
    query: str
    service: str | None = None
    collection: str | None = None
    top_k: int = 5
    source_ids: list[str] | None = None
    match: dict[str, Any] | None = None
    keep_best: bool = False
    min_similarity: float | None = None
    store_as: Literal["results", "content"] = "results"

    async def execute(self, env: NodeEnv, record: NodeTrace) -> Outcome:
        """Render the query and the filter, query the retriever, store the result."""
        service, retriever = self.runtime.retriever(self.service, self.id)
        text = await render(self.runtime, env, self.query, node=self.id, field="query")
        match = None
        if self.match is not None:
            match = {
                key: await render_value(self.runtime, env, value, node=self.id, field=f"match.{key}")
                if isinstance(value, str)
                else value
                for key, value in self.match.items()
            }
        collection = self.collection or self.runtime.rag_collection
        record.inputs = {"query": text, "service": service, "collection": collection, "top_k": self.top_k}
        found = await retriever.query(
            text,
            top_k=self.top_k,
            collection_name=collection,
            source_ids=self.source_ids,
            keep_best=self.keep_best,
            match=match,
        )
        hits = [RagHit.of(hit) for hit in found]
        if self.min_similarity is not None:
            hits = [hit for hit in hits if hit.similarity >= self.min_similarity]
        if self.store_as == "content":
            return self.store(env, "\n\n".join(hit.content or "" for hit in hits)), self.next
        return self.store(env, hits), self.next
