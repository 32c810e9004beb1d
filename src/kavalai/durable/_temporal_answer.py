"""Asking a Temporal run which questions it waits on, and delivering an answer to one, through a worker that dies
meanwhile.

Both are calls a worker of the run must answer: the query ``kavalai.pending`` (read-only) and the update
``kavalai.answer_first`` (kept in the run's history, taken once by its id). When no worker answers -- the one the
call was handed to was killed (``context canceled``), none polls the task queue for now (``no poller seen``), the
server is away, the update's poll ended without an outcome -- the call is made again, with the same update id, for
as long as the run's patience (``journal_outage``) allows: a worker started meanwhile answers it. Past that, the
caller is told, as a :class:`~kavalai.errors.DurableRunError`, that no worker answered and that the answer was not
applied (the run's history is read first: an update it took is the answer's outcome). A foreign error never leaves
here for these faults."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from kavalai.durable._temporal_connect import NO_WORKER, patiently
from kavalai.durable._temporal_history import update_outcome
from kavalai.errors import DurableRunError

__all__ = ["deliver", "questions"]

#: The update call's end when its poll timed out or was cancelled before any worker took the update.
_NO_OUTCOME: Final = (WorkflowUpdateRPCTimeoutOrCancelledError,)


def no_worker(run_id: str, queue: str, what: str, outage: float) -> Callable[[int, str], DurableRunError]:
    """The error of a call to run ``run_id`` that no worker of task queue ``queue`` answered within ``outage``
    seconds."""

    def made(attempts: int, failure: str) -> DurableRunError:
        return DurableRunError(
            f"Run {run_id}: no worker of task queue {queue!r} answered within {outage:g} s ({attempts} attempts, "
            f"{failure}): could not {what}; nothing was applied. Start a worker and try again.",
            run_id=run_id,
        )

    return made


async def questions(
    handle: WorkflowHandle[Any, Any],
    query: str,
    running: Callable[[], Awaitable[bool]],
    *,
    queue: str,
    address: str,
    outage: float,
    what: str,
) -> Any:
    """The answer of the run's query ``query`` (``{}`` once the run is found ended, not ``running()``)."""
    run_id = handle.id

    async def ask() -> Any:
        try:
            return await handle.query(query)
        except RPCError:
            if not await running():  # ended meanwhile: it waits for nothing
                return {}
            raise

    gone = no_worker(run_id, queue, what, outage)
    return await patiently(run_id, what, address, outage, ask, statuses=NO_WORKER, gone=gone)


async def deliver(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    update: str,
    args: list[Any],
    running: Callable[[], Awaitable[bool]],
    *,
    queue: str,
    address: str,
    outage: float,
    what: str,
) -> Any | None:
    """What the run's update ``update`` with ``args`` returned, or ``None`` when the run ended before it took it
    (then its history may say which answer won instead). Sent again under one update id while no worker answers.

    Raises:
        DurableRunError: no worker answered within ``outage`` seconds, and the update was not taken.
    """
    run_id, update_id = handle.id, f"{update}-{uuid.uuid4().hex}"
    ended = object()

    async def send() -> Any:
        try:
            return await handle.execute_update(update, args=args, id=update_id)
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError):
            if not await running():
                return ended
            raise

    gone = no_worker(run_id, queue, what, outage)
    try:  # the update's long poll ends without an outcome when no worker takes it: sent again
        told = await patiently(run_id, what, address, outage, send, statuses=NO_WORKER, also=_NO_OUTCOME, gone=gone)
    except DurableRunError:
        told = await update_outcome(client, handle, update_id)
        if told is None:
            raise
        return told
    if told is ended:  # the run ended: had it taken this update first?
        return await update_outcome(client, handle, update_id)
    return told
