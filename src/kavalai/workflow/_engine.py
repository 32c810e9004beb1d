"""WorkflowEngine: runs a checked :class:`Workflow` on a :class:`~kavalai.FunctionKernel`.

The engine owns no per-run state, so many runs (concurrent ones too) share one engine and its kernel's
connections. ``connect()`` opens them (a run on an engine that was not connected opens what it needs on first
use) and only ``aclose()`` closes them: a run never does.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack

import anyio

from kavalai.adapters.mcp import ElicitationHandler, McpElicitation, answering, current_answerer
from kavalai.workflow._executor import Emit, Execution
from kavalai.workflow._factory import ClientFactory, RunClients, ScopedRun, checked_factory
from kavalai.workflow._graph import Workflow, check_tools, checked_timeout, checked_visits
from kavalai.workflow._load import checked_options, load_workflow
from kavalai.workflow._nodes import AgentNode, FunctionNode, LlmNode
from kavalai.workflow._parts import UNSET, Dialect, LoadedWorkflow, LoadOptions, _Unset
from kavalai.workflow._result import InputRequested, RunResult, WorkflowEvent, jsonable
from kavalai.workflow._runners import llm_node_reply, node_agent
from kavalai.workflow._services import Service
from kavalai.workflow.errors import NodeError, WorkflowDefinitionError

if TYPE_CHECKING:
    from kavalai import FunctionKernel
    from kavalai.agent.budget import OutputBudget
    from kavalai.durable import DurableRun, DurableRunner
    from kavalai.llm.base import LLMClient

__all__ = ["WorkflowEngine"]


class WorkflowEngine:
    """Runs a workflow on a kernel.

    Args:
        workflow: the checked graph, from :class:`~kavalai.workflow.WorkflowBuilder` or the YAML loader.
        kernel: the kernel whose tools ``function`` and ``agent`` nodes call; a new empty one by default.
        llm: the LLM client (or a model id such as ``"openai/gpt-4.1-mini"``) for ``agent`` and ``llm`` nodes
            that name no model found in ``llms`` or ``models``. Given a client, it serves every such node, so a
            :class:`~kavalai.testing.ScriptedLLM` can stand in for all of them in tests.
        llms: clients by model name; a node whose ``model`` is a key here uses that client. The caller owns
            these clients: the engine does not close them.
        models: client factories by model name (the YAML ``models`` section). The engine creates each client on
            :meth:`connect` (or first use) and closes it on :meth:`aclose`.
        max_visits: overrides the workflow's node-visit limit.
        timeout: overrides the workflow's run timeout, in seconds.
        services: things to start with the connections and stop on :meth:`aclose` (the YAML loader uses these
            for OpenAPI imports and for REST apps it serves itself).
        durable: run durably on this runner (:mod:`kavalai.durable`): a runner, a database URL for a
            :class:`~kavalai.durable.DbosRunner` (``"sqlite:///runs.sqlite"``, ``"postgresql://..."``), or
            ``True`` for one journaling in ``kavalai-runs.sqlite``. Name runs with ``run(..., run_id=...)``; the
            same id resumes a run whose process died.
        output_budget: how much of the run's data reaches the models of ``llm`` and ``agent`` nodes (a
            :class:`~kavalai.agent.OutputBudget`): each value their templates print, and the tool results an agent
            node's agent reads; ``None`` takes the kernel's ``output_budget`` (the YAML ``output_budget`` section
            sets it for a workflow file). A run's trace keeps everything whole.
        client_factory: Kaval.AI 1.0's way to give the engine its LLM clients:
            ``client_factory(model, parameters, stats) -> LLMClient``, called the first time a run needs a model
            id (a node's ``model``, else a model id given as ``llm``) that ``llms`` and ``models`` do not hold;
            the client serves the rest of that run and is closed when the run ends. ``parameters`` and ``stats``
            are ``None``: nodes apply their settings to each call, and usage is in the run's trace.

    Use it as ``async with engine:`` (connect on entry, close on exit) or call :meth:`connect` and
    :meth:`aclose` yourself.
    """

    def __init__(
        self,
        workflow: Workflow,
        kernel: FunctionKernel | None = None,
        *,
        llm: LLMClient | str | None = None,
        llms: Mapping[str, LLMClient] | None = None,
        models: Mapping[str, Callable[[], LLMClient]] | None = None,
        max_visits: int | None = None,
        timeout: float | _Unset | None = UNSET,
        services: Sequence[Service] = (),
        owns_kernel: bool | None = None,
        durable: DurableRunner | str | bool | None = None,
        output_budget: OutputBudget | None = None,
        on_elicitation: ElicitationHandler | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        #: Answers what MCP servers (``elicitation="caller"``) ask the user during a durable run's tool calls, in
        #: whichever process runs it: a handler, or :class:`~kavalai.agent.OutsideElicitation` to answer through
        #: the runner. Its answers are kept across a crash. (A run that is not durable takes ``run(on_elicitation=)``.)
        self.on_elicitation = on_elicitation
        #: The output budget of the run's model nodes (``None``: the kernel's ``output_budget``, read at each run).
        self.output_budget = output_budget
        # A kernel the caller passed in stays the caller's: aclose() closes only a kernel the engine made.
        self._owns_kernel = kernel is None if owns_kernel is None else owns_kernel
        if kernel is None:
            from kavalai import FunctionKernel

            kernel = FunctionKernel()
        self.workflow = workflow
        self.kernel = kernel
        self._llm = llm
        #: Makes the clients of each run's model ids (Kaval.AI 1.0's ``client_factory``), or ``None``.
        self.client_factory = checked_factory(client_factory)
        self._llms: dict[str, LLMClient] = dict(llms or {})
        self._factories: dict[str, Callable[[], LLMClient]] = dict(models or {})
        self._made: dict[str, LLMClient] = {}
        self.max_visits = workflow.max_visits if max_visits is None else checked_visits(max_visits, "max_visits")
        self.timeout = workflow.timeout if isinstance(timeout, _Unset) else checked_timeout(timeout, "timeout")
        self._services = list(services)
        self._started = 0  # how many of the services are running
        self._lock = anyio.Lock()
        self.durable: DurableRunner | None = None
        if durable is not None and durable is not False:
            from kavalai.durable import resolve_runner

            self.durable = resolve_runner(durable)
        # The dialect of the document the engine was loaded from, when not ours: its runs answer in its terms.
        self._dialect: Dialect | None = None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], **options: Unpack[LoadOptions]) -> WorkflowEngine:
        """Load a workflow from YAML text or a YAML file: build its graph and register what it declares on the
        kernel. Every registered dialect loads: ours and Kaval.AI 1.0's (told apart by shape, see
        :meth:`from_dict`).

        Args:
            path: the file, or the YAML text itself: a :class:`pathlib.Path` or a ``str`` naming an existing file
                is read as a file; any other ``str`` containing a newline or a colon is the YAML text (as
                Kaval.AI 1.0's ``from_yaml`` takes it). Use :meth:`from_yaml_path` to say "file" explicitly.
            options: ``kernel`` (register the declared tools on this kernel instead of a new one), ``llm``,
                ``llms``, ``max_visits``, ``timeout``, ``durable``, ``client_factory`` as for the constructor
                (``llms`` wins over the file's ``models``); ``rag_services``, ``history``, ``data_models`` for
                Kaval.AI 1.0 documents only, see :meth:`from_dict`.

        Raises:
            WorkflowDefinitionError: the document is invalid; the message names the node or section and field.
            TypeError: an option that is not one of these.
        """
        checked = checked_options(options)
        return cls._from_loaded(load_workflow(path, checked), checked)

    @classmethod
    def from_yaml_path(cls, path: str | os.PathLike[str], **options: Unpack[LoadOptions]) -> WorkflowEngine:
        """Load the workflow YAML file at ``path`` (any dialect); options as for :meth:`from_yaml`.

        Module paths and relative paths in the document are resolved against the file's directory.
        """
        checked = checked_options(options)
        return cls._from_loaded(load_workflow(path, checked, text=False), checked)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: str | os.PathLike[str] | None = None,
        **options: Unpack[LoadOptions],
    ) -> WorkflowEngine:
        """Load a parsed workflow document (a dict), in our format or in Kaval.AI 1.0's.

        A document whose nodes have ``name``/``type`` (ours have ``id``/``kind``), or that has a key only
        Kaval.AI 1.0 uses (``data_types``, ``llm_model``, ``start``, ``templates``, ...), is read as Kaval.AI 1.0
        and translated into our graph (see ``docs/migrating_from_kaval.md``); its runs answer in Kaval.AI's terms.

        Args:
            data: the document.
            base_dir: where module paths are looked up besides ``sys.path``; the current directory by default.
            options: as for :meth:`from_yaml`, and for Kaval.AI 1.0 documents: ``rag_services`` (for
                ``rag_query`` nodes: a retriever, used as ``"default"``, or retrievers by service name; any object
                with an async ``query(...)`` method, :class:`kavalai.workflow.kaval.Retriever`), ``history`` (for
                ``history`` inputs and ``use_history``: a :class:`kavalai.workflow.kaval.History` such as
                :class:`~kavalai.workflow.kaval.InMemoryHistory`), ``data_models`` (Pydantic models used as they are
                for the ``data_types`` of those names, as Kaval.AI's ``data_models=``).
        """
        checked = checked_options(options)
        return cls._from_loaded(load_workflow(data, checked, base_dir=base_dir), checked)

    @classmethod
    def _from_loaded(cls, loaded: LoadedWorkflow, options: LoadOptions) -> WorkflowEngine:
        engine = cls(
            loaded.workflow,
            loaded.kernel,
            llm=options.get("llm"),
            llms=options.get("llms"),
            models=loaded.models,
            max_visits=options.get("max_visits"),
            timeout=options.get("timeout", UNSET),
            services=loaded.services,
            owns_kernel=loaded.owns_kernel,
            durable=options.get("durable"),
            output_budget=loaded.output_budget,
            client_factory=options.get("client_factory"),
        )
        engine._dialect = loaded.dialect
        return engine

    # ---------------------------------------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Start what the engine serves, connect every server of the kernel and create the named model clients,
        then check that every tool the workflow names exists: a misconfigured server, a missing API key or a
        misspelt tool URI fails here, before any run.

        Raises:
            ServerConnectionError: a server could not be started or reached.
            WorkflowDefinitionError: a node names a tool the kernel does not have, or a model node has no model
                or its client cannot be created (an unknown provider, a missing API key).
        """
        await self._prepare()
        await self.kernel.connect()
        for name in self._factories:
            self._client(name)
        for node in self.workflow.nodes.values():
            if isinstance(node, AgentNode | LlmNode):
                try:
                    if self.client_factory is None:
                        await self._llm_for(node.model, node.id)
                    else:  # the factory makes a run's clients when the run needs them
                        self._choice(node.model, node.id)
                except NodeError as exc:
                    raise WorkflowDefinitionError(exc.message, node=node.id, field="model") from exc
        check_tools(self.workflow, self.kernel)

    async def aclose(self) -> None:
        """Close the kernel's connections (when the engine made the kernel: one you passed in stays yours, open),
        stop what the engine serves and close the LLM clients it created.

        Idempotent; the engine may be connected (or run) again afterwards.
        """
        made, self._made = list(self._made.values()), {}
        async with self._lock:
            started, self._started = self._services[: self._started], 0
            try:
                if self._owns_kernel:
                    await self.kernel.close()
            finally:
                for service in reversed(started):
                    await service.stop()
                for client in made:
                    await client.aclose()

    async def __aenter__(self) -> WorkflowEngine:
        try:
            await self.connect()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _prepare(self) -> None:
        if self._started == len(self._services):
            return
        async with self._lock:
            while self._started < len(self._services):
                await self._services[self._started].start(self.kernel)
                self._started += 1

    # ----------------------------------------------------------------------------------------------- running

    async def run(
        self,
        input: Any = None,
        *,
        max_visits: int | None = None,
        timeout: float | _Unset | None = UNSET,
        run_id: str | None = None,
        on_elicitation: ElicitationHandler | None = None,
    ) -> RunResult:
        """Run the workflow on ``input`` and return the result (it does not raise for a failed run).

        Args:
            input: the run input, validated by the workflow's input type (a dict, a model, or a scalar).
            max_visits: overrides the node-visit limit for this run.
            timeout: overrides the run timeout for this run, in seconds (``None``: no limit).
            run_id: the run's id (a new one by default). On a durable engine it names the run: running the same
                id again returns a finished run's result from the journal and resumes one whose process died,
                without calling its recorded tool calls again.
            on_elicitation: answers what an MCP server configured with ``elicitation="caller"`` asks the user
                during the run's tool calls (the values, ``None`` to decline, or an ``McpElicitationResult``).
                Without it such requests are refused; :meth:`stream` hands them to its consumer instead.

        Returns:
            The :class:`RunResult`: status, validated output, error and trace. Call ``raise_for_status()`` to
            turn a failure into its exception.
        """
        if self.durable is not None:
            if on_elicitation is not None:
                raise ValueError(
                    "A durable run may run in another process, where run(on_elicitation=...) cannot reach: give the "
                    "engine its answerer instead (WorkflowEngine(..., on_elicitation=...) or engine.on_elicitation; "
                    "kavalai.agent.OutsideElicitation() to answer through the runner)."
                )
            payload = {"input": jsonable(input), "max_visits": max_visits}
            if not isinstance(timeout, _Unset):
                payload["timeout"] = timeout
            data = await self.durable.run(self, payload, run_id=run_id)
            return self._answer(RunResult.from_dict(data, output_type=self.workflow.output_type))
        if self._started != len(self._services):  # services not started yet (most engines have none)
            await self._prepare()
        if on_elicitation is None and current_answerer() is None:  # nothing to set, nor to shadow: the usual run
            return self._answer(await self._execution(input, max_visits, timeout, run_id=run_id).run())
        with answering(on_elicitation):
            return self._answer(await self._execution(input, max_visits, timeout, run_id=run_id).run())

    def _answer(self, result: RunResult) -> RunResult:
        """The result as the caller's dialect asks for it (Kaval.AI 1.0's ``status == "completed"``, its
        ``trace`` of node names), or as it is."""
        answered: RunResult = result if self._dialect is None else self._dialect.answer(result)
        return answered

    # ------------------------------------------------------------------------------------ as a durable target

    def durable_definition(self) -> list[tuple[str, Any]]:
        """The workflow's nodes in order, each as JSON (its description left out): what a durable run records its
        fingerprint of, so that a resume under a changed workflow is refused (see ``docs/durable.md``)."""
        return [
            (node_id, node.model_dump(mode="json", exclude={"description"}))
            for node_id, node in self.workflow.nodes.items()
        ]

    async def durable_missing_tool(self) -> tuple[str, str, str] | None:
        """The first ``function`` node whose tool the kernel does not have, as ``(node, tool URI, why)``, or ``None``:
        a durable runner asks before it runs or resumes a run, so that a run is never carried on (nor ended) by a
        process that cannot call its steps (see ``docs/durable.md``). A tool's server is connected on demand, as its
        call would; a server that cannot be reached is not a missing tool (its call says so, as before)."""
        from kavalai.errors import FunctionKernelException, ToolNotFoundError

        await self._prepare()
        asked: set[str] = set()  # each tool once (a run of many nodes of one tool asks once)
        for node in self.workflow.nodes.values():
            if isinstance(node, FunctionNode) and node.tool not in asked:
                asked.add(node.tool)
                try:
                    await self.kernel.resolve_tool(node.tool)
                except ToolNotFoundError as exc:
                    return node.id, node.tool, exc.message
                except FunctionKernelException:
                    continue
        return None

    @property
    def durable_name(self) -> str:
        """The name durable runners know this engine by: ``workflow:<workflow name>``."""
        return f"workflow:{self.workflow.name}"

    @property
    def durable_kernel(self) -> FunctionKernel:
        """The kernel whose tool calls are the run's journaled steps."""
        return self.kernel

    async def run_journaled(self, payload: Any) -> Any:
        """Run one payload inside the current durable run (the runner calls this); the result as JSON data."""
        from kavalai.durable import current_run, error_envelope

        run = current_run()
        await self._prepare()
        timeout = payload.get("timeout", UNSET)
        execution = self._execution(
            payload.get("input"), payload.get("max_visits"), timeout, run_id=run.run_id if run else None
        )
        with answering(self.on_elicitation):
            result = await execution.run()
        data = result.to_dict()
        if result.error is not None:
            data["error"]["envelope"] = error_envelope(result.error)
        return data

    def step_answers(self, run: DurableRun, position: int) -> AbstractContextManager[None]:
        """Where a tool step redone elsewhere (a Temporal activity) gets its answers to MCP servers' requests for
        input: :attr:`on_elicitation`, its answers kept in ``run``'s answer log under ``position``."""
        from contextlib import nullcontext

        from kavalai.agent.elicitation import recorded

        answerer = self.on_elicitation
        return nullcontext() if answerer is None else answering(recorded(answerer, run, position))

    async def execute_step(self, request: Mapping[str, Any]) -> Any:
        """Redo a step of a durable run from its JSON request (a Temporal activity calls this): an llm node's
        model call, or a step of an agent node's agent (its tool listing, a model reply, an approval). Tool calls
        are redone through :attr:`durable_kernel` by the engine itself. Returns the step's result as the journal
        holds it."""
        clients = self._run_clients()
        try:
            return await self._execute_step(request, self._llm_for if clients is None else clients.llm_for)
        finally:
            if clients is not None:
                await clients.aclose()

    async def _execute_step(
        self, request: Mapping[str, Any], llm_for: Callable[[str | None, str], Awaitable[LLMClient]]
    ) -> Any:
        from kavalai.durable import guarded
        from kavalai.llm.messages import parse_messages

        node = self.workflow.nodes.get(str(request.get("node")))
        if isinstance(node, LlmNode) and request.get("kind") == "model":
            client = await llm_for(node.model, node.id)
            declared = self.workflow.node_types.get(node.id)
            response_model = declared.annotation if declared is not None and declared.is_model else None
            messages = parse_messages(request["messages"])
            return await guarded(
                lambda: llm_node_reply(client, messages, response_model, node.id),
                lambda response: response.model_dump(mode="json", by_alias=True),
            )
        if isinstance(node, AgentNode):
            agent = node_agent(node, await llm_for(node.model, node.id), self.kernel, self.workflow)
            return await agent.execute_step(request)
        raise ValueError(
            f"Workflow {self.workflow.name!r} cannot redo a step of kind {request.get('kind')!r} "
            f"for node {request.get('node')!r}."
        )

    async def stream(
        self, input: Any = None, *, max_visits: int | None = None, timeout: float | _Unset | None = UNSET
    ) -> AsyncIterator[WorkflowEvent]:
        """Run the workflow, yielding events as they happen: ``RunStarted``, ``NodeStarted``, ``NodeFinished``
        or ``NodeFailed`` per visit, and finally ``RunFinished`` with the :class:`RunResult`.

        Nodes inside parallel branches report while the branches run. The run executes in a task of its own,
        so the consumer may stop iterating at any point: leaving the loop (or closing the iterator) cancels
        the run. Arguments are those of :meth:`run`. When an MCP server configured with ``elicitation="caller"``
        asks the user for input, an ``InputRequested`` event comes and the run waits for its ``answer()`` or
        ``decline()``.
        """
        if self.durable is not None:
            raise TypeError(
                "A durable engine runs with run(..., run_id=...), which journals every step; stream() does not. "
                "Use an engine without durable= to stream events."
            )
        await self._prepare()
        send, receive = anyio.create_memory_object_stream[WorkflowEvent](math.inf)
        execution = self._execution(input, max_visits, timeout, emit=send.send_nowait)

        async def drive() -> RunResult:
            with send:
                return await execution.run()

        async def ask(request: McpElicitation) -> Mapping[str, Any] | None:
            reply: asyncio.Future[Mapping[str, Any] | None] = asyncio.get_running_loop().create_future()
            send.send_nowait(InputRequested(request=request, _reply=reply))
            return await reply

        with answering(ask):  # the run's task starts with a copy of this context
            task = asyncio.get_running_loop().create_task(drive())
        try:
            async for event in receive:
                yield event
            await task  # re-raise what is not a workflow error (those are in RunFinished)
        finally:
            receive.close()
            if not task.done():
                task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: it was raised above, or the consumer left early

    def _execution(
        self,
        input: Any,
        max_visits: int | None,
        timeout: float | _Unset | None,
        *,
        emit: Emit | None = None,
        run_id: str | None = None,
    ) -> Execution | ScopedRun:
        clients = self._run_clients()
        execution = Execution(
            self.workflow,
            self.kernel,
            self._llm_for if clients is None else clients.llm_for,
            input,
            max_visits=self.max_visits if max_visits is None else checked_visits(max_visits, "max_visits"),
            timeout=self.timeout if isinstance(timeout, _Unset) else checked_timeout(timeout, "timeout"),
            emit=emit,
            run_id=run_id,
            budget=self.output_budget or getattr(self.kernel, "output_budget", None),
        )
        return execution if clients is None else ScopedRun(execution, clients)

    def _run_clients(self) -> RunClients | None:
        if self.client_factory is None:
            return None
        return RunClients(self.client_factory, self._choice, self._llm_for, self._factories.__contains__)

    def _client(self, model: str) -> LLMClient:
        """The client for a model name of ``models`` or a model id, created once and closed on aclose()."""
        if model not in self._made:
            factory = self._factories.get(model)
            if factory is not None:
                self._made[model] = factory()
            else:
                from kavalai.llm.registry import make_client

                self._made[model] = make_client(model)
        return self._made[model]

    def _choice(self, model: str | None, node: str) -> LLMClient | str:
        """The client given to the engine for a node's ``model``, else the model id (or name) to make one for."""
        if model is not None and model in self._llms:
            return self._llms[model]
        chosen: LLMClient | str | None = self._llm
        if model is not None and (model in self._factories or chosen is None or isinstance(chosen, str)):
            chosen = model
        if chosen is None:
            raise NodeError(
                f"Node {node!r} needs a model: set its 'model' field (a model id such as 'openai/gpt-4.1-mini', "
                "or a name under the YAML 'models'), or give the engine llm=... (a client or a model id).",
                node=node,
                field="model",
            )
        return chosen

    async def _llm_for(self, model: str | None, node: str) -> LLMClient:
        chosen = self._choice(model, node)
        if not isinstance(chosen, str):
            return chosen
        try:
            return self._client(chosen)
        except Exception as exc:
            raise NodeError(f"Node {node!r}: field 'model': {exc}", node=node, field="model") from exc

    def __repr__(self) -> str:
        return f"<WorkflowEngine {self.workflow!r} on {self.kernel!r}>"
