"""Steps whose outcome nobody knows: sent, and the worker (or the journal) gone before the result was recorded.

A step of the kavalai step log goes ``intended`` (its key is minted from the run, its identity and its arguments:
the same in every attempt) → ``sent`` → ``done`` | ``failed``. For a tool step that may be repeated safely (read-only,
idempotent, or carrying its key to a server that honours it: :func:`~kavalai.durable.retry_allowed`) nothing is
written before the effect: a resume replays it, with its key. For any other tool step a *sent mark* is written (and
committed) before the effect is sent; a resume that finds the mark without a result does not know whether the effect
happened, and applies the tool's ``on_doubt`` policy:

- ``"fail"`` (the default): the step is recorded **in doubt**, and the workflow or agent receives
  :class:`~kavalai.errors.OutcomeUnknownError` (an agent's model reads "outcome unknown: check before retrying");
- ``"replay"``: the step is sent again (the user accepts a possible repeat).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from kavalai.errors import OutcomeUnknownError

__all__ = ["ON_DOUBT", "OnDoubt", "doubt_policy", "in_doubt_result", "is_in_doubt", "sent_mark"]

OnDoubt = Literal["fail", "replay"]

#: The policies a tool may have for a step found sent without a result.
ON_DOUBT: Final = ("fail", "replay")


def doubt_policy(request: Any, on_doubt: Mapping[str, OnDoubt]) -> OnDoubt | None:
    """The ``on_doubt`` policy of a step (by its tool's URI, ``"fail"`` by default), or ``None`` when the step needs
    none: not a tool call, or one that may be repeated safely."""
    if not isinstance(request, Mapping) or request.get("kind") != "tool" or request.get("retry", True):
        return None
    return on_doubt.get(str(request.get("uri")), "fail")


def sent_mark(request: Mapping[str, Any]) -> dict[str, Any]:
    """What the journal keeps of a step about to be sent: its state, tool and idempotency key."""
    return {"state": "sent", "uri": request.get("uri"), "key": request.get("key")}


def in_doubt_result(run_id: str, position: int, name: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a step found sent without a result: an :class:`OutcomeUnknownError`, marked in doubt."""
    from kavalai.durable._steps import error_envelope

    uri = str(request.get("uri"))
    error = OutcomeUnknownError(
        f"Outcome unknown: check before retrying. Step {position} of run {run_id} ({name}, idempotency key "
        f"{request.get('key')}) was sent, and its worker stopped before the result was recorded; the tool is neither "
        "read-only nor idempotent nor keyed, so it is not sent again.",
        run_id=run_id,
        step=f"{position}",
        uri=uri,
    )
    return {"error": error_envelope(error), "in_doubt": True}


def is_in_doubt(result: Any) -> bool:
    """Whether a recorded step result is one of a step found in doubt."""
    return isinstance(result, Mapping) and result.get("in_doubt") is True
