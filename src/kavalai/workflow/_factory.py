"""``client_factory=``: Kaval.AI 1.0's way of giving a workflow engine its LLM clients, per run.

Kaval.AI's engine builds the client of each model call with ``client_factory(model, parameters, stats_receiver)``;
its tests inject a fake that way. Ours calls the factory the first time a run needs a model id, keeps that client
for the rest of the run and closes it when the run ends, so a factory that returns a new client each time (a
``ScriptedLLM`` with its script, a provider client with its connections) gets a fresh one per run and nothing
outlives the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kavalai.workflow.errors import NodeError

if TYPE_CHECKING:
    from kavalai.llm.base import LLMClient
    from kavalai.workflow._result import RunResult

__all__ = ["ClientFactory", "RunClients", "ScopedRun"]

#: ``client_factory(model, parameters, stats) -> LLMClient``. ``model`` is the model id a node needs
#: (``"openai/gpt-4.1-mini"``); ``parameters`` and ``stats`` are ``None`` (the nodes apply their ``llm_kwargs``
#: to each call themselves, and token usage is in the run's trace). Kaval.AI's ``lambda *a, **k: Fake()`` fits.
ClientFactory = Callable[[str, Any, Any], "LLMClient"]


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
            self._made[chosen] = client
        return client

    async def aclose(self) -> None:
        """Close every client the factory made for the run (each once, even if the factory returned it twice)."""
        made, self._made = list({id(c): c for c in self._made.values()}.values()), {}
        for client in made:
            await client.aclose()


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
