"""What each node kind does when visited (``parallel`` lives in the executor, which owns branching).

A runner gets the node, the run's :class:`NodeEnv` and the node's :class:`~kavalai.workflow.NodeTrace` record,
which it fills as it goes (inputs, attempts, tool calls) so that a failure keeps what was known. It returns the
node's output and the id of the node to visit next.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ValidationError

from kavalai.durable import call_options, current_run, step_context, step_scope
from kavalai.durable import step as durable_step
from kavalai.errors import (
    FunctionKernelException,
    ToolInputError,
    ToolOutputError,
    ToolTimeoutError,
)
from kavalai.workflow._budget import PromptFit
from kavalai.workflow._expressions import NOTHING
from kavalai.workflow._graph import FunctionCall, Reading, Workflow
from kavalai.workflow._ledger import SMALL, flat_size
from kavalai.workflow._nodes import (
    AgentNode,
    EndNode,
    FunctionNode,
    IfNode,
    LlmNode,
    NodeBase,
    RetryPolicy,
    StartNode,
    SwitchNode,
)
from kavalai.workflow._result import PLAIN, NodeTrace, ToolCallTrace, jsonable
from kavalai.workflow._templates import render_metered
from kavalai.workflow._types import DataType, describe_errors
from kavalai.workflow.errors import NodeError, NodeTimeoutError, NodeValidationError

if TYPE_CHECKING:
    from kavalai import FunctionKernel
    from kavalai.agent.budget import OutputBudget
    from kavalai.llm.base import LLMClient

__all__ = [
    "NodeEnv",
    "Outcome",
    "call_function",
    "check_fits",
    "context_and_json",
    "llm_node_reply",
    "node_agent",
    "resolved_now",
    "run_function",
    "run_simple_node",
    "to_context",
    "tool_failure",
]

_NO_RETRY = RetryPolicy(attempts=1)
_sleep = anyio.sleep  # the backoff wait (a module attribute, so tests can record the delays)

#: ``(output, next node id)``; the next id is ``None`` at an end node or a branch's last node.
Outcome = tuple[Any, str | None]


@dataclass(slots=True)
class NodeEnv:
    """What a runner may use.

    Attributes:
        workflow: the checked graph.
        kernel: the engine's kernel.
        values: the run context: ``input`` and the output of every node visited so far, by id.
        llm_for: returns the LLM client for a node's ``model`` (``None``: the engine's default).
        previous: the output of the node visited last on this path (an end node without ``outputs`` returns it).
        budget: the output budget of what the run's model nodes show their models, or ``None``.
        progress: reports a node's tool call progress as an event (``node``, ``progress``, ``total``, ``message``),
            when the run is streamed; ``None`` otherwise.
        durable: whether the run is a durable one (:func:`kavalai.durable.current_run`, asked once a run).
    """

    workflow: Workflow
    kernel: FunctionKernel
    values: dict[str, Any]
    llm_for: Callable[[str | None, str], Awaitable[LLMClient]]
    previous: Any = None
    budget: OutputBudget | None = None
    progress: Callable[[str, float, float | None, str | None], None] | None = None
    durable: bool = False


async def run_simple_node(node: NodeBase, env: NodeEnv, record: NodeTrace) -> Outcome:
    """Run any node except ``parallel``."""
    if type(node) is StartNode:  # every run's first and last node, by exact class first (isinstance() is an ABC check)
        return _run_start(node, env, record), node.next
    if type(node) is EndNode:
        return await _run_end(node, env, record), None
    if _runs_itself(type(node)):  # a node kind that runs itself (the Kaval.AI 1.0 nodes of kavalai.workflow.kaval)
        outcome: Outcome = await node.execute(env, record)  # type: ignore[attr-defined]
        return outcome
    if isinstance(node, StartNode):
        return _run_start(node, env, record), node.next
    if isinstance(node, FunctionNode):
        return await run_function(node, env, record)
    if isinstance(node, AgentNode):
        return await _run_agent(node, env, record), node.next
    if isinstance(node, LlmNode):
        return await _run_llm(node, env, record), node.next
    if isinstance(node, IfNode):
        record.inputs = {"condition": node.condition}
        expression = env.workflow.expression(node.id)
        condition = bool(await expression.evaluate_async(env.values, node=node.id, field="condition"))
        return condition, node.then if condition else node.else_
    if isinstance(node, SwitchNode):
        record.inputs = {"value": node.value}
        return await _run_switch(node, env)
    if isinstance(node, EndNode):
        return await _run_end(node, env, record), None
    raise NodeError(f"Node {node.id!r}: kind {type(node).__name__} cannot run here.", node=node.id)


_self_running: dict[type, bool] = {}


def _runs_itself(kind: type) -> bool:
    # Once per class: a missing attribute of a pydantic model (or its class) is a costly __getattr__ miss.
    found = _self_running.get(kind)
    if found is None:
        found = _self_running[kind] = callable(getattr(kind, "execute", None))
    return found


def to_context(value: Any) -> Any:
    """The form node outputs take in the run context: models become dicts (by alias), the rest is kept."""
    kind = type(value)
    if kind in PLAIN or kind is dict or kind is list:  # isinstance() against a model class is a metaclass check
        return value
    if isinstance(value, BaseModel):
        as_stored = _dumps_as_stored.get(kind)
        if as_stored is None:
            as_stored = _dumps_as_stored[kind] = _dumps_its_fields(kind)
        if as_stored:  # the usual tool output, {"result": 5}: its fields' plain values are what a dump gives
            fields = value.__dict__
            for item in fields.values():
                if type(item) not in PLAIN:
                    break
            else:
                return fields.copy()
        # What model_dump(by_alias=True) does, without its argument handling (a third of the cost, once a node).
        return kind.__pydantic_serializer__.to_python(value, by_alias=True)
    return value


_dumps_as_stored: dict[type, bool] = {}


def context_and_json(output: Any) -> tuple[Any, Any, int]:
    """:func:`to_context` of a node's output, :func:`output_json` of it and the size the run ledger counts for the
    context form (-1 when it is to size it itself), in one pass over the usual tool output (a model whose fields
    hold plain values, finite floats, and that dumps as its ``__dict__``): two copies of its fields, one for the run
    context and one for the trace, which must not share a dict."""
    kind = type(output)
    plain = _plain_model.get(kind)
    if plain is None:
        plain = _plain_model[kind] = issubclass(kind, BaseModel) and _dumps_its_fields(kind)
    if plain:
        fields = output.__dict__
        size = flat_size(fields)  # -1 unless every value is plain and finite: then the copies are its JSON form
        if size >= 0:
            return fields.copy(), fields.copy(), size
    context = to_context(output)
    return context, output_json(output, context), -1


_plain_model: dict[type, bool] = {}


def _dumps_its_fields(kind: type[BaseModel]) -> bool:
    """Whether ``model_dump(by_alias=True)`` of a ``kind`` whose fields hold plain values is its ``__dict__``: no
    serializer of its own, no alias, no field left out, no computed field, no extra field, not a root model."""
    fields = kind.model_fields.values()
    return (
        "root" not in kind.model_fields
        and not kind.model_computed_fields
        and kind.model_config.get("extra") != "allow"
        and all(
            f.alias is None
            and f.serialization_alias is None
            and not f.exclude
            and getattr(f, "exclude_if", None) is None
            for f in fields
        )
        and not _custom_serialization(kind.__pydantic_core_schema__)
    )


def output_json(output: Any, context: Any) -> Any:
    """The JSON form of a node's output for its trace, given its context form (:func:`to_context`).

    A model without custom serialization whose fields dumped to plain values (the usual tool output,
    ``{"result": 5}``) dumps the same in JSON mode, so its context dict is copied rather than the model dumped a
    second time, once a node; anything else goes through :func:`jsonable`.
    """
    kind = type(output)
    alike = _dumps_alike.get(kind)
    if alike is None:
        alike = _dumps_alike[kind] = issubclass(kind, BaseModel) and not _custom_serialization(
            kind.__pydantic_core_schema__
        )
    if alike and type(context) is dict:
        flat = flat_json(context)
        if flat is not None:
            return flat
    return jsonable(output)


def flat_json(value: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of ``value`` when it is already JSON (its values plain, its floats finite: what :func:`jsonable`
    would give, without pydantic's conversion), else ``None``."""
    for item in value.values():
        if type(item) not in PLAIN or (type(item) is float and not math.isfinite(item)):
            return None
    return value.copy()


_dumps_alike: dict[type, bool] = {}


def _custom_serialization(schema: Any) -> bool:
    """Whether a core schema holds a serializer of its own anywhere (``field_serializer``, ``PlainSerializer``,
    a model serializer...), which may dump differently in JSON mode."""
    if isinstance(schema, dict):
        return "serialization" in schema or any(_custom_serialization(value) for value in schema.values())
    if isinstance(schema, list):
        return any(_custom_serialization(value) for value in schema)
    return False


def check_fits(data_type: DataType, value: Any, *, node: str, what: str, field: str) -> Any:
    """Validate ``value`` by ``data_type``; raise :class:`NodeValidationError` naming node, field and reason."""
    try:
        return data_type.validate(value)
    except ValidationError as exc:
        text, first = describe_errors(exc)
        raise NodeValidationError(
            f"Node {node!r}: {what} does not fit type {data_type.name!r}: {text}",
            node=node,
            field=f"{field}.{first}" if first else field,
            errors=exc.errors(include_url=False),
        ) from exc


def resolved_now(values: dict[str, Any], reading: Reading | None) -> tuple[dict[str, Any] | None, int]:
    """A node's bindings read without a coroutine, given its :meth:`~kavalai.workflow._graph.Workflow.reading`
    (``None`` when one needs the evaluator: :func:`_resolve`); and their size as the run ledger counts it, worked
    out as they are read (-1 unless every value is a text, a finite number, a boolean or null: then it is what
    :func:`~kavalai.workflow._ledger.flat_size` counts, which tests/workflow/test_ledger.py holds it to)."""
    if reading is None:
        return None, -1
    template, size, paths = reading
    resolved = template.copy()  # the literals in place, in the bindings' order
    for name, root, keys in paths:  # Expression.plain_path's reading, without its call (once a binding)
        value = values.get(root, NOTHING)
        for key in keys:
            if type(value) is not dict or key not in value:
                return None, -1
            value = value[key]
        if value is NOTHING:
            return None, -1
        resolved[name] = value
        if size >= 0:
            kind = type(value)
            if kind is str:
                size += len(name) + len(value) + 8
            elif kind in SMALL and (kind is not float or math.isfinite(value)):
                size += len(name) + 28
            else:
                size = -1
    return resolved, size


async def _resolve(env: NodeEnv, node_id: str) -> dict[str, Any]:
    values = env.values
    resolved: dict[str, Any] = {}
    for name, literal, expression, field, _ in env.workflow.plan(node_id):  # a loop: a comprehension is a call more
        if expression is None:  # a dict or list literal copied: a tool changing its input changes no other run's
            resolved[name] = copy.deepcopy(literal) if type(literal) in (dict, list) else literal
            continue
        value = expression.plain_path(values)  # a plain path (most bindings) read without a coroutine
        if value is NOTHING:
            value = await expression.evaluate_async(values, node=node_id, field=field)
        resolved[name] = value
    return resolved


def _run_start(node: StartNode, env: NodeEnv, record: NodeTrace) -> Any:
    raw = env.values.get("input")
    record.inputs = {"input": jsonable(raw)}
    validated = check_fits(env.workflow.input_type, raw, node=node.id, what="the workflow input", field="input")
    env.values["input"] = to_context(validated)
    return validated


async def _run_switch(node: SwitchNode, env: NodeEnv) -> Outcome:
    value = await env.workflow.expression(node.id).evaluate_async(env.values, node=node.id, field="value")
    for case, target in node.cases.items():
        if _matches(value, case):
            return value, target
    if node.default is not None:
        return value, node.default
    cases = ", ".join(repr(case) for case in node.cases)
    raise NodeError(
        f"Node {node.id!r}: field 'value' is {value!r}, which matches no case ({cases}) and there is no default.",
        node=node.id,
        field="value",
    )


def _matches(value: Any, case: Any) -> bool:
    if isinstance(value, bool) or isinstance(case, bool):  # True == 1 must not select case 1
        return value is case
    return bool(value == case)


async def _run_end(node: EndNode, env: NodeEnv, record: NodeTrace) -> Any:
    if node.outputs is None:
        raw = env.previous
    else:
        raw, _ = resolved_now(env.values, env.workflow.reading(node.id))
        if raw is None:
            raw = await _resolve(env, node.id)
        record.inputs = jsonable(raw)
    return check_fits(env.workflow.output_type, raw, node=node.id, what="the workflow output", field="output")


def _fit_output(node_id: str, env: NodeEnv, value: Any) -> Any:
    declared = env.workflow.node_types.get(node_id)
    if declared is None:
        return value
    return check_fits(declared, value, node=node_id, what="the output", field="output")


# ---------------------------------------------------------------------------------------------------- function


async def run_function(node: FunctionNode, env: NodeEnv, record: NodeTrace) -> Outcome:
    """Run a ``function`` node: call its tool (retrying as its policy says) and check the output."""
    result, _ = await call_function(node, env, record, env.workflow.calls[node.id])
    return result, node.next


async def call_function(
    node: FunctionNode,
    env: NodeEnv,
    record: NodeTrace,
    call: FunctionCall,
    read: tuple[dict[str, Any] | None, int] | None = None,
) -> tuple[Any, int]:
    """:func:`run_function`'s work, given the node's ``call`` (:attr:`Workflow.calls`) and, when the caller read
    them already, its inputs as :func:`resolved_now` gave them: the node's checked output, and the size the run
    ledger counts for the inputs it recorded (-1 when the ledger is to size them itself)."""
    node_id = record.node  # the record's slot, not the model's field (a __getattr__ hook)
    tool, _, plain, reading = call
    arguments, size = resolved_now(env.values, reading) if read is None else read
    if arguments is None:
        arguments = await _resolve(env, node_id)
    # when the inputs are plain values (most nodes'), their copy is their JSON form
    record.inputs = arguments.copy() if size >= 0 else jsonable(arguments)
    if plain and env.progress is None and not env.durable:
        try:  # one attempt, no options, no output type
            return await env.kernel.call_tool(tool, arguments), size
        except FunctionKernelException as exc:
            raise tool_failure(node, exc, 1) from exc
    result = await _attempts(node, env, record, arguments)
    declared = env.workflow.node_types.get(node_id)
    if declared is not None:
        result = check_fits(declared, result, node=node_id, what="the output", field="output")
    return result, size


async def _attempts(node: FunctionNode, env: NodeEnv, record: NodeTrace, arguments: dict[str, Any]) -> Any:
    """The node's tool called with its options (timeout, progress, a durable run's), as often as its retry
    policy allows."""
    options: dict[str, Any] = {} if node.timeout is None else {"timeout": node.timeout}
    if env.progress is not None:  # a streamed run: the tool's progress becomes NodeProgress events
        options["progress"] = functools.partial(env.progress, node.id)
    durable = env.durable
    scope = None
    if durable:
        options.update(call_options())  # on an engine whose steps run elsewhere, each attempt is limited there
        scope = step_scope(f"{node.id}#{record.visit}")  # its steps' identity: the node and its visit
        scope.__enter__()
    policy = node.retry or _NO_RETRY
    record.attempts = 0
    try:
        while True:
            record.attempts += 1
            try:
                if durable:
                    return await _call_in_run(env, node.tool, arguments, options)
                return await env.kernel.call_tool(node.tool, arguments, **options)
            except FunctionKernelException as exc:
                if record.attempts >= policy.attempts or not _retryable(exc, policy):
                    raise tool_failure(node, exc, record.attempts) from exc
            await _sleep(policy.delay(record.attempts))
    finally:
        if scope is not None:
            scope.__exit__(None, None, None)


async def _call_in_run(env: NodeEnv, uri: str, arguments: Any, options: dict[str, Any]) -> Any:
    """The node's tool call in a durable run: the answers to servers' input requests during it are kept (so a
    redone step does not ask the user again)."""
    from kavalai.agent.elicitation import recording_in_run

    with recording_in_run():
        return await env.kernel.call_tool(uri, arguments, **options)


def _retryable(exc: BaseException, policy: RetryPolicy) -> bool:
    return any(cls.__name__ in policy.retry_on for cls in type(exc).__mro__)


def tool_failure(node: FunctionNode, exc: FunctionKernelException, attempts: int) -> NodeError:
    """The :class:`NodeError` naming the node that a failed call of its tool becomes (after ``attempts`` calls)."""
    from kavalai.errors import format_validation_errors

    if isinstance(exc, ToolInputError | ToolOutputError):
        side = "inputs" if isinstance(exc, ToolInputError) else "output"
        first = next((".".join(map(str, e["loc"])) for e in exc.errors if e.get("loc")), None)
        text = (
            f"the inputs do not fit tool {node.tool}: {format_validation_errors(exc.errors)}"
            if isinstance(exc, ToolInputError)
            else exc.message
        )
        return NodeValidationError(
            f"Node {node.id!r}: {text}",
            node=node.id,
            field=f"{side}.{first}" if first else side,
            errors=exc.errors,
            uri=node.tool,
        )
    where = f"Node {node.id!r}" + (f" failed after {attempts} attempts" if attempts > 1 else "")
    # kernel messages name the tool; say which one when a server-level message does not
    reason = exc.message if node.tool in exc.message else f"tool {node.tool}: {exc.message}"
    if isinstance(exc, ToolTimeoutError):
        return NodeTimeoutError(f"{where}: {reason}", node=node.id, timeout=exc.timeout or 0.0)
    return NodeError(f"{where}: {reason}", node=node.id, uri=node.tool)


# ------------------------------------------------------------------------------------------------- agent / llm


def _model_output(node_id: str, env: NodeEnv) -> type[BaseModel] | None:
    declared = env.workflow.node_types.get(node_id)
    if declared is not None and declared.is_model:
        model: type[BaseModel] = declared.annotation
        return model
    return None


def _template_vars(env: NodeEnv, variables: Mapping[str, Any]) -> dict[str, Any]:
    return {"input": env.values.get("input"), **variables}


def _prompt_fit(env: NodeEnv, *, readable: bool) -> PromptFit | None:
    if env.budget is None:
        return None
    return PromptFit(env.budget, env.workflow, env.values, readable=readable)


async def _render(source: str, variables: Mapping[str, Any], node: str, field: str, fit: PromptFit | None) -> str:
    """A model node's template, each printed value fitted to the output budget when there is one, and the whole text
    through the model-facing gate (bounded by the budget; whole when none is set, as a tool's result is)."""
    from kavalai.agent.budget import model_prompt

    again = None if fit is None else fit.restart
    text = await render_metered(source, variables, node=node, field=field, fit=fit, again=again)
    if fit is None:
        return text
    return model_prompt(fit.budget, node, await fit.settle(text), field)


async def _run_agent(node: AgentNode, env: NodeEnv, record: NodeTrace) -> Any:
    from kavalai.agent import Agent, MaxStepsExceededError

    resolved = await _resolve(env, node.id)
    variables = _template_vars(env, resolved)
    fit = _prompt_fit(env, readable=node.allowed_tools != [])  # an agent with tools gets read_artifact
    prompt = await _render(node.prompt, variables, node.id, "prompt", fit)
    record.inputs = {"prompt": prompt, **jsonable(resolved)}
    instructions = None
    if node.instructions is not None:
        instructions = await _render(node.instructions, variables, node.id, "instructions", fit)
    agent = Agent(
        await env.llm_for(node.model, node.id),
        kernel=env.kernel,
        instructions=instructions,
        allowed_tools=node.allowed_tools,
        max_steps=node.max_steps or 10,
        output_type=_model_output(node.id, env),
        output_budget=env.budget,
    )
    try:
        if current_run() is None:
            result = await agent.run(prompt)
        else:  # its steps name the node, so an engine that redoes them elsewhere finds its agent
            with step_context(node=node.id), step_scope(f"{node.id}#{record.visit}"):
                result = await agent.run(prompt)
    except MaxStepsExceededError as exc:
        if exc.result is not None:
            record.tool_calls = [_tool_call_trace(call) for call in exc.result.tool_calls]
        raise NodeError(f"Node {node.id!r}: {exc}", node=node.id, field="max_steps") from exc
    record.tool_calls = [_tool_call_trace(call) for call in result.tool_calls]
    return _fit_output(node.id, env, result.output)


def node_agent(node: AgentNode, llm: LLMClient, kernel: FunctionKernel, workflow: Workflow) -> Any:
    """The agent of an agent node, as far as redoing one of its steps elsewhere needs it (its model, tools and
    output type; the prompt and instructions are in the step's messages)."""
    from kavalai.agent import Agent

    declared = workflow.node_types.get(node.id)
    output_type = declared.annotation if declared is not None and declared.is_model else None
    return Agent(llm, kernel=kernel, allowed_tools=node.allowed_tools, output_type=output_type)


async def llm_node_reply(
    client: LLMClient, messages: list[Any], response_model: type[BaseModel] | None, node: str
) -> Any:
    """An llm node's model call; in a durable run a journaled step (a resumed run does not ask the model again)."""
    if current_run() is None:
        return await client.complete(messages, response_model=response_model)
    from kavalai.llm.messages import LLMResponse

    return await durable_step(
        f"model {client.provider}/{client.model}",
        lambda: client.complete(messages, response_model=response_model),
        dump=lambda response: response.model_dump(mode="json", by_alias=True),
        load=LLMResponse.model_validate,
        request=lambda: {
            "kind": "model",
            "node": node,
            "messages": [message.model_dump(mode="json", by_alias=True) for message in messages],
        },
    )


def _tool_call_trace(call: Any) -> ToolCallTrace:
    return ToolCallTrace(
        tool=call.uri,
        arguments=jsonable(call.arguments),
        output=jsonable(call.result) if call.ok else None,
        error=None if call.ok else call.error,
    )


async def _run_llm(node: LlmNode, env: NodeEnv, record: NodeTrace) -> Any:
    from kavalai.llm.base import parse_structured
    from kavalai.llm.messages import Message, SystemMessage, UserMessage

    resolved = await _resolve(env, node.id)
    variables = _template_vars(env, resolved)
    fit = _prompt_fit(env, readable=False)  # one model call, no tools: nothing to read an artifact with
    prompt = await _render(node.prompt, variables, node.id, "prompt", fit)
    record.inputs = {"prompt": prompt, **jsonable(resolved)}
    messages: list[Message] = []
    if node.system is not None:
        messages.append(SystemMessage(content=await _render(node.system, variables, node.id, "system", fit)))
    messages.append(UserMessage(content=prompt))
    client = await env.llm_for(node.model, node.id)
    response_model = _model_output(node.id, env)
    if current_run() is None:
        response = await llm_node_reply(client, messages, response_model, node.id)
    else:
        with step_scope(f"{node.id}#{record.visit}"):  # its model step's identity: the node and its visit
            response = await llm_node_reply(client, messages, response_model, node.id)
    if response_model is None:
        return _fit_output(node.id, env, response.text)
    if not isinstance(response.parsed, response_model):
        response = parse_structured(response, response_model, provider=client.provider, model=client.model)
    return _fit_output(node.id, env, response.parsed)
