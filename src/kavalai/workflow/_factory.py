"""``client_factory=``: Kaval.AI 1.0's way of giving a workflow engine its LLM clients, per run.

Kaval.AI's engine builds the client of each model call with ``client_factory(model, parameters, stats_receiver)``;
its tests inject a fake that way. Ours calls the factory the first time a run needs a model id, keeps that client
for the rest of the run and closes it when the run ends, so a factory that returns a new client each time (a
``ScriptedLLM`` with its script, a provider client with its connections) gets a fresh one per run and nothing
outlives the run.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kavalai.secrets import get_logger
from kavalai.workflow.errors import NodeError, WorkflowDefinitionError

if TYPE_CHECKING:
    from kavalai.llm.base import LLMClient
    from kavalai.workflow._result import RunResult

__all__ = ["ClientFactory", "RunClients", "ScopedRun", "checked_factory"]

logger = get_logger("kavalai.workflow")

#: ``client_factory(model, parameters, stats) -> LLMClient``. ``model`` is the model id a node needs
#: (``"openai/gpt-4.1-mini"``); ``parameters`` and ``stats`` are ``None`` (the nodes apply their ``llm_kwargs``
#: to each call themselves, and token usage is in the run's trace). Kaval.AI's ``lambda *a, **k: Fake()`` fits.
ClientFactory = Callable[[str, Any, Any], "LLMClient"]


def checked_factory(factory: Any) -> ClientFactory | None:
    """``factory`` when it is ``None`` or a plain callable; else :class:`WorkflowDefinitionError`, when the engine
    is built (an ``async def`` factory would hand each run a coroutine, not a client)."""
    if factory is None:
        return None
    if not callable(factory):
        raise WorkflowDefinitionError(
            f"client_factory must be a callable (model, parameters, stats) -> LLM client, not a "
            f"{type(factory).__name__}.",
            field="client_factory",
        )
    call = type(factory).__dict__.get("__call__")  # an object whose __call__ is an async def
    if inspect.iscoroutinefunction(factory) or (call is not None and inspect.iscoroutinefunction(call)):
        raise WorkflowDefinitionError(
            "client_factory must return the client itself, not a coroutine: make it a plain function (def, not "
            "async def).",
            field="client_factory",
        )
    made: ClientFactory = factory
    return made


def _checked_client(client: Any, model: str, node: str) -> LLMClient:
    """What the factory returned for ``model``, when it is a client; else :class:`NodeError` (a coroutine made is
    closed, so it is not left un-awaited)."""
    if callable(getattr(client, "complete", None)) and callable(getattr(client, "aclose", None)):
        checked: LLMClient = client
        return checked
    if inspect.iscoroutine(client):
        client.close()
    raise NodeError(
        f"Node {node!r}: field 'model': client_factory returned a {type(client).__name__} for {model!r}, not an LLM "
        "client (an object with complete() and aclose()).",
        node=node,
        field="model",
    )


class _Run(Protocol):
    async def run(self) -> RunResult: ...


class RunClients:
    """The clients one run got from a ``client_factory``: one per model id, closed by :meth:`aclose`."""

    def __init__(
        self,
        factory: ClientFactory,
        choose: Callable[[str | None, str], LLMClient | str],
        fallback: Callable[[str | None, str], Awaitable[LLMClient]],
        keep: Callable[[str], bool],
    ) -> None:
        self._factory = factory
        self._choose = choose  # (model, node) -> a client given to the engine, or the model id to use
        self._fallback = fallback  # the engine's own resolution, for model ids the factory is not asked about
        self._keep = keep  # whether a model id is the engine's own (its `models` factories)
        self._made: dict[str, LLMClient] = {}

    async def llm_for(self, model: str | None, node: str) -> LLMClient:
        """The client for a node: the engine's own where it has one for ``model``, else the factory's."""
        chosen = self._choose(model, node)
        if not isinstance(chosen, str) or self._keep(chosen):
            return await self._fallback(model, node)
        client = self._made.get(chosen)
        if client is None:
            try:
                client = self._factory(chosen, None, None)
            except Exception as exc:
                raise NodeError(
                    f"Node {node!r}: field 'model': client_factory failed for {chosen!r}: {exc}",
                    node=node,
                    field="model",
                ) from exc
            client = _checked_client(client, chosen, node)
            self._made[chosen] = client
        return client

    async def aclose(self) -> None:
        """Close every client the factory made for the run (each once, even if the factory returned it twice)."""
        made, self._made = list({id(c): c for c in self._made.values()}.values()), {}
        for client in made:
            try:
                await client.aclose()
            except Exception as exc:  # logged: a client that fails to close never replaces the run's result
                logger.warning(
                    "closing the LLM client %r after the run failed: %s: %s", client, type(exc).__name__, exc
                )


class ScopedRun:
    """A run whose factory-made clients are closed when it ends, however it ends."""

    def __init__(self, execution: _Run, clients: RunClients) -> None:
        self._execution = execution
        self._clients = clients

    async def run(self) -> RunResult:
        """Run, then close the run's clients."""
        try:
            return await self._execution.run()
        finally:
            await self._clients.aclose()
