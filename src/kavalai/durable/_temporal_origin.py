"""The origin rule on Temporal (:mod:`kavalai.durable._doubt`): Temporal retries a step's activity by itself, so the
activity checks, in an attempt after the first, that its tool's server is where the step was scheduled to go; a moved
server ends the attempt with a failure Temporal does not retry, which the run reads as the step in doubt."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from temporalio.exceptions import ActivityError, ApplicationError

from kavalai.durable._doubt import moved
from kavalai.errors import FunctionKernelException

__all__ = ["check_origin", "moved_by"]

#: The type of the failure of a step's attempt that found its tool's server moved (the origin rule).
_MOVED: Final = "kavalai.OriginMoved"


async def check_origin(kernel: Any, request: Mapping[str, Any]) -> None:
    """Refuse an attempt of a step whose earlier attempt may have sent it to another origin than its tool's server
    has here (:func:`~kavalai.durable._doubt.moved`): a failure Temporal does not retry, which the run reads as the
    step in doubt (:func:`moved_by`). The origin compared is the one the step was scheduled with."""
    try:
        definition = await kernel.resolve_tool(str(request["uri"]))
    except FunctionKernelException:  # no such tool here: its call says so, as before
        return
    move = moved(request, definition.metadata.get("origin"))
    if move is not None:
        raise ApplicationError(
            f"{request['uri']} was sent to {move[0]} and its server is now {move[1]}",
            *move,
            type=_MOVED,
            non_retryable=True,
        )


def moved_by(error: ActivityError) -> tuple[str, str] | None:
    """``(old origin, new origin)`` when a step's activity ended because its tool's server moved, else ``None``."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type == _MOVED and len(cause.details) == 2:
        return str(cause.details[0]), str(cause.details[1])
    return None
