"""An in-memory durable engine: the journal in a dict of this process.

It keeps the seam's contract (steps by position, replay, one outcome per run id, results over the limit by
reference) without surviving the process: a run interrupted by an exception and run again under the same id in the
same process replays its recorded steps. It is the baseline the benchmarks measure the real engines against, and a
quick way to check that a workflow or agent replays as it should before reaching for DBOS or Temporal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kavalai.durable._run import DurableRun, JsonValue, bind_run
from kavalai.durable._runner import DurableRunner, DurableTarget, new_run_id
from kavalai.durable._store import ResultStore

__all__ = ["MemoryRunner"]


class _MemoryJournal:
    def __init__(self, steps: dict[int, tuple[str, JsonValue]]) -> None:
        self.steps = steps

    async def record(
        self, position: int, name: str, execute: Callable[[], Awaitable[JsonValue]], request: JsonValue = None
    ) -> JsonValue:
        found = self.steps.get(position)
        if found is not None:
            recorded_name, value = found
            if recorded_name != name:
                raise RuntimeError(
                    f"Step {position} of the run was {recorded_name!r} and is {name!r} on replay: the run does not "
                    "take the same path again (is it deterministic outside its steps?)."
                )
            return value
        value = await execute()
        self.steps[position] = (name, value)
        return value


class MemoryRunner(DurableRunner):
    """Runs targets with a journal kept in this process's memory (see the module docstring).

    Args:
        store: where results over ``inline_limit`` bytes go (none: every result is kept inline).
        inline_limit: the largest result, in bytes of JSON, kept inline when a store is given.
    """

    engine = "memory"

    def __init__(self, *, store: ResultStore | None = None, inline_limit: int = 64 * 1024) -> None:
        super().__init__()
        self.store = store
        self.inline_limit = inline_limit
        self.journals: dict[str, dict[int, tuple[str, JsonValue]]] = {}
        self.outcomes: dict[str, JsonValue] = {}
        self._running: dict[str, asyncio.Future[JsonValue]] = {}

    async def run(self, target: DurableTarget, payload: Any, *, run_id: str | None = None) -> Any:
        """Run ``payload`` on ``target`` under ``run_id``: the recorded outcome of a finished run, a run still
        going awaited, an interrupted one resumed from its journal."""
        run_id = run_id or new_run_id()
        if run_id in self.outcomes:
            return self.outcomes[run_id]
        running = self._running.get(run_id)
        if running is not None:
            return await asyncio.shield(running)
        name = self.register(target, replace=True)
        future: asyncio.Future[JsonValue] = asyncio.get_running_loop().create_future()
        self._running[run_id] = future
        journal = _MemoryJournal(self.journals.setdefault(run_id, {}))
        run = DurableRun(run_id, journal, store=self.store, inline_limit=self.inline_limit, engine=self.engine)
        try:
            with bind_run(run):
                found = self.target(name)
                assert found is not None
                outcome = await found.run_journaled(payload)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: raised to this caller below
            raise
        else:
            self.outcomes[run_id] = outcome
            future.set_result(outcome)
            return outcome
        finally:
            del self._running[run_id]

    async def aclose(self) -> None:
        """Nothing to close: the journal lives as long as the runner."""
