"""Calls from another event loop: run on the loop that owns the connection, answered through the caller's own.

A connection's session (the SDK's ``ClientSession``: anyio streams and events) lives on the event loop of the task
that owns it (see :mod:`kavalai.adapters.mcp._connection`). Those objects are not thread-safe: a request sent on
them from a second event loop (a thread with its own ``asyncio.run``) would have its reply delivered to a waiter
that its own loop is never told about, so the call would wake only at its deadline. So a use from another loop is
handed to the owner's loop as a task of its own (``asyncio.run_coroutine_threadsafe``, which also copies the
caller's context: the current call, its deadline, its answerer), and the caller waits on a future of its own loop
(``asyncio.wrap_future``). Cancelling the caller (its timeout, ``close()``) cancels that task on the owner's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["elsewhere", "run_on"]

T = TypeVar("T")


def elsewhere(task: asyncio.Task[Any] | None) -> asyncio.AbstractEventLoop | None:
    """The loop of the owner ``task`` when it is alive on a loop other than the running one, else ``None``."""
    if task is None or task.done():
        return None
    loop = task.get_loop()
    if loop is asyncio.get_running_loop() or loop.is_closed():
        return None
    return loop


async def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` as a task of ``loop`` (another thread's) and wait for it here; cancelling the wait cancels it."""
    try:
        future = asyncio.run_coroutine_threadsafe(coro, loop)
    except RuntimeError:  # that loop closed in between
        coro.close()
        raise
    return await asyncio.wrap_future(future)
