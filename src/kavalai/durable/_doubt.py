"""Steps whose outcome nobody knows: sent, and the worker (or the journal) gone before the result was recorded.

A step of the kavalai step log goes ``intended`` (its key is minted from the run, its identity and its arguments:
the same in every attempt) → ``sent`` → ``done`` | ``failed``. For a tool step that may be repeated safely (read-only,
idempotent, or carrying its key to a server that honours it: :func:`~kavalai.durable.retry_allowed`) nothing is
written before the effect: a resume replays it, with its key. For any other tool step a *sent mark* is written (and
committed) before the effect is sent; a resume that finds the mark without a result does not know whether the effect
happened, and applies the tool's ``on_doubt`` policy:

- ``"fail"`` (the default): the step is recorded **in doubt**, and the workflow or agent receives
  :class:`~kavalai.errors.OutcomeUnknownError` (an agent's model reads "outcome unknown: check before retrying");
- ``"replay"``: the step is sent again (the user accepts a possible repeat);
- ``"ask"``: the run asks the operator, durably, whether the effect happened (a question ``doubt-<position>`` of
  kind ``doubt`` in the answer log) and waits, the tool call's own timeout paused meanwhile (it bounds the effect,
  not the operator): ``kavalai runs resolve RUN STEP --done`` records the step done (with
  ``--result JSON`` as its result), ``--retry`` sends it again.

The policy is the runner's for the tool's URI (``DbosRunner(on_doubt={uri: ...})``), else the tool's own
(``@pythontool(on_doubt=...)``, a definition's ``metadata["on_doubt"]``), else ``"fail"``.

**The origin rule.** An idempotency key protects a repeat only at the server that saw it. A step of a tool with an
origin (its server's ``scheme://host:port``, or a stdio server's command line: :mod:`kavalai.adapters._origin`) is
marked sent before its effect, keyed or not, and the mark records that origin. A resume that finds the mark without
a result while the tool's server now has another origin (its URL or command changed in the configuration) does not
send the step there: the step is in doubt, whatever the tool says (read-only, idempotent, keyed, ``"replay"``), and
the error names the old origin and the new one; a tool whose policy is ``"ask"`` asks (``--retry`` sends it to the
new origin). On Temporal, whose engine retries a step's activity by itself, the activity compares the origin the
step was scheduled with to its worker's when it is an attempt after the first (:func:`moved`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal

from kavalai.errors import OutcomeUnknownError
from kavalai.kernel import deadline_paused

__all__ = [
    "ON_DOUBT",
    "OnDoubt",
    "ask_about",
    "doubt_answer",
    "doubt_key",
    "doubt_policy",
    "doubt_question",
    "doubt_resolution",
    "in_doubt_result",
    "is_in_doubt",
    "marked",
    "moved",
    "on_finding",
    "resolved_result",
    "sent_mark",
]

OnDoubt = Literal["fail", "replay", "ask"]

#: The policies a tool may have for a step found sent without a result.
ON_DOUBT: Final = ("fail", "replay", "ask")


def doubt_policy(request: Any, on_doubt: Mapping[str, OnDoubt]) -> OnDoubt | None:
    """The ``on_doubt`` policy of a step (the runner's for its tool's URI, else the tool's own, else ``"fail"``), or
    ``None`` when the step needs none: not a tool call, or one that may be repeated safely."""
    if not isinstance(request, Mapping) or request.get("kind") != "tool" or request.get("retry", True):
        return None
    own = request.get("on_doubt")
    return on_doubt.get(str(request.get("uri")), own if own in ON_DOUBT else "fail")


def marked(request: Any, on_doubt: Mapping[str, OnDoubt]) -> bool:
    """Whether a step is marked sent before its effect: a tool step that may not be repeated safely
    (:func:`doubt_policy`), or one whose tool has an origin (the mark records it: the origin rule)."""
    return doubt_policy(request, on_doubt) is not None or (
        isinstance(request, Mapping) and request.get("kind") == "tool" and request.get("origin") is not None
    )


def moved(mark: Any, origin: Any) -> tuple[str, str] | None:
    """``(old, new)`` when a step marked sent at the origin its ``mark`` records would now go to ``origin``, another
    one; ``None`` when it would go where it went (or the mark records none)."""
    old = mark.get("origin") if isinstance(mark, Mapping) else None
    if old is None or old == origin:
        return None
    return str(old), "(none)" if origin is None else str(origin)


def on_finding(
    request: Any, on_doubt: Mapping[str, OnDoubt], mark: Any
) -> tuple[OnDoubt | None, tuple[str, str] | None]:
    """What a resume does with a step it finds marked sent (``mark``) without a result: the policy (``None``: send it
    again, it may be repeated safely) and, when its tool's server moved, ``(old origin, new origin)``; a moved step
    is in doubt whatever its tool says (``"ask"`` still asks)."""
    policy = doubt_policy(request, on_doubt)
    move = moved(mark, request.get("origin") if isinstance(request, Mapping) else None)
    if move is None:
        return policy, None
    return ("ask" if policy == "ask" else "fail"), move


def doubt_key(position: int) -> str:
    """The key of the question a run asks about step ``position`` found in doubt (``on_doubt="ask"``)."""
    return f"doubt-{position}"


def doubt_question(
    run_id: str, position: int, name: str, request: Mapping[str, Any], move: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The question a run asks the operator about a step found sent without a result (``move``: its server moved
    from the first origin to the second; ``--retry`` sends it to the second)."""
    moved_to = {} if move is None else {"sent_to": move[0], "now_at": move[1]}
    return {
        **moved_to,
        "key": doubt_key(position),
        "kind": "doubt",
        "step": position,
        "name": name,
        "uri": request.get("uri"),
        "idempotency_key": request.get("key"),
        "question": f"Step {position} of run {run_id} ({name}) may have been sent"
        + ("" if move is None else f" to {move[0]} (its server is now {move[1]})")
        + f" and its outcome is unknown: did it happen? kavalai runs resolve {run_id} {position} --done (with "
        "--result JSON) or --retry",
    }


def doubt_resolution(done: bool, result: Any = None) -> dict[str, Any]:
    """The answer ``kavalai runs resolve`` sends about a step in doubt: it happened (``done``, with ``result``), or
    send it again."""
    return {"action": "done", "result": result} if done else {"action": "retry"}


def doubt_answer(value: Any) -> dict[str, Any]:
    """An answer to a doubt question as ``{"action": "done", "result": ...}`` or ``{"action": "retry"}``;
    ``"done"`` and ``"retry"`` are short forms.

    Raises:
        ValueError: anything else.
    """
    if value in ("done", "retry"):
        return {"action": "done", "result": None} if value == "done" else {"action": "retry"}
    action = value.get("action") if isinstance(value, Mapping) else None
    if action == "retry":
        return {"action": "retry"}
    if action == "done":
        from kavalai.durable._answers import checked_answer

        return {"action": "done", "result": checked_answer({}, value.get("result"))}
    raise ValueError(
        f"A step in doubt is resolved 'done' ({{'action': 'done', 'result': ...}}) or 'retry', not {value!r}."
    )


def resolved_result(answer: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a step the operator resolved done: the result they gave, as the tool would have returned it."""
    value = answer.get("result")
    return {"ok": {"result": value} if request.get("wrapped") else value, "resolved": True}


def sent_mark(request: Mapping[str, Any]) -> dict[str, Any]:
    """What the journal keeps of a step about to be sent: its state, tool and idempotency key."""
    mark = {"state": "sent", "uri": request.get("uri"), "key": request.get("key")}
    origin = request.get("origin")
    return mark if origin is None else {**mark, "origin": origin}


def in_doubt_result(
    run_id: str, position: int, name: str, request: Mapping[str, Any], move: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The record of a step found sent without a result: an :class:`OutcomeUnknownError`, marked in doubt; ``move``:
    its tool's server moved from the first origin to the second (the origin rule)."""
    from kavalai.durable._steps import error_envelope

    uri = str(request.get("uri"))
    why = (
        "the tool is neither read-only nor idempotent nor keyed, so it is not sent again."
        if move is None
        else f"it was sent to {move[0]}, and {uri}'s server is now {move[1]}: an idempotency key protects a repeat "
        "only where it was sent, so it is not sent to another origin."
    )
    error = OutcomeUnknownError(
        f"Outcome unknown: check before retrying. Step {position} of run {run_id} ({name}, idempotency key "
        f"{request.get('key')}) may have been sent (it was marked sent), and its worker stopped before the result "
        f"was recorded; {why}",
        run_id=run_id,
        step=f"{position}",
        uri=uri,
    )
    return {"error": error_envelope(error), "in_doubt": True}


def is_in_doubt(result: Any) -> bool:
    """Whether a recorded step result is one of a step found in doubt."""
    return isinstance(result, Mapping) and result.get("in_doubt") is True


async def ask_about(
    run_id: str,
    position: int,
    name: str,
    request: Mapping[str, Any],
    wait: Callable[[int, str, Any, float | None], Awaitable[Any]],
    retry: Callable[[], Awaitable[Any]],
    move: tuple[str, str] | None = None,
) -> Any:
    """``on_doubt="ask"`` on an engine whose run waits for answers itself (Temporal, DBOS's own step log): ask the
    operator about step ``position`` with the run's ``wait(position, key, question, timeout)``, then the record of
    the step resolved done, or ``retry()`` (the operator says it did not happen: sent again)."""
    question = doubt_question(run_id, position, name, request, move)
    with deadline_paused():  # the tool call's own timeout bounds its effect, not the operator
        answer = doubt_answer(await wait(position, doubt_key(position), question, None))
    if answer["action"] == "done":
        return resolved_result(answer, request)
    return await retry()
