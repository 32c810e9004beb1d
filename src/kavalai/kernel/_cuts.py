"""The error a tool call ends with when its work was cut: by ``close()`` (:class:`~kavalai.errors.KernelClosedError`),
by its own timeout, or at the deadline of the call or block around it (:class:`~kavalai.errors.ToolTimeoutError`,
naming the call's own URI and what the deadline was), and whether a ``CancelledError`` that reached the call is such
a cut at all or the caller's own cancellation, which goes on (the rules of :mod:`kavalai.kernel._cancel`)."""

from __future__ import annotations

from kavalai.errors import FunctionKernelException, KernelClosedError, ToolTimeoutError
from kavalai.kernel._call import CLOSED, Deadline, ToolCall

__all__ = ["cancellation", "cut_error"]


def cancellation(call: ToolCall) -> FunctionKernelException | None:
    """What a ``CancelledError`` that reached ``call_tool`` means: the call's own cut (closed, timed out), a cut of
    a call or block around it in the same task (the kernel closing, a deadline it inherited passing), or (``None``)
    the caller's own cancellation, which goes on."""
    around = call._cut_around()
    if call._cut is not None:
        sole = call._withdraw()
        return cut_error(call) if sole or around is not None else None
    if around is not None:
        call._cut = around  # cut with the scope around it (one timer per deadline): call.expired says so too
        return cut_error(call, reason=around)
    return None


def cut_error(call: ToolCall, *, started: bool = True, reason: str | None = None) -> FunctionKernelException:
    """The error of a call whose work was cut: closed, timed out on its own timeout, or cut at the deadline of the
    call or block around it (or refused before it started because that deadline had already passed)."""
    uri = call.definition.name
    if (reason or call._cut) == CLOSED:
        return KernelClosedError(f"The kernel was closed while {uri} was running.", uri=uri)
    limit = call._limit
    if call._source is None and limit is not None:
        return ToolTimeoutError(f"Tool {uri} timed out after {limit:g} s.", uri=uri, timeout=limit)
    what = _scope_name(call._origin())
    if not started:
        message = f"Tool {uri} was not started: the deadline of the {what} around it has passed."
        return ToolTimeoutError(message, uri=uri, timeout=0.0)
    shown = f" ({limit:.3g} s after it started)" if limit is not None else ""
    return ToolTimeoutError(
        f"Tool {uri} was cut at the deadline of the {what} around it{shown}.", uri=uri, timeout=limit
    )


def _scope_name(scope: object) -> str:
    if isinstance(scope, Deadline):
        return scope.what
    if isinstance(scope, ToolCall):
        return f"call of {scope.uri}"
    return "run"
