"""The tool-calling agent: model -> tool calls -> the kernel runs them concurrently -> results -> model -> ..."""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Generic, Literal, TypeVar, overload

import anyio.to_thread
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from kavalai import FunctionKernel
from kavalai.adapters.mcp import ElicitationHandler, McpElicitation, McpElicitationResult, answering
from kavalai.agent._approval import ApprovalHook
from kavalai.agent._events import (
    AgentEvent,
    EventHandler,
    InputRequested,
    ModelResponded,
    ModelTextDelta,
    RunFailed,
    RunFinished,
    RunStarted,
    StepStarted,
)
from kavalai.agent._result import AgentResult, ToolCallRecord
from kavalai.agent._tools import HookFailures, ToolRunner, approval_step
from kavalai.agent.budget import READ_ARTIFACT, OutputBudget, model_description, run_scope
from kavalai.agent.code_mode import CodeMode
from kavalai.agent.elicitation import OutsideElicitation, recorded
from kavalai.agent.embeddings import Embedder, local_embedder, minilm_embedder
from kavalai.agent.errors import ApprovalHookError, MaxStepsExceededError
from kavalai.agent.prompts import prompt_messages, split_prompt
from kavalai.agent.resources import resource_reader_spec
from kavalai.agent.search import ToolSearch
from kavalai.durable import (
    DurableRun,
    DurableRunner,
    current_run,
    error_envelope,
    guarded,
    resolve_runner,
    restore_error,
)
from kavalai.durable import step as durable_step
from kavalai.errors import DeadlineExceededError, FunctionKernelException, ToolNotFoundError
from kavalai.kernel import current_deadline, deadline, limit_seconds
from kavalai.llm.base import LLMClient, ModelSettings, parse_structured
from kavalai.llm.errors import LLMResponseError, StructuredOutputError
from kavalai.llm.messages import (
    LLMResponse,
    Message,
    ResponseDone,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    parse_messages,
)
from kavalai.tracing import annotate, span

__all__ = ["Agent"]

OutputT = TypeVar("OutputT")
M = TypeVar("M", bound=BaseModel)


@dataclass
class _RunState:
    history: list[Message]
    new: list[Message]
    trace: list[ToolCallRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0

    def messages(self, system: SystemMessage | None) -> list[Message]:
        head: list[Message] = [system] if system is not None else []
        return [*head, *self.history, *self.new]

    def result(self, output: Any) -> AgentResult[Any]:
        return AgentResult(
            output=output,
            new_messages=list(self.new),
            history=list(self.history),
            tool_calls=list(self.trace),
            usage=self.usage,
            steps=self.steps,
        )


class Agent(Generic[OutputT]):
    """An LLM that answers a prompt by calling the kernel's tools.

    Each run fetches the tool list once with ``kernel.get_tool_descriptions(allowed_tools)``, then loops: call the
    model; if it asks for tools, run that step's calls concurrently through ``kernel.call_tool`` and send the
    results back (failures as error results the model can act on); stop when the model answers without tool calls.

    Args:
        llm: an :class:`~kavalai.llm.LLMClient`, or a model id for :func:`~kavalai.llm.make_client`
            (``"openai/gpt-4.1-mini"``); a client built from a model id belongs to the agent and is closed by
            :meth:`aclose` (or ``async with Agent(...) as agent``).
        kernel: the kernel whose tools the agent may call; ``None`` for an agent without tools.
        instructions: the system message, sent first in every request (not part of the result's messages).
        allowed_tools: URIs and globs the agent may call (``["python://fs.*"]``); ``None`` for every tool.
        max_steps: the most model calls per run. A model still calling tools at the last step raises
            :class:`~kavalai.llm.errors.MaxStepsExceededError` (carrying the partial result); the tool calls of
            that last reply are not run, and are answered in the messages by error results saying so.
        output_type: a Pydantic model for a structured final answer. A reply that does not fit is sent back once,
            with the validation errors, for repair; a second failure raises
            :class:`~kavalai.llm.errors.StructuredOutputError`.
        approve: a hook asked before each call of a tool matching ``require_approval``; it can allow, deny with a
            reason, or edit the arguments (see :class:`~kavalai.agent.Approval`).
        require_approval: URIs and globs that need approval; ``None`` (the default) means every tool, when
            ``approve`` is given.
        on_event: an observer called with every :data:`~kavalai.agent.AgentEvent`, sync or async.
        stream: stream the model's replies, reporting text as ``ModelTextDelta`` events.
        settings: temperature and max tokens for every model call.
        output_budget: how much of each tool result reaches the model, and what happens to the rest (cut, or kept
            as an artifact the model reads with ``read_artifact``); ``None`` takes the kernel's ``output_budget``.
        tool_search: offer the ``core_tools`` and a ``search_tools`` tool instead of every tool, loading what a
            search finds into the next step (see :mod:`kavalai.agent.search`); ``None`` (the default) does so when
            the agent has more than ``search_threshold`` tools. ``"native"``: the provider's own tool search where
            the client has one (Anthropic's, not while streaming; OpenAI's Responses API's), the tools outside
            ``core_tools`` deferred to it; ours elsewhere.
        search_threshold: the number of tools above which ``tool_search=None`` searches (default 30).
        core_tools: URIs and globs of the tools always offered when searching.
        search_embedder: also rank tools by meaning when searching: an embedder (texts in, one vector each out;
            see :mod:`kavalai.agent.embeddings`), ``"local"`` for the bundled WordLlama model (the ``embeddings``
            extra; no download), ``"minilm"`` for all-MiniLM-L6-v2 on ONNX Runtime (the ``minilm`` extra; no
            download, tools' vectors kept on disk). ``"auto"`` (the default): ``"local"`` where the
            ``embeddings`` extra is installed, BM25 alone elsewhere. ``None``: BM25 only.
        search_reranker: re-rank a search's best 50 by a stronger encoder's cosine: ``"minilm"`` (the ``minilm``
            extra; no download) or an embedder; ``None`` (the default): names and actions only.
        code_mode: offer one ``run_python`` tool instead, whose snippets call the tools as async functions in the
            ``pydantic-monty`` sandbox (see :mod:`kavalai.agent.code_mode`); ``True`` for the default limits.
        resources: names of MCP servers whose resources the model may read: it gets a ``read_resource`` tool
            (``server``, ``uri``) whose description lists what each server offers.
        on_elicitation: answers what an MCP server configured with ``elicitation="caller"`` asks the user during
            this agent's tool calls (an :data:`~kavalai.adapters.mcp.ElicitationHandler`: the values, ``None`` to
            decline, or an ``McpElicitationResult``); each request is also reported as an ``InputRequested``
            event. Without it such requests are refused.
        durable: run durably on this runner (:mod:`kavalai.durable`; a runner, a database URL, or ``True``): the
            tool listing, every model reply, approval and tool call is a journaled step, and ``run(...,
            run_id=...)`` with the same id resumes a run whose process died without calling completed tools again.
            The tool calls of one reply then run one after another, in the order the model gave them.
        durable_name: the name a durable runner knows this agent by (the same in every process serving its runs).
    """

    @overload
    def __init__(
        self: Agent[str],
        llm: LLMClient | str,
        *,
        kernel: FunctionKernel | None = None,
        instructions: str | None = None,
        allowed_tools: Sequence[str] | None = None,
        max_steps: int = 10,
        output_type: None = None,
        approve: ApprovalHook | None = None,
        require_approval: Sequence[str] | None = None,
        on_event: EventHandler | None = None,
        stream: bool = False,
        settings: ModelSettings | None = None,
        output_budget: OutputBudget | None = None,
        tool_search: bool | Literal["native"] | None = None,
        search_threshold: int = 30,
        core_tools: Sequence[str] = (),
        search_embedder: Embedder | Literal["auto", "local", "minilm"] | None = "auto",
        search_reranker: Embedder | Literal["minilm"] | None = None,
        code_mode: CodeMode | bool | None = None,
        resources: Sequence[str] = (),
        on_elicitation: ElicitationHandler | None = None,
        durable: DurableRunner | str | bool | None = None,
        durable_name: str = "agent",
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[M],
        llm: LLMClient | str,
        *,
        kernel: FunctionKernel | None = None,
        instructions: str | None = None,
        allowed_tools: Sequence[str] | None = None,
        max_steps: int = 10,
        output_type: type[M],
        approve: ApprovalHook | None = None,
        require_approval: Sequence[str] | None = None,
        on_event: EventHandler | None = None,
        stream: bool = False,
        settings: ModelSettings | None = None,
        output_budget: OutputBudget | None = None,
        tool_search: bool | Literal["native"] | None = None,
        search_threshold: int = 30,
        core_tools: Sequence[str] = (),
        search_embedder: Embedder | Literal["auto", "local", "minilm"] | None = "auto",
        search_reranker: Embedder | Literal["minilm"] | None = None,
        code_mode: CodeMode | bool | None = None,
        resources: Sequence[str] = (),
        on_elicitation: ElicitationHandler | None = None,
        durable: DurableRunner | str | bool | None = None,
        durable_name: str = "agent",
    ) -> None: ...

    def __init__(
        self,
        llm: LLMClient | str,
        *,
        kernel: FunctionKernel | None = None,
        instructions: str | None = None,
        allowed_tools: Sequence[str] | None = None,
        max_steps: int = 10,
        output_type: type[BaseModel] | None = None,
        approve: ApprovalHook | None = None,
        require_approval: Sequence[str] | None = None,
        on_event: EventHandler | None = None,
        stream: bool = False,
        settings: ModelSettings | None = None,
        output_budget: OutputBudget | None = None,
        tool_search: bool | Literal["native"] | None = None,
        search_threshold: int = 30,
        core_tools: Sequence[str] = (),
        search_embedder: Embedder | Literal["auto", "local", "minilm"] | None = "auto",
        search_reranker: Embedder | Literal["minilm"] | None = None,
        code_mode: CodeMode | bool | None = None,
        resources: Sequence[str] = (),
        on_elicitation: ElicitationHandler | None = None,
        durable: DurableRunner | str | bool | None = None,
        durable_name: str = "agent",
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if isinstance(allowed_tools, str):
            raise TypeError("allowed_tools takes a list of URIs or globs, not a single string")
        if output_type is not None and not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
            raise TypeError(
                f"output_type must be a Pydantic model class, got {output_type!r}; wrap a plain type in a model "
                "(class Answer(BaseModel): value: int)."
            )
        self._owns_llm = isinstance(llm, str)
        self.llm: LLMClient = _make_client(llm) if isinstance(llm, str) else llm
        self.kernel = kernel
        self.instructions = instructions
        self.allowed_tools = None if allowed_tools is None else list(allowed_tools)
        self.max_steps = max_steps
        self.output_type = output_type
        self.approve = approve
        self.require_approval = require_approval
        self.on_event = on_event
        self.stream = stream
        self.settings = settings
        self.output_budget = output_budget
        self.tool_search = tool_search
        self.search_threshold = search_threshold
        self.core_tools = list(core_tools)
        if isinstance(search_embedder, str) and search_embedder not in ("auto", "local", "minilm"):
            raise ValueError(f"search_embedder is an embedder, 'auto', 'local' or 'minilm', not {search_embedder!r}.")
        self.search_embedder = search_embedder
        if isinstance(search_reranker, str) and search_reranker != "minilm":
            raise ValueError(f"search_reranker is an embedder, 'minilm' or None, not {search_reranker!r}.")
        self.search_reranker = search_reranker
        self._search_cache: tuple[tuple[tuple[str, str], ...], ToolSearch] | None = None
        self.code_mode = CodeMode() if code_mode is True else (code_mode or None)
        self.resources = list(resources)
        self.on_elicitation = on_elicitation
        self.durable: DurableRunner | None = resolve_runner(durable)
        self._durable_name = durable_name

    async def run(
        self,
        prompt: str,
        history: Sequence[Message | Mapping[str, Any]] | None = None,
        *,
        run_id: str | None = None,
        timeout: float | None = None,
    ) -> AgentResult[OutputT]:
        """Answer ``prompt``, calling tools as the model asks.

        Args:
            prompt: the user's message.
            history: earlier messages, sent before the prompt: a previous result's ``all_messages()``, or the
                same as JSON-like dicts (``[{"role": "user", "content": ...}, ...]``, see
                :func:`~kavalai.llm.parse_messages`).
            run_id: with ``durable=``, the run's id (a new one by default): the same id returns a finished run's
                result from the journal, or resumes a run whose process died.
            timeout: seconds the whole run may take (``None``: no limit). It is a deadline the run's tool calls
                inherit: a tool whose own timeout is longer is cut when the run's time is up (an MCP server is told
                the milliseconds left), and the run then ends with
                :class:`~kavalai.errors.DeadlineExceededError`.

        Raises:
            MaxStepsExceededError: the model was still calling tools after ``max_steps`` model calls.
            StructuredOutputError: the final answer did not fit ``output_type``, even after one repair.
            LLMError: the provider failed (connection, error status).
            ToolNotFoundError: ``allowed_tools`` names a URI (not a glob) that no tool has.
            ServerConnectionError: an MCP server that was not connected yet failed to start.
            DeadlineExceededError: the run took longer than ``timeout``.
            ValueError: ``timeout`` is not ``None`` nor a positive number of seconds (0 too: to pass on a budget
                that may have run out, run inside ``with deadline(left):``).
        """
        limit = limit_seconds(timeout, what="Agent.run timeout")  # a caller's limit: above 0, as every timeout
        with deadline(limit, what="agent run"):
            return await self._run(prompt, history, run_id)

    async def _run(
        self, prompt: str, history: Sequence[Message | Mapping[str, Any]] | None, run_id: str | None
    ) -> AgentResult[OutputT]:
        if self.durable is not None:
            messages = parse_messages(history or ())
            payload = {"prompt": prompt, "history": [_dump(message) for message in messages]}
            data = await self.durable.run(self, payload, run_id=run_id)
            if "error" in data:
                raise restore_error(data["error"])
            return self._result_from(data["result"])
        return await self._run_here(prompt, history)

    def _answerer(self) -> ElicitationHandler | None:
        """The answerer of this run's elicitations: ``on_elicitation``, after an ``InputRequested`` event."""
        hook = self.on_elicitation
        if hook is None:
            return None

        async def answer(request: McpElicitation) -> Mapping[str, Any] | McpElicitationResult | None:
            await self._emit(InputRequested(request=request))
            return await hook(request)

        if isinstance(
            hook, OutsideElicitation
        ):  # answered outside a durable run (see kavalai.agent.elicitation.recorded)
            answer.outside = hook  # type: ignore[attr-defined]
        return answer

    async def run_prompt(
        self,
        server: str,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        history: Sequence[Message | Mapping[str, Any]] | None = None,
        run_id: str | None = None,
    ) -> AgentResult[OutputT]:
        """Run on an MCP prompt: the prompt ``name`` of ``server`` (a template the user picked), rendered with
        ``arguments``; its last message (the user's) is the prompt, the ones before it follow ``history``.

        Raises:
            ValueError: the agent has no kernel, or the rendered prompt does not end with the user's message.
            FunctionKernelException: the server failed or refused the prompt (see :meth:`run` for the rest).
        """
        if self.kernel is None:
            raise ValueError("run_prompt needs an agent with a kernel: Agent(llm, kernel=...).")
        messages = await prompt_messages(self.kernel, server, name, arguments)
        before, prompt = split_prompt(messages, what=f"The MCP prompt {name!r} of server {server!r}")
        return await self.run(prompt, [*parse_messages(history or ()), *before], run_id=run_id)

    # ------------------------------------------------------------------------------------ as a durable target

    @property
    def durable_name(self) -> str:
        """The name durable runners know this agent by: ``agent:<durable_name>``."""
        return f"agent:{self._durable_name}"

    def durable_definition(self) -> list[tuple[str, Any]]:
        """What a durable run of this agent records its fingerprint of (see ``docs/durable.md``): its model, its
        instructions, the tools it may call, its output type and its step limit. A resume under an agent changed in
        any of them is refused, naming the first part that differs."""
        output = None if self.output_type is None else self.output_type.model_json_schema()
        return [
            ("model", f"{self.llm.provider}/{self.llm.model}"),
            ("instructions", self.instructions),
            ("tools", self.allowed_tools),
            ("output_type", output),
            ("max_steps", self.max_steps),
        ]

    async def durable_missing_tool(self) -> tuple[str, str, str] | None:
        """The first tool its ``allowed_tools`` names by URI (not a glob) that the kernel does not have, as ``(step,
        tool URI, why)``, or ``None``: a durable runner asks before it runs or resumes a run (``docs/durable.md``).
        A tool of a glob or of ``allowed_tools=None`` gone since a run began stops the run when it is called
        (:func:`~kavalai.durable.tool_gone`)."""
        kernel = self.kernel
        if kernel is None or self.allowed_tools is None:
            return None
        for entry in self.allowed_tools:
            if any(char in entry for char in "*?["):
                continue
            try:
                await kernel.resolve_tool(entry)
            except ToolNotFoundError as exc:
                return f"tool {entry}", entry, exc.message
            except FunctionKernelException:  # a server that cannot be reached is not a missing tool
                continue
        return None

    @property
    def durable_kernel(self) -> FunctionKernel | None:
        """The kernel whose tool calls are the run's journaled steps."""
        return self.kernel

    async def run_journaled(self, payload: Any) -> Any:
        """Run one payload inside the current durable run (the runner calls this); the outcome as JSON data."""
        try:
            result = await self._run_here(payload["prompt"], payload.get("history") or ())
        except Exception as exc:
            return {"error": error_envelope(exc)}
        return {"result": _dump_result(result)}

    def step_answers(self, run: DurableRun, position: int) -> AbstractContextManager[None]:
        """Where a tool step redone elsewhere (a Temporal activity) gets its answers to MCP servers' requests for
        input: this agent's ``on_elicitation``, its answers kept in ``run``'s answer log under ``position``."""
        answerer = self._answerer()
        return nullcontext() if answerer is None else answering(recorded(answerer, run, position))

    async def execute_step(self, request: Mapping[str, Any]) -> Any:
        """Redo a step of a durable run from its JSON request (an engine that runs steps elsewhere, such as a
        Temporal activity, calls this): the tool listing, a model reply or an approval. Returns the step's result
        as the journal holds it."""
        kind = request.get("kind")
        if kind == "tools":
            kernel = self.kernel
            if kernel is None:
                return {"ok": []}
            return await guarded(lambda: kernel.describe_tools(self.allowed_tools), _same)
        if kind == "model":
            messages = parse_messages(request["messages"])
            specs = [ToolSpec.model_validate(spec) for spec in request["tools"]]
            return await guarded(lambda: self._raw_reply(int(request["step"]), messages, specs), _dump)
        if kind == "approval" and self.approve is not None:
            return await approval_step(self.approve, request)
        raise ValueError(f"An agent cannot redo a step of kind {kind!r}.")

    def _result_from(self, data: Mapping[str, Any]) -> AgentResult[OutputT]:
        output = data["output"]
        if self.output_type is not None:
            output = self.output_type.model_validate(output)
        return AgentResult(
            output=output,
            new_messages=parse_messages(data["new_messages"]),
            history=parse_messages(data["history"]),
            tool_calls=[ToolCallRecord(**record) for record in data["tool_calls"]],
            usage=Usage.model_validate(data["usage"]),
            steps=int(data["steps"]),
        )

    async def _run_here(
        self, prompt: str, history: Sequence[Message | Mapping[str, Any]] | None
    ) -> AgentResult[OutputT]:
        every = await self._tool_specs()
        if self.resources and self.kernel is not None:
            every.append(
                ToolSpec.from_description(model_description(await resource_reader_spec(self.kernel, self.resources)))
            )
        native = self._native_search(every) if self.code_mode is None else None
        search = None if self.code_mode is not None or native is not None else await self._search_index(every)
        if native is not None:
            specs = native
        else:
            specs = self._core(every, search) if self.code_mode is None else await self._code_spec(every)
        state = _RunState(history=parse_messages(history or ()), new=[UserMessage(content=prompt)])
        runner = ToolRunner(
            self.kernel,
            [spec.name for spec in every],
            approve=self.approve,
            require_approval=self.require_approval,
            emit=self._emit,
            budget=self._budget(),
            search=search,
            code_mode=self.code_mode,
            wrapped=self._wrapped_uris(every),
            resources=self.resources,
            sequential=current_run() is not None,
            report_progress=self.on_event is not None,
        )
        await self._emit(RunStarted(prompt=prompt, tools=[spec.name for spec in specs]))
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "agent",
            "gen_ai.provider.name": self.llm.provider,
            "gen_ai.request.model": self.llm.model,
        }
        try:
            with span(f"invoke_agent {self.llm.model}", attributes), answering(self._answerer()), run_scope():
                return await self._loop(state, specs, runner)
        except Exception as exc:
            await self._emit(RunFailed(error=exc, result=state.result(None)))
            raise

    async def _loop(self, state: _RunState, specs: list[ToolSpec], runner: ToolRunner) -> AgentResult[OutputT]:
        text = "\n\n".join(part for part in (self.instructions, runner.search_hint) if part)
        system = SystemMessage(content=text) if text else None
        repairs_left = 1
        for step in range(1, self.max_steps + 1):
            _check_deadline()  # a tool's timeout error may have used up the run's time: no further model call
            state.steps = step
            await self._emit(StepStarted(step=step))
            try:
                response = await self._call_model(step, state.messages(system), specs)
            except StructuredOutputError as exc:
                if repairs_left == 0 or exc.response is None or step == self.max_steps:
                    raise
                repairs_left -= 1
                state.usage += exc.response.usage
                state.new += [exc.response.message, UserMessage(content=_repair_request(exc))]
                await self._emit(ModelResponded(step=step, response=exc.response))
                continue
            state.usage += response.usage
            state.new.append(response.message)
            await self._emit(ModelResponded(step=step, response=response))
            if not response.tool_calls:
                return await self._finish(state, response)
            if step == self.max_steps:
                # Answer the calls that will not run, so the messages stay a valid history for another run.
                state.new += [_not_run(call) for call in response.tool_calls]
                break
            try:
                done = await runner.run_step(step, response.tool_calls)
            except HookFailures as failures:
                for _message, record in failures.done:  # the calls that completed stay in the partial result
                    state.trace.append(record)
                raise _hook_error(failures, state.result(None)) from failures.errors[0]
            state.trace.extend(runner.inner_records)  # the calls code-mode snippets made, before their snippet
            runner.inner_records.clear()
            for message, record in done:
                state.new.append(message)
                state.trace.append(record)
            specs = runner.offer(specs)  # what a search found is offered from the next step on
        raise MaxStepsExceededError(
            f"The agent reached max_steps={self.max_steps} while the model was still calling tools. Raise "
            "max_steps, or tell the model in the instructions to answer sooner.",
            max_steps=self.max_steps,
            result=state.result(None),
        )

    async def aclose(self) -> None:
        """Close the LLM client if the agent built it from a model id; a client you passed in stays yours."""
        if self._owns_llm:
            await self.llm.aclose()

    async def __aenter__(self) -> Agent[OutputT]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _describe(self) -> list[dict[str, Any]]:
        """The kernel's tool descriptions for this agent; in a durable run, a journaled step (the tools a run
        resumes with are those it began with)."""
        kernel = self.kernel
        assert kernel is not None
        return await durable_step(
            "tools",
            lambda: kernel.describe_tools(self.allowed_tools),
            dump=_same,
            load=_description_list,
            request=lambda: {"kind": "tools"},
        )

    async def _tool_specs(self) -> list[ToolSpec]:
        if self.kernel is None:
            return []
        descriptions = await self._describe()
        budget = self._budget()
        if budget is not None and budget.overflow == "artifact" and descriptions:
            descriptions.append(budget.read_artifact_spec())
        return [ToolSpec.from_description(model_description(description)) for description in descriptions]

    async def _code_spec(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """Code mode offers one tool, run_python, describing every tool as a typed async stub."""
        assert self.code_mode is not None
        if not specs or self.kernel is None:
            return []
        descriptions = await self._describe()
        return [ToolSpec.from_description(self.code_mode.spec([model_description(d) for d in descriptions]))]

    def _wrapped_uris(self, specs: list[ToolSpec]) -> list[str]:
        if self.kernel is None or self.code_mode is None:
            return []
        kernel = self.kernel
        return [s.name for s in specs if kernel.has_tool(s.name) and kernel.get_tool_definition(s.name).wrapped]

    def _native_search(self, specs: list[ToolSpec]) -> list[ToolSpec] | None:
        """With ``tool_search="native"`` and a client that searches itself (and, when streaming, keeps its
        search's items in a streamed reply): every tool, the ones outside ``core_tools`` deferred to the
        provider's search; ``None`` otherwise (our search instead)."""
        if self.tool_search != "native" or not getattr(self.llm, "native_tool_search", False):
            return None
        if self.stream and not getattr(self.llm, "native_tool_search_streams", False):
            return None
        return [
            s if s.name == READ_ARTIFACT or any(fnmatchcase(s.name, p) for p in self.core_tools) else _deferred(s)
            for s in specs
        ]

    async def _search_index(self, specs: list[ToolSpec]) -> ToolSearch | None:
        """The search index over ``specs``, built in a worker thread (thousands of tools, or an embedder, take
        longer than the event loop may be held) and kept while the agent's tools stay the same."""
        searching = self.tool_search if self.tool_search is not None else len(specs) > self.search_threshold
        if not searching:
            return None
        searchable = [
            {"name": s.name, "description": s.description, "inputSchema": s.input_schema}
            for s in specs
            if s.name != READ_ARTIFACT
        ]
        key = tuple((s.name, s.description) for s in specs if s.name != READ_ARTIFACT)
        if self._search_cache is not None and self._search_cache[0] == key:
            return self._search_cache[1]
        chosen, reranker = self.search_embedder, self.search_reranker
        index = await anyio.to_thread.run_sync(
            lambda: ToolSearch(searchable, embedder=_embedder(chosen), reranker=_embedder(reranker))
        )
        self._search_cache = (key, index)
        return index

    def _core(self, specs: list[ToolSpec], search: ToolSearch | None) -> list[ToolSpec]:
        """What the model is offered first: everything, or, when searching, the core tools and ``search_tools``."""
        if search is None:
            return specs
        core = [s for s in specs if s.name == READ_ARTIFACT or any(fnmatchcase(s.name, p) for p in self.core_tools)]
        return [*core, ToolSpec.from_description(search.spec())]

    def _budget(self) -> OutputBudget | None:
        if self.output_budget is not None:
            return self.output_budget
        found = getattr(self.kernel, "output_budget", None)
        return found if isinstance(found, OutputBudget) else None

    async def _call_model(self, step: int, messages: list[Message], specs: list[ToolSpec]) -> LLMResponse:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.llm.provider,
            "gen_ai.request.model": self.llm.model,
        }
        with span(f"chat {self.llm.model}", attributes) as current:
            response = await self._model_reply(step, messages, specs)
            annotate(
                current,
                {
                    "gen_ai.usage.input_tokens": response.usage.input_tokens,
                    "gen_ai.usage.output_tokens": response.usage.output_tokens,
                    "gen_ai.response.model": response.model or self.llm.model,
                    "gen_ai.response.finish_reasons": [response.stop_reason or "stop"],
                },
            )
            return response

    async def _model_reply(self, step: int, messages: list[Message], specs: list[ToolSpec]) -> LLMResponse:
        response = await durable_step(
            f"model {self.llm.provider}/{self.llm.model}",
            lambda: self._raw_reply(step, messages, specs),
            dump=_dump,
            load=LLMResponse.model_validate,
            request=lambda: {
                "kind": "model",
                "step": step,
                "messages": [_dump(message) for message in messages],
                "tools": [_dump(spec) for spec in specs],
            },
        )
        if self.output_type is not None and not isinstance(response.parsed, self.output_type):
            response = parse_structured(response, self.output_type, provider=self.llm.provider, model=self.llm.model)
        return response

    async def _raw_reply(self, step: int, messages: list[Message], specs: list[ToolSpec]) -> LLMResponse:
        if not self.stream:
            return await self.llm.complete(
                messages, tools=specs, response_model=self.output_type, settings=self.settings
            )
        return await self._stream_model(step, messages, specs)

    async def _stream_model(self, step: int, messages: list[Message], specs: list[ToolSpec]) -> LLMResponse:
        events = self.llm.stream(messages, tools=specs, response_model=self.output_type, settings=self.settings)
        response: LLMResponse | None = None
        async for event in events:  # drained to the end, so the provider's stream is closed
            if isinstance(event, TextDelta):
                await self._emit(ModelTextDelta(step=step, text=event.text))
            elif isinstance(event, ResponseDone):
                response = event.response
        if response is not None:
            return response
        raise LLMResponseError(
            "The model's stream ended without a complete response.", provider=self.llm.provider, model=self.llm.model
        )

    async def _finish(self, state: _RunState, response: LLMResponse) -> AgentResult[OutputT]:
        output = response.parsed if self.output_type is not None else response.text
        result: AgentResult[OutputT] = state.result(output)
        await self._emit(RunFinished(result=result))
        return result

    async def _emit(self, event: AgentEvent) -> None:
        if self.on_event is None:
            return
        outcome = self.on_event(event)
        if inspect.isawaitable(outcome):
            await outcome

    def __repr__(self) -> str:
        output = self.output_type.__name__ if self.output_type is not None else "str"
        return f"<Agent {self.llm.provider}/{self.llm.model} output={output} max_steps={self.max_steps}>"


def _dump(value: BaseModel) -> Any:
    return value.model_dump(mode="json", by_alias=True)


def _same(value: Any) -> Any:
    return value


def _description_list(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise TypeError("The journaled tool listing is not a list of tool descriptions.")
    return data


def _dump_result(result: AgentResult[Any]) -> dict[str, Any]:
    return {
        "output": to_jsonable_python(result.output, by_alias=True, fallback=str),
        "new_messages": [_dump(message) for message in result.new_messages],
        "history": [_dump(message) for message in result.history],
        "tool_calls": [to_jsonable_python(asdict(record), fallback=str) for record in result.tool_calls],
        "usage": _dump(result.usage),
        "steps": result.steps,
    }


def _make_client(model_id: str) -> LLMClient:
    from kavalai.llm.registry import make_client

    return make_client(model_id)


def _not_run(call: ToolCall) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        name=call.name,
        content="Not run: the agent reached its step limit before running this call.",
        is_error=True,
    )


def _repair_request(exc: StructuredOutputError) -> str:
    return (
        f"Your answer could not be used: {exc.message}. Reply again with only a JSON object that fits the "
        "requested schema."
    )


def _hook_error(failures: HookFailures, result: AgentResult[Any]) -> ApprovalHookError:
    first = failures.errors[0]
    more = f" (and {len(failures.errors) - 1} more)" if len(failures.errors) > 1 else ""
    return ApprovalHookError(
        f"The approval hook failed: {type(first).__name__}: {first}{more}. The other calls of the step ran; "
        "see .result.trace.",
        errors=list(failures.errors),
        result=result,
    )


def _deferred(spec: ToolSpec) -> ToolSpec:
    return spec.model_copy(update={"deferred": True})


def _check_deadline() -> None:
    """Raise when the deadline of the run (``Agent.run(timeout=)``, or whatever the run is inside) has passed."""
    at = current_deadline()
    if at is not None and time.monotonic() >= at:
        raise DeadlineExceededError("The agent run ran past its deadline.")


def _embedder(chosen: Embedder | str | None) -> Embedder | None:
    """The embedder ``search_embedder`` names (``"auto"``: WordLlama where it is installed)."""
    if chosen == "local":
        return local_embedder()
    if chosen == "minilm":
        return minilm_embedder()
    if chosen == "auto":
        try:
            return local_embedder()
        except ImportError:
            return None
    return None if isinstance(chosen, str) else chosen
