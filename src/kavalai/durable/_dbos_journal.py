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
from collections.abc import Callable, Mapping
from typing import Any, Final

from dbos import DBOS

from kavalai.durable._cancel_watch import CancelWatch, is_cancelled
from kavalai.durable._definition import keyed_by_position
from kavalai.durable._doubt import OnDoubt, ask_about, in_doubt_result, is_in_doubt, marked, on_finding, sent_mark
from kavalai.durable._run import cancelled_error
from kavalai.durable._step_log import StepLogJournal
from kavalai.errors import DefinitionChangedError, FunctionKernelException, RunCancelledError

__all__ = ["FOREVER", "PENDING", "DbosJournal", "dbos_steps_by_position", "dbos_steps_in_doubt", "topic"]

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
        work = execute if self.watch is None else functools.partial(self._cut_by_cancel, execute, position)
        if self.steps is not None:
            return await self.steps.record(position, name, work, request)
        if not marked(request, self.on_doubt):  # it may be sent again safely, wherever its tool is
            return await DBOS.run_step_async({"name": name}, work)
        return await self._marked(position, name, work, request)

    async def _marked(self, position: int, name: str, work: Any, request: Mapping[str, Any]) -> Any:
        """A step marked sent before its effect, as DBOS steps: its sent mark, then the step (see the module's doc);
        one found marked follows its policy, or its move (:func:`~kavalai.durable._doubt.on_finding`)."""
        fresh: list[bool] = []

        async def mark() -> dict[str, Any]:
            fresh.append(True)  # not replayed: nothing of this step was sent before
            return {**sent_mark(request), "step": position}  # the position: what kavalai runs show/resolve name

        found = await DBOS.run_step_async({"name": f"{name} (sent)"}, mark)
        policy, move = on_finding(request, self.on_doubt, found)

        async def step() -> Any:
            if fresh or policy in (None, "replay"):
                return await work()
            if policy == "fail":
                return in_doubt_result(self.run_id, position, name, request, move)
            return {**_ASKS, "step": position}

        result = await DBOS.run_step_async({"name": name}, step)
        if not _asks(result):
            return result
        again = functools.partial(DBOS.run_step_async, {"name": f"{name} (retry)"}, work)
        return await ask_about(self.run_id, position, name, request, self.wait_for_answer, again, move)

    async def _cut_by_cancel(self, execute: Any, position: int) -> Any:
        assert self.watch is not None
        value, cut = await self.watch.step(self.run_id, execute)
        if cut:
            self.cancelled = cancelled_error(self.run_id)
            if is_cancelled(value):
                value = {**value, "step": position}
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


def _asks(result: Any) -> bool:
    """Whether a DBOS step's record is the one of a step found in doubt whose tool says ask."""
    return isinstance(result, Mapping) and result.get("asks") is True


def dbos_steps_in_doubt(steps: list[tuple[str, Any]], answered: Callable[[int], Any]) -> list[tuple[int, str, str]]:
    """The steps of a run on DBOS's own step log whose outcome is unknown, as ``(position, name, state)``: its DBOS
    steps given as ``(name, output)`` in order, ``answered(position)`` the operator's answer about step ``position``
    (``None`` when there is none). States as :meth:`SqlStepLog.in_doubt`'s: ``sent`` (the mark without the step's
    record: in flight, its worker gone; or the run asks, unanswered or being sent again), ``in_doubt``,
    ``cancelled``. A position is the one the run recorded (``"step"`` in the mark, the record or its error); runs
    recorded before it was, by the step's rank."""
    outputs = dict(steps)
    found: list[tuple[int, str, str]] = []
    rank = 0
    for name, output in steps:
        if name.startswith("DBOS.") or name.endswith(" (retry)"):
            continue
        if name.endswith(" (sent)"):
            own = name.removesuffix(" (sent)")
            if own not in outputs:
                found.append((_position(output, rank + 1), own, "sent"))
            continue
        rank += 1
        position = _position(outputs.get(f"{name} (sent)"), _position(output, rank))
        retry = outputs.get(f"{name} (retry)")
        if is_in_doubt(output):
            found.append((position, name, "in_doubt"))
        elif is_cancelled(output) or is_cancelled(retry):
            found.append((position, name, "cancelled"))
        elif _asks(output) and retry is None:
            answer = answered(position)
            if not (isinstance(answer, Mapping) and answer.get("action") == "done"):
                found.append((position, name, "sent"))
    return found


def _position(record: Any, otherwise: int) -> int:
    """The step position a DBOS step's record names (its own ``step``, or its error's), else ``otherwise``."""
    if not isinstance(record, Mapping):
        return otherwise
    error = record.get("error")
    step = record.get("step", error.get("fields", {}).get("step") if isinstance(error, Mapping) else None)
    try:
        return int(step) if step is not None else otherwise
    except (TypeError, ValueError):
        return otherwise


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
