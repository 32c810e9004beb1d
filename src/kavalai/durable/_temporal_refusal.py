"""Runs a Temporal worker cannot take up, ended with the reason recorded (never a workflow task failing for ever).

A worker replays a run from its history with its own definition. Two kinds of run cannot be replayed by it: a run
begun under another definition (the fingerprint it recorded differs: :func:`~kavalai.durable._definition.changed`)
and a run begun by an earlier kavalai, whose steps' activities were keyed by position (Temporal finds the activity
ids differ: a non-determinism error). Failing the run from the workflow's own code is not possible there: during a
replay every command the code makes is matched against the history, and a "fail the run" where the history holds a
scheduled step is itself a non-determinism error, so the workflow task would fail, be retried, and fail again, for
ever, with the run shown running.

So the worker ends such a run from outside, as an operator would: the workflow's code hands the refusal to
:class:`Refusals` (from its activation thread) and fails its task meanwhile; the runner's loop terminates that
execution of the run with the :class:`~kavalai.errors.DefinitionChangedError` as the reason (naming the step) and its
fields as the details. The run's state is then ``failed`` (Temporal ``TERMINATED``), ``kavalai runs show`` prints the
reason as its ``error``, and :func:`refused_error` turns the recorded end back into the error for ``result()``.
Workers of two definitions on one task queue take each other's runs: run them ``versioned=True`` (each run pinned to
the workers of its definition) or on task queues of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from temporalio.client import Client
from temporalio.exceptions import TerminatedError

from kavalai.durable._temporal_history import keyed_by_position_of
from kavalai.errors import DefinitionChangedError
from kavalai.secrets import get_logger

__all__ = ["Refusals", "ended_error", "refused_error"]

#: The kind of end a refused run's termination details name.
_KIND: Final = "DefinitionChangedError"

logger = get_logger("kavalai.durable")


def refused_error(cause: BaseException | None) -> DefinitionChangedError | None:
    """The refusal a run's recorded end holds (the cause of its ``WorkflowFailureError``), else ``None``."""
    if not isinstance(cause, TerminatedError) or not cause.details:
        return None
    details = cause.details[0]
    if not isinstance(details, dict) or details.get("error") != _KIND:
        return None
    return DefinitionChangedError(
        str(details.get("message")), run_id=str(details.get("run_id")), step=str(details.get("step"))
    )


def ended_error(events: Iterable[Any]) -> str | None:
    """Why a run ended without an outcome, from its history ``events``: a termination's reason (a refusal's
    ``DefinitionChangedError: ...``) or the failure's message; ``None`` for a run that did not."""
    for event in events:
        if event.HasField("workflow_execution_terminated_event_attributes"):
            return event.workflow_execution_terminated_event_attributes.reason or "terminated"
        if event.HasField("workflow_execution_failed_event_attributes"):
            return str(event.workflow_execution_failed_event_attributes.failure.message)
    return None


class Refusals:
    """The runs a worker refused, being ended on the runner's loop (one attempt at a time per execution; a failed
    attempt is made again when the run's workflow task comes back)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connect: Callable[[], Awaitable[Client]]) -> None:
        self._loop, self._connect = loop, connect
        self._ending: dict[str, asyncio.Task[None]] = {}

    def refuse(self, workflow_id: str, run_id: str, error: DefinitionChangedError | None) -> None:
        """End execution ``run_id`` of run ``workflow_id`` with ``error``; ``None``: with the step its history
        recorded by position, when it did (else it is left alone). Safe from any thread."""
        self._loop.call_soon_threadsafe(self._begin, workflow_id, run_id, error)

    def _begin(self, workflow_id: str, run_id: str, error: DefinitionChangedError | None) -> None:
        if run_id not in self._ending:
            task = self._loop.create_task(self._end(workflow_id, run_id, error))
            self._ending[run_id] = task
            task.add_done_callback(lambda _: self._ending.pop(run_id, None))

    async def _end(self, workflow_id: str, run_id: str, error: DefinitionChangedError | None) -> None:
        try:
            client = await self._connect()
            handle = client.get_workflow_handle(workflow_id, run_id=run_id)
            if error is None:
                error = await keyed_by_position_of(client, handle)
                if error is None:
                    return
            details = {"error": _KIND, "run_id": workflow_id, "step": error.step, "message": str(error)}
            await handle.terminate(details, reason=f"{_KIND}: {error}")
            logger.warning("Run %s ended: %s", workflow_id, error)
        except Exception as exc:  # the server away, the run ended meanwhile: the next workflow task tries again
            logger.warning(
                "Run %s could not be ended as refused (%s); its next workflow task tries again", workflow_id, exc
            )

    async def aclose(self) -> None:
        """Wait for the ends under way (each bounded by its RPCs)."""
        if self._ending:
            await asyncio.gather(*self._ending.values(), return_exceptions=True)
