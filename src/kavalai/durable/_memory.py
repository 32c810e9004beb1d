"""An in-memory durable engine: the journal in a dict of this process.

It keeps the seam's contract (steps by identity, replay, one outcome per run id, results over the limit by
reference) without surviving the process: a run interrupted by an exception and run again under the same id in the
same process replays its recorded steps. It is the baseline the benchmarks measure the real engines against, and a
quick way to check that a workflow or agent replays as it should before reaching for DBOS or Temporal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kavalai.durable._answers import checked_answer
from kavalai.durable._run import DurableRun, JsonValue, bind_run, replayed
from kavalai.durable._runner import (
    DurableRunner,
    DurableTarget,
    UnknownRunError,
    checked_run_id,
    existing_run_id,
    not_pending,
)
from kavalai.durable._store import ResultStore

__all__ = ["MemoryRunner"]


class _Question:
    def __init__(self, question: JsonValue, answer: asyncio.Future[JsonValue]) -> None:
        self.question = question
        self.answer = answer


class _MemoryJournal:
    def __init__(self, steps: dict[int, tuple[str, JsonValue]], questions: dict[str, _Question]) -> None:
        self.steps = steps
        self.questions = questions
        self.by_name = {name: position for position, (name, _) in steps.items()}

    async def wait_for_answer(
        self, position: int, key: str, question: JsonValue, timeout: float | None
    ) -> JsonValue | None:
        name = f"answer {key}"
        found = self.steps.get(position)
        if found is not None and found[0] == name:
            return found[1]
        waiting = self.questions.get(key)
        if waiting is None:  # a run resumed after an interruption finds the answer given meanwhile
            waiting = self.questions[key] = _Question(question, asyncio.get_running_loop().create_future())
        try:
            answer = await asyncio.wait_for(asyncio.shield(waiting.answer), timeout)
        except TimeoutError:
            answer = None
        self.steps[position] = (name, answer)
        del self.questions[key]
        return answer

    async def record(
        self, position: int, name: str, execute: Callable[[], Awaitable[JsonValue]], request: JsonValue = None
    ) -> JsonValue:
        found = self.by_name.get(name)  # by the step's identity, never by its rank
        if found is not None:
            return replayed(position, (name, self.steps[found][1]), name)
        value = await execute()
        at = position if position not in self.steps else max(self.steps) + 1
        self.steps[at] = (name, value)
        self.by_name[name] = at
        return value


class _MemoryAnswers:
    """The answer log of :class:`MemoryRunner` (see :class:`~kavalai.durable.AnswerLog`)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], tuple[JsonValue, bool, JsonValue]] = {}

    async def lookup(self, run_id: str, key: str) -> tuple[bool, JsonValue]:
        _, answered, value = self.rows.get((run_id, key), (None, False, None))
        return answered, value if answered else None

    async def keep(self, run_id: str, key: str, question: JsonValue, answer: JsonValue) -> None:
        self.rows[run_id, key] = (question, True, answer)

    async def publish(self, run_id: str, key: str, question: JsonValue) -> None:
        self.rows.setdefault((run_id, key), (question, False, None))

    async def open_questions(self, run_id: str) -> dict[str, JsonValue]:
        return {key: row[0] for (run, key), row in self.rows.items() if run == run_id and not row[1]}


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
        self._questions: dict[str, dict[str, _Question]] = {}
        self.answer_log = _MemoryAnswers()

    async def run(self, target: DurableTarget, payload: Any, *, run_id: str | None = None) -> Any:
        """Run ``payload`` on ``target`` under ``run_id``: the recorded outcome of a finished run, a run still
        going awaited, an interrupted one resumed from its journal."""
        run_id = checked_run_id(run_id)
        if run_id in self.outcomes:
            return self.outcomes[run_id]
        running = self._running.get(run_id)
        if running is not None:
            return await asyncio.shield(running)
        name = self.register(target, replace=True)
        future: asyncio.Future[JsonValue] = asyncio.get_running_loop().create_future()
        self._running[run_id] = future
        journal = _MemoryJournal(self.journals.setdefault(run_id, {}), self._questions.setdefault(run_id, {}))
        run = DurableRun(
            run_id,
            journal,
            store=self.store,
            inline_limit=self.inline_limit,
            engine=self.engine,
            answers=self.answer_log,
        )
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

    async def result(self, run_id: str) -> Any:
        """The outcome of the run ``run_id``: recorded, or awaited while it runs.

        Raises:
            UnknownRunError: no run of this runner has this id (or it was interrupted: resume it with ``run``).
        """
        run_id = existing_run_id(run_id)
        if run_id in self.outcomes:
            return self.outcomes[run_id]
        running = self._running.get(run_id)
        if running is None:
            raise UnknownRunError(run_id, "memory")
        return await asyncio.shield(running)

    async def pending(self, run_id: str) -> dict[str, Any]:
        """The questions run ``run_id`` waits to have answered, by key."""
        waiting = self._questions.get(run_id, {})
        found = {key: question.question for key, question in waiting.items() if not question.answer.done()}
        return {**found, **await self.answer_log.open_questions(run_id)}

    async def answer(self, run_id: str, key: str, value: Any) -> None:
        """Answer the question ``key`` of run ``run_id``."""
        in_step = await self.answer_log.open_questions(run_id)
        if key in in_step:
            await self.answer_log.keep(run_id, key, in_step[key], checked_answer(in_step[key], value))
            return
        waiting = self._questions.get(run_id, {}).get(key)
        if waiting is None or waiting.answer.done():
            raise not_pending(run_id, key, await self.pending(run_id))
        waiting.answer.set_result(checked_answer(waiting.question, value))

    async def aclose(self) -> None:
        """Nothing to close: the journal lives as long as the runner."""
