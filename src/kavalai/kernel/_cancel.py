"""A cancel scope's bookkeeping for one asyncio task: take back the one cancellation a scope made itself.

An asyncio task is interrupted by ``task.cancel()``. A *scope* inside the task (``asyncio.timeout``, anyio's
``CancelScope``, and each kavalai tool call and deadline) that cancels the task to cut the work it owns must, once
that work has ended, withdraw its own request with ``Task.uncancel()`` and turn the cancellation into its own
outcome, unless another request (the caller's own cancellation) is still pending, in which case
``CancelledError`` goes on. The rules are ``asyncio.timeout``'s (see ``asyncio/timeouts.py``): the task's
``cancelling()`` count when the scope was entered is the baseline; a cut adds one request; when the work has ended
the scope withdraws that one and handles the cancellation only if the count is back at the baseline.

Written here rather than using ``asyncio.timeout`` itself: ``asyncio.timeout(None)`` costs about 1.9 µs per use on
this project's machines (an async context manager in Python and a timer handle rescheduled on entry), more than a
whole ``python://`` call, and every tool call is a scope; the kernel keeps the baseline in the call's own record and
arms a timer only when the call has a deadline. A scope never withdraws a request it did not make.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any, Final

__all__ = ["running_task", "withdraw_cut"]

_running_loop: Final = asyncio._get_running_loop  # C: the running loop of this thread, or None (never raises)
if sys.version_info >= (3, 12):
    _task_of: Callable[[Any], asyncio.Task[Any] | None] = asyncio.current_task  # C since 3.12
else:  # 3.11: asyncio.current_task is Python around this dict, which the C tasks keep
    from _asyncio import _current_tasks  # type: ignore[attr-defined]

    _task_of = _current_tasks.get


def running_task() -> asyncio.Task[Any] | None:
    """The asyncio task running now, or ``None`` outside one (another event loop library, a plain thread): the
    C look-up on every version, no ``RuntimeError`` to catch. Hot paths inline its two lines."""
    loop = _running_loop()
    return _task_of(loop) if loop is not None else None


def withdraw_cut(task: asyncio.Task[object], baseline: int) -> bool:
    """Withdraw the one cancellation request a scope made of ``task`` (its *cut*), and return whether the task's
    cancellation was that scope's alone: ``True`` means the scope handles it (its own error replaces
    ``CancelledError``), ``False`` means someone else cancelled the task too and ``CancelledError`` must go on.

    Args:
        task: the task the scope runs in, which the scope cancelled exactly once.
        baseline: ``task.cancelling()`` when the scope was entered.
    """
    return task.uncancel() <= baseline
