"""The journal of one DBOS run: each record a row of the kavalai step log, or (``step_log="dbos"``) a DBOS step; the
waits for answers DBOS events and messages; a step or wait in flight cut when the run is cancelled
(:mod:`._cancel_watch`).

With DBOS's own step log a step that may not be repeated safely (:func:`~kavalai.durable._doubt.doubt_policy`) is two
DBOS steps: ``<name> (sent)``, recorded before the effect, then ``<name>``. A resume that replays the mark and then
finds ``<name>`` without a record knows the step was sent in an earlier attempt, its outcome unknown, and applies the
tool's ``on_doubt`` policy, as the kavalai step log does: ``"fail"`` records the step in doubt, ``"replay"`` sends
it again, ``"ask"`` records that it asks, asks the operator (a DBOS message answers) and then records the operator's
result or sends it again as ``<name> (retry)``. Each branch is recorded, so a later replay takes the same one."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any, Final

from dbos import DBOS

from kavalai.durable._cancel_watch import CancelWatch
from kavalai.durable._definition import keyed_by_position
from kavalai.durable._doubt import OnDoubt, ask_about, doubt_policy, in_doubt_result, sent_mark
from kavalai.durable._run import cancelled_error
from kavalai.durable._step_log import StepLogJournal
from kavalai.errors import DefinitionChangedError, FunctionKernelException, RunCancelledError

__all__ = ["FOREVER", "PENDING", "DbosJournal", "dbos_steps_by_position", "topic"]

#: The DBOS event holding the questions a run waits to have answered.
PENDING: Final = "kavalai.pending"
#: DBOS.recv's timeout for a wait without one.
FOREVER: Final = 10 * 365 * 24 * 3600.0
#: The record of a DBOS step found in doubt whose tool says ask: the run asks (a replay asks again, from its record).
_ASKS: Final = {"asks": True}


class DbosJournal:
    """The journal of one run: each record a row of the step log, or (without one) a DBOS step at the run's next
    DBOS step position."""

    def __init__(
        self,
        steps: StepLogJournal | None,
        run_id: str = "",
        watch: CancelWatch | None = None,
        on_doubt: Mapping[str, OnDoubt] | None = None,
    ) -> None:
        self.steps = steps
        self.on_doubt: Mapping[str, OnDoubt] = on_doubt or {}
        self.run_id = run_id
        self.watch = watch  # cuts a step or wait in flight when the run is cancelled (_cancel_watch)
        self.cancelled: RunCancelledError | None = None
        self.pending: dict[str, Any] = {}

    @property
    def stopped(self) -> FunctionKernelException | None:
        """Why the run may begin no more steps (see :attr:`StepLogJournal.stopped`): a cancel that cut a step or
        wait in flight; DBOS's own step log checks for a cancel itself, when each of its steps begins."""
        return self.cancelled or (None if self.steps is None else self.steps.stopped)

    async def record(self, position: int, name: str, execute: Any, request: Any = None) -> Any:
        work = execute if self.watch is None else functools.partial(self._cut_by_cancel, execute)
        if self.steps is not None:
            return await self.steps.record(position, name, work, request)
        policy = doubt_policy(request, self.on_doubt)
        if policy is None:  # it may be sent again safely
            return await DBOS.run_step_async({"name": name}, work)
        return await self._unsafe(position, name, work, request, policy)

    async def _unsafe(self, position: int, name: str, work: Any, request: Mapping[str, Any], policy: OnDoubt) -> Any:
        """A step that may not be repeated, as DBOS steps: its sent mark, then the step (see the module's doc)."""
        fresh: list[bool] = []

        async def mark() -> dict[str, Any]:
            fresh.append(True)  # not replayed: nothing of this step was sent before
            return sent_mark(request)

        async def step() -> Any:
            if fresh or policy == "replay":
                return await work()
            return in_doubt_result(self.run_id, position, name, request) if policy == "fail" else _ASKS

        await DBOS.run_step_async({"name": f"{name} (sent)"}, mark)
        result = await DBOS.run_step_async({"name": name}, step)
        if result != _ASKS:
            return result
        again = functools.partial(DBOS.run_step_async, {"name": f"{name} (retry)"}, work)
        return await ask_about(self.run_id, position, name, request, self.wait_for_answer, again)

    async def _cut_by_cancel(self, execute: Any) -> Any:
        assert self.watch is not None
        value, cut = await self.watch.step(self.run_id, execute)
        if cut:
            self.cancelled = cancelled_error(self.run_id)
        return value

    async def wait_for_answer(self, position: int, key: str, question: Any, timeout: float | None) -> Any:
        # DBOS journals each of these calls in the run: the event's updates, and the message received (or the
        # timeout's deadline), so a resumed run replays them up to where it waits again.
        self.pending[key] = question
        await DBOS.set_event_async(PENDING, dict(self.pending))
        wait = functools.partial(DBOS.recv_async, topic(key), timeout_seconds=FOREVER if timeout is None else timeout)
        answer, cut = (await wait(), False) if self.watch is None else await self.watch.guard(self.run_id, wait)
        if cut:  # cancelled while it waited: no answer is taken any more
            self.cancelled = cancelled_error(self.run_id)
            raise self.cancelled
        del self.pending[key]
        await DBOS.set_event_async(PENDING, dict(self.pending))
        return answer


def topic(key: str) -> str:
    """The DBOS message topic of the answer to question ``key``."""
    return f"kavalai.answer.{key}"


async def dbos_steps_by_position(run_id: str) -> DefinitionChangedError | None:
    """Why run ``run_id`` (its steps in DBOS's own step log) may not be resumed when an earlier release recorded
    them by position (a DBOS step ``tool rest://shop.charge``, before steps had identities), else ``None``: refused
    naming the step, rather than by DBOS's own check of a step's name where it differs (or, where the names happen
    to agree, replayed under new keys). Read outside the run's DBOS context (a thread of the loop's executor, which
    does not copy it): inside it DBOS would record the read as a step of the run, shifting every step after it."""
    loop = asyncio.get_running_loop()
    found = await loop.run_in_executor(None, functools.partial(DBOS.list_workflow_steps, run_id, load_output=False))
    names = [step["function_name"] for step in found if not step["function_name"].startswith("DBOS.")]
    return keyed_by_position(run_id, names)
