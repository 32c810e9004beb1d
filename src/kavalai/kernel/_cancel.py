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

__all__ = ["withdraw_cut"]


def withdraw_cut(task: asyncio.Task[object], baseline: int) -> bool:
    """Withdraw the one cancellation request a scope made of ``task`` (its *cut*), and return whether the task's
    cancellation was that scope's alone: ``True`` means the scope handles it (its own error replaces
    ``CancelledError``), ``False`` means someone else cancelled the task too and ``CancelledError`` must go on.

    Args:
        task: the task the scope runs in, which the scope cancelled exactly once.
        baseline: ``task.cancelling()`` when the scope was entered.
    """
    return task.uncancel() <= baseline
