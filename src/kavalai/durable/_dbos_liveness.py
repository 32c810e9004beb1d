"""A DBOS runner's liveness: its heartbeat row in ``kavalai_executors``, and the take-over of the runs left pending by
executors that are gone (a process of this host that no longer exists, or a heartbeat older than ``stale_after``
seconds): a claim row per run and gone executor (``kavalai_takeovers``) admits one taker per run, which hands the run
back to its queue with DBOS's public ``resume_workflows``."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from dbos import DBOS

from kavalai.durable._journal_io import first_line, passing_failure
from kavalai.durable._schema import EXECUTORS, TAKEOVERS, ensure_schema
from kavalai.secrets import get_logger

if TYPE_CHECKING:
    from kavalai.durable.dbos import DbosRunner

__all__ = ["HOST", "Liveness"]

logger = get_logger("kavalai.durable")

HOST: Final = socket.gethostname()


class Liveness:
    """This process's heartbeat row, and the take-over of runs whose process is gone."""

    def __init__(self, runner: DbosRunner, engine: sa.Engine) -> None:
        self.runner = runner
        self.engine = engine
        self.table = EXECUTORS
        self.claims = TAKEOVERS
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self) -> None:
        ensure_schema(self.engine)
        with self.engine.begin() as connection:
            connection.execute(self.table.delete().where(self.table.c.executor_id == self.runner.executor_id))
            connection.execute(
                self.table.insert().values(
                    executor_id=self.runner.executor_id, host=HOST, pid=os.getpid(), beat=time.time()
                )
            )

    def unregister(self) -> None:
        try:
            with self.engine.begin() as connection:
                connection.execute(self.table.delete().where(self.table.c.executor_id == self.runner.executor_id))
        except sa.exc.SQLAlchemyError as exc:  # the database went away first: the heartbeat goes stale instead
            _logged(exc, "could not remove the heartbeat of %s", self.runner.executor_id)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="kavalai-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.runner.heartbeat):
            try:
                with self.engine.begin() as connection:
                    connection.execute(
                        self.table.update()
                        .where(self.table.c.executor_id == self.runner.executor_id)
                        .values(beat=time.time())
                    )
                self.sweep()
                self.mark_interrupted()
            except Exception as exc:  # a database hiccup: the next beat tries again
                _logged(exc, "kavalai heartbeat of %s failed", self.runner.executor_id)

    def mark_interrupted(self) -> None:
        """Write the marks of the runs interrupted here (their journal was away: written now it is back)."""
        steps = self.runner._steps
        unmarked = self.runner._parked.unmarked
        for run_id, why in list(unmarked.items()):
            if steps is not None and unmarked.pop(run_id, None) is not None:
                steps.mark_interrupted(run_id, why)

    def sweep(self) -> None:
        """Put the pending runs of executors that are gone back on their queue."""
        pending = DBOS.list_workflows(
            status="PENDING", queue_name=self.runner.queue_name, load_input=False, load_output=False
        )
        others = {w.executor_id for w in pending if w.executor_id and w.executor_id != self.runner.executor_id}
        if not others:
            return
        with self.engine.connect() as connection:
            rows = {row.executor_id: row for row in connection.execute(sa.select(self.table))}
        now = time.time()
        gone = {executor for executor in others if self._gone(rows.get(executor), now)}
        if not gone:
            return
        logger.info("Taking over the pending runs of %s", ", ".join(sorted(gone)))
        mine = [w.workflow_id for w in pending if w.executor_id in gone and self.claim(w.workflow_id, w.executor_id)]
        if mine:
            DBOS.resume_workflows(mine, queue_name=self.runner.queue_name)

    def claim(self, run_id: str, executor_id: str) -> bool:
        """Whether this process is the one to hand ``run_id``, left by ``executor_id``, back to the queue: the
        first to insert the claim row is. Two live workers that both see the executor gone would otherwise both
        re-enqueue the run, and the second could do it while the first's worker already runs it."""
        try:
            with self.engine.begin() as connection:
                connection.execute(
                    self.claims.insert().values(
                        run_id=run_id, from_executor=executor_id, taken_by=self.runner.executor_id, at=time.time()
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def _gone(self, row: Any, now: float) -> bool:
        return _stale(row, now, self.runner.stale_after)

    def alive(self, executor_id: str | None) -> bool:
        """Whether the executor ``executor_id`` still beats (blocking): a run it executes may still record steps."""
        if not executor_id:
            return False
        query = sa.select(self.table).where(self.table.c.executor_id == executor_id)
        with self.engine.connect() as connection:
            row = connection.execute(query).first()
        return not _stale(row, time.time(), self.runner.stale_after)


def _logged(exc: Exception, what: str, executor_id: str) -> None:
    """Log a failed heartbeat write: a database away for now (read-only after a failover, locked, stopped, its disk
    full) in one line, beat after beat while it lasts; anything else with its traceback (a bug)."""
    if passing_failure(exc):
        logger.warning(
            what + " (the journal is away for now: %s: %s)", executor_id, type(exc).__name__, first_line(exc)
        )
    else:
        logger.warning(what, executor_id, exc_info=True)


def _stale(row: Any, now: float, stale_after: float) -> bool:
    """Whether the executor of heartbeat ``row`` (``None``: it has none) is gone."""
    if row is None:
        return True  # every runner writes its row before it starts runs, and removes it when it stops
    if row.host == HOST and not _pid_alive(int(row.pid)):
        return True
    return bool(now - float(row.beat) > stale_after)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
