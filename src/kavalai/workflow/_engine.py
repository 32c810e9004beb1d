"""WorkflowEngine: runs a checked :class:`Workflow` on a :class:`~kavalai.FunctionKernel`.

The engine owns no per-run state, so many runs (concurrent ones too) share one engine and its kernel's
connections. ``connect()`` and ``aclose()`` are the only places connections open and close.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from kavalai.workflow._executor import Execution
from kavalai.workflow._graph import Workflow
from kavalai.workflow._result import RunFinished, RunResult, WorkflowEvent
from kavalai.workflow.errors import NodeError

if TYPE_CHECKING:
    from kavalai.kernel import FunctionKernel
    from kavalai.llm.base import LLMClient

__all__ = ["WorkflowEngine"]

#: A step run once before the first run or on ``connect()`` (e.g. importing an OpenAPI spec from a server).
SetupStep = Callable[["FunctionKernel"], Awaitable[None]]


class _Unset:
    pass


_UNSET = _Unset()


class WorkflowEngine:
    """Runs a workflow on a kernel.

    Args:
        workflow: the checked graph, from :class:`~kavalai.workflow.WorkflowBuilder` or the YAML loader.
        kernel: the kernel whose tools ``function`` and ``agent`` nodes call; a new empty one by default.
        llm: the LLM client (or a model id such as ``"openai/gpt-4.1-mini"``) for ``agent`` and ``llm`` nodes
            that name no model found in ``llms``. Given a client, it serves every such node, so a
            :class:`~kavalai.testing.ScriptedLLM` can stand in for all of them in tests.
        llms: clients by model name; a node whose ``model`` is a key here uses that client.
        max_visits: overrides the workflow's node-visit limit.
        timeout: overrides the workflow's run timeout, in seconds.
        setup: async steps run once against the kernel before the first run (the YAML loader uses this for
            OpenAPI imports).

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
        max_visits: int | None = None,
        timeout: float | _Unset | None = _UNSET,
        setup: list[SetupStep] | None = None,
    ) -> None:
        if kernel is None:
            from kavalai.kernel import FunctionKernel

            kernel = FunctionKernel()
        self.workflow = workflow
        self.kernel = kernel
        self._llm = llm
        self._llms: dict[str, LLMClient] = dict(llms or {})
        self._made: dict[str, LLMClient] = {}
        self.max_visits = max_visits if max_visits is not None else workflow.max_visits
        self.timeout = workflow.timeout if isinstance(timeout, _Unset) else timeout
        self._setup = list(setup or ())
        self._setup_lock = anyio.Lock()

    @classmethod
    def from_yaml(
        cls,
        path: str | os.PathLike[str],
        *,
        kernel: FunctionKernel | None = None,
        llm: LLMClient | str | None = None,
        llms: Mapping[str, LLMClient] | None = None,
        max_visits: int | None = None,
        timeout: float | _Unset | None = _UNSET,
    ) -> WorkflowEngine:
        """Load a workflow YAML file: build its graph and register what it declares on the kernel.

        Args:
            path: the YAML file.
            kernel: register the declared tools on this kernel instead of a new one.
            llm, llms, max_visits, timeout: as for the constructor.

        Raises:
            WorkflowDefinitionError: the document is invalid; the message names the node or section and field.
        """
        from kavalai.workflow._yaml import load_workflow_file

        loaded = load_workflow_file(Path(path), kernel=kernel)
        return cls(
            loaded.workflow,
            loaded.kernel,
            llm=llm,
            llms={**loaded.llms, **(llms or {})},
            max_visits=max_visits,
            timeout=timeout,
            setup=loaded.setup,
        )

    # ---------------------------------------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Prepare the kernel and connect every server it holds, so a misconfigured server fails here."""
        await self._prepare()
        await self.kernel.connect()

    async def aclose(self) -> None:
        """Close the kernel's connections and the LLM clients the engine created. Idempotent."""
        made, self._made = list(self._made.values()), {}
        try:
            for client in made:
                await client.aclose()
        finally:
            await self.kernel.close()

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
        if not self._setup:
            return
        async with self._setup_lock:
            while self._setup:
                await self._setup[0](self.kernel)
                self._setup.pop(0)

    # ----------------------------------------------------------------------------------------------- running

    async def run(
        self, input: Any = None, *, max_visits: int | None = None, timeout: float | _Unset | None = _UNSET
    ) -> RunResult:
        """Run the workflow on ``input`` and return the result (it does not raise for a failed run).

        Args:
            input: the run input, validated by the workflow's input type (a dict, a model, or a scalar).
            max_visits: overrides the node-visit limit for this run.
            timeout: overrides the run timeout for this run, in seconds (``None``: no limit).

        Returns:
            The :class:`RunResult`: status, validated output, error and trace. Call ``raise_for_status()`` to
            turn a failure into its exception.
        """
        result: RunResult | None = None
        async for event in self.stream(input, max_visits=max_visits, timeout=timeout):
            if isinstance(event, RunFinished):
                result = event.result
        assert result is not None  # the last event of every stream is RunFinished
        return result

    async def stream(
        self, input: Any = None, *, max_visits: int | None = None, timeout: float | _Unset | None = _UNSET
    ) -> AsyncIterator[WorkflowEvent]:
        """Run the workflow, yielding events as they happen: ``RunStarted``, ``NodeStarted``, ``NodeFinished``
        or ``NodeFailed`` per visit, and finally ``RunFinished`` with the :class:`RunResult`.

        Events of nodes inside parallel branches are yielded when the branches join, in the order they
        happened. Arguments are those of :meth:`run`.
        """
        await self._prepare()
        execution = Execution(
            self.workflow,
            self.kernel,
            self._llm_for,
            input,
            max_visits=max_visits if max_visits is not None else self.max_visits,
            timeout=self.timeout if isinstance(timeout, _Unset) else timeout,
        )
        async for event in execution.events():
            yield event

    async def _llm_for(self, model: str | None, node: str) -> LLMClient:
        if model is not None and model in self._llms:
            return self._llms[model]
        chosen: LLMClient | str | None = self._llm
        if chosen is None or (isinstance(chosen, str) and model is not None):
            chosen = model
        if chosen is None:
            raise NodeError(
                f"Node {node!r} needs a model: set its 'model' field, or give the engine llm=... "
                "(a client or a model id such as 'openai/gpt-4.1-mini').",
                node=node,
                field="model",
            )
        if not isinstance(chosen, str):
            return chosen
        if chosen not in self._made:
            from kavalai.llm.registry import make_client

            self._made[chosen] = make_client(chosen)
        return self._made[chosen]

    def __repr__(self) -> str:
        return f"<WorkflowEngine {self.workflow!r} on {self.kernel!r}>"
