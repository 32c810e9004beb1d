"""A cancel reaching the step in flight and the wait for an answer, on DBOS.

DBOS looks for a cancel only when one of its own step, send, receive or event calls begins, and the kavalai step log
looks for it when each step is recorded: a step in flight, or a run waiting for an answer, would go on until it ends.
A :class:`CancelWatch` (one per runner, its own thread) knows the runs of this process that have a step or a wait in
flight, each inside a :class:`~kavalai.kernel.Deadline` block; every ``every`` seconds, while there are any, it reads
their DBOS statuses in one query and cuts the block of each run found cancelled, on the block's own event loop: the
tool call inside ends as cut at its deadline, and :meth:`CancelWatch.guard` turns the step into a record in state
``cancelled`` (the effect may or may not have happened: the step was cut in flight), or the wait into
:class:`~kavalai.errors.RunCancelledError`. Nothing is read while no step is in flight for longer than ``every``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import sqlalchemy as sa

from kavalai.durable._run import JsonValue, cancelled_error
from kavalai.errors import DeadlineExceededError
from kavalai.kernel import Deadline
from kavalai.secrets import get_logger

__all__ = ["CUT", "CancelWatch", "Cuttable", "cancelled_result", "is_cancelled"]

T = TypeVar("T")

logger = get_logger("kavalai.durable")

#: The reason given to a block cut because its run was cancelled.
CUT: Final = "run cancelled"


class Cuttable:
    """One step or wait in flight: its run, its block, its event loop, and whether the watch cut it."""

    __slots__ = ("cut", "loop", "run_id", "scope")

    def __init__(self, run_id: str, scope: Deadline) -> None:
        self.run_id = run_id
        self.scope = scope
        self.loop = asyncio.get_running_loop()
        self.cut = False

    def cut_now(self) -> None:
        """Cut the block (on its event loop); a block whose work has ended is not cut."""
        self.cut = self.scope.cut(CUT) or self.cut


class CancelWatch:
    """The runs of this process with a step or wait in flight, and the thread that cuts those found cancelled.

    Args:
        engine: the journal database's engine.
        status: DBOS's table of runs (``workflow_status``).
        every: seconds between looks while something is in flight.
    """

    def __init__(self, engine: sa.Engine, status: sa.Table, *, every: float = 0.25) -> None:
        self.engine = engine
        self.every = every
        self._query = sa.select(status.c.workflow_uuid).where(
            status.c.workflow_uuid.in_(sa.bindparam("ids", expanding=True)), status.c.status == "CANCELLED"
        )
        self._flight: dict[Cuttable, None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (the runner's start)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="kavalai-cancel-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (the runner's close)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    async def guard(self, run_id: str, work: Callable[[], Awaitable[T]]) -> tuple[T | None, bool]:
        """``await work()`` inside a block the watch cuts when the run is cancelled: its value (``None`` when the cut
        ended it) and whether it was cut."""
        held: Cuttable | None = None
        try:
            with Deadline(None, what="cancelled run") as scope:
                held = Cuttable(run_id, scope)
                with self._lock:
                    self._flight[held] = None
                try:
                    return await work(), held.cut
                finally:
                    with self._lock:
                        self._flight.pop(held, None)
        except DeadlineExceededError:  # the block's cut, as it leaves the block
            if held is None or not held.cut:
                raise
            return None, True

    async def step(self, run_id: str, work: Callable[[], Awaitable[JsonValue]]) -> tuple[JsonValue, bool]:
        """A step's result, or the record of a step cut in flight by a cancel (state ``cancelled``); and whether
        the run was found cancelled while it ran."""
        value, cut = await self.guard(run_id, work)
        if cut and value is None:
            return cancelled_result(run_id), True
        return value, cut

    def cancelled(self, run_ids: list[str]) -> set[str]:
        """Which of ``run_ids`` are cancelled (blocking)."""
        with self.engine.connect() as connection:
            return {row[0] for row in connection.execute(self._query, {"ids": run_ids})}

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                flight = list(self._flight)
            if not flight:
                continue
            try:
                gone = self.cancelled(sorted({held.run_id for held in flight}))
            except sa.exc.SQLAlchemyError:  # the database away: the journal's gate deals with it; look again later
                logger.debug("kavalai cancel watch could not read the runs' statuses", exc_info=True)
                continue
            for held in flight:
                if held.run_id in gone:
                    held.loop.call_soon_threadsafe(held.cut_now)


def cancelled_result(run_id: str) -> dict[str, Any]:
    """The record of a step cut in flight because its run was cancelled (its outcome unknown)."""
    from kavalai.durable._steps import error_envelope

    return {"error": error_envelope(cancelled_error(run_id)), "cancelled": True}


def is_cancelled(result: Any) -> bool:
    """Whether a recorded step result is one of a step cut by a cancel."""
    return isinstance(result, dict) and result.get("cancelled") is True
