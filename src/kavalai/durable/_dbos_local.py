"""The runs a :class:`~kavalai.durable.DbosRunner` executes or parked in this process: kept here, not by DBOS.

A run stops without an outcome when its journal went away past its patience (interrupted) or when it is refused under
a changed definition. Its DBOS status must stay ``PENDING`` (resumable), so its workflow may neither return nor raise
an error, and DBOS's own way to leave a run as it stands (raising its cancel error) hands the execution to a poller
that reads the run's status from a worker thread, retrying for ever while the database is gone: that thread would
keep the interpreter from exiting after ``aclose()``. So a parked run's execution ends at once as a cancelled task
(:meth:`LocalRuns.park`), which DBOS lets through without recording anything or polling, and which frees its place
among the queue's runs in this process; the runner keeps why it stopped, and the next submit of its id here hands it
back to the queue (:meth:`LocalRuns.release`).

For the same reason a caller waiting for a run's outcome here does not wait through DBOS's poll:
:meth:`LocalRuns.until_settled` reads the run's status with one query of the runner's own at a time, which gives up
when the database is away (and is tried again at the next look), until the run has an outcome or is parked. And
when the outcome is a cancel, :meth:`LocalRuns.ended` lets the caller wait (bounded) until the run's execution here
has ended, its step cut by the cancel recorded, so that the caller reads the run's final state. The outcome itself
is DBOS's write, after the run's execution here has left its target: when that write fails (the journal's disk full)
DBOS logs it and the run stays ``PENDING`` for ever in this process, so a caller waits for it after the execution
left only for as long as the run may wait for its journal, then is told the run is interrupted (resumable: all its
steps are recorded, and a resume writes the outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Final, NoReturn

import sqlalchemy as sa
from dbos import error as dbos_errors  # DBOS's public alias of its exception module

from kavalai.durable._journal_io import interrupted_error
from kavalai.errors import DurableRunError, RunInterruptedError

__all__ = ["UNSETTLED", "LocalRuns", "QuietCancels", "QuietParking"]

#: DBOS's warning when a workflow's task ends cancelled: expected for a parked run, so not shown for one.
_DBOS_CANCELLED: Final = "Asyncio task cancelled for workflow"
#: DBOS's statuses of a run without its outcome yet.
UNSETTLED: Final = frozenset({"PENDING", "ENQUEUED", "DELAYED"})
_CUT_WAIT: Final = 30.0  # at most this long for a cancelled run's cut step to be recorded before result() says so
_LEFT_KEPT: Final = 1024  # the latest runs whose execution here has left its target, kept with when it left

_parking: contextvars.ContextVar[bool] = contextvars.ContextVar("kavalai_parking", default=False)


class LocalRuns:
    """The runs of one runner in this process: those executing, those parked (why each stopped), and who waits for
    them."""

    def __init__(self) -> None:
        self.errors: dict[str, DurableRunError] = {}  # why each parked run stopped, by id
        self.unmarked: dict[str, str] = {}  # interrupted runs whose mark the heartbeat writes once it can
        self.waiting: dict[str, asyncio.Future[None]] = {}  # result() calls waiting here, by run id
        self._executing: dict[str, asyncio.Event] = {}  # set when the run's execution here has left its target
        self._left: OrderedDict[str, float] = OrderedDict()  # when (loop time) the latest executions here left

    def park(self, error: DurableRunError) -> NoReturn:
        """End the execution of the run (its workflow, which calls this) without an outcome, resumable: record why it
        stopped, tell those waiting for it in this process, and raise :class:`asyncio.CancelledError`."""
        self.errors[error.run_id] = error
        if isinstance(error, RunInterruptedError):  # shown as `interrupted` once the journal is back
            self.unmarked[error.run_id] = str(error)
        waiter = self.waiting.get(error.run_id)
        if waiter is not None:
            waiter.get_loop().call_soon_threadsafe(_settle, waiter)
        _parking.set(True)  # in this task's context: DBOS's warning as the task ends is not shown
        raise asyncio.CancelledError(str(error))

    def release(self, run_id: str) -> bool:
        """Forget the parked run ``run_id`` (it is handed back to the queue); whether it was parked here."""
        self.unmarked.pop(run_id, None)
        return self.errors.pop(run_id, None) is not None

    @contextlib.contextmanager
    def executing(self, run_id: str) -> Iterator[None]:
        """The block where the run's target runs in this process (its steps recorded by the time it is left)."""
        left = self._executing[run_id] = asyncio.Event()
        self._left.pop(run_id, None)
        try:
            yield
        finally:
            left.set()
            if self._executing.get(run_id) is left:
                del self._executing[run_id]
            self._left[run_id] = asyncio.get_running_loop().time()
            if len(self._left) > _LEFT_KEPT:
                self._left.popitem(last=False)

    async def ended(self, run_id: str, within: float = _CUT_WAIT) -> bool:
        """Wait, at most ``within`` seconds, until the run's execution in this process (if any) has left its target:
        a cancelled run's step in flight is cut and recorded by then. Whether it executed here."""
        left = self._executing.get(run_id)
        if left is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(left.wait(), within)
        return left is not None

    @staticmethod
    async def ended_elsewhere(ended: Callable[[], bool], alive: Callable[[], bool], every: float) -> None:
        """Wait, at most :data:`_CUT_WAIT` seconds, until a cancelled run executing in another process has ended
        there (``ended()``: its journal says so), looking every ``every`` seconds while its executor is
        ``alive()``; a look that fails (the database away) is a look that found nothing."""
        loop = asyncio.get_running_loop()
        until = loop.time() + _CUT_WAIT
        while loop.time() < until:
            try:
                if await asyncio.to_thread(ended) or not await asyncio.to_thread(alive):
                    return
            except sa.exc.SQLAlchemyError:
                pass
            await asyncio.sleep(every)

    async def until_settled(
        self, run_id: str, engine: sa.Engine, status: sa.Table, every: float, *, outage: float, floor: float = _CUT_WAIT
    ) -> None:
        """Wait until the run ``run_id`` has its outcome in ``status`` (DBOS's table of runs) or is parked here,
        looking every ``every`` seconds; a look that fails (the database away) is a look that found nothing.

        Raises:
            RunInterruptedError: the run's execution here left its target more than ``outage`` seconds ago (``floor``
                at least) and its outcome is still not written (DBOS's write of it failed); the run stays resumable.
        """
        loop = asyncio.get_running_loop()
        patience = max(outage, floor)  # DBOS's write, slow under load, is not hurried below ``floor`` seconds
        waiter = self.waiting.setdefault(run_id, loop.create_future())
        try:
            while run_id not in self.errors:
                if await asyncio.to_thread(_settled, engine, status, run_id):
                    return
                left = self._left.get(run_id)
                if left is not None and run_id not in self._executing and loop.time() - left > patience:
                    raise interrupted_error(run_id, "record its outcome", f"within {patience:g} s of its last step")
                await asyncio.wait([waiter], timeout=every)
        finally:
            if self.waiting.get(run_id) is waiter:
                del self.waiting[run_id]

    @staticmethod
    async def settled(run_id: str, engine: sa.Engine, status: sa.Table) -> bool:
        """Whether the run ``run_id`` has its outcome in ``status`` now (one look; a look that fails found none)."""
        return await asyncio.to_thread(_settled, engine, status, run_id)


class QuietParking(logging.Filter):
    """Drops DBOS's warning that a parked run's task ended cancelled (on the ``dbos`` logger, while a runner runs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_parking.get() and record.getMessage().startswith(_DBOS_CANCELLED))


class QuietCancels(logging.Filter):
    """Drops DBOS's ERROR "Exception encountered in asynchronous workflow" (with a traceback) when the exception is
    DBOS's own cancel of the run: a cancelled run is an expected outcome, which ``result()`` reports as
    :class:`~kavalai.errors.RunCancelledError`, never an error to log. Any other exception of a workflow is still
    logged (on the ``dbos`` logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        cancelled = (dbos_errors.DBOSAwaitedWorkflowCancelledError, dbos_errors.DBOSWorkflowCancelledError)
        return not isinstance(raised, cancelled)


def _settled(engine: sa.Engine, status: sa.Table, run_id: str) -> bool:
    try:
        with engine.connect() as connection:
            found = connection.execute(sa.select(status.c.status).where(status.c.workflow_uuid == run_id)).scalar()
    except sa.exc.SQLAlchemyError:
        return False
    return found is not None and found not in UNSETTLED


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
