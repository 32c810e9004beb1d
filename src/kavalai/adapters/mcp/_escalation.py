"""When a server turns a call into a task of its own, for a caller that follows the call on someone's behalf
(``kavalai serve``, whose host's task is started when its backend's is).

A server of the 2026-07-28 era may answer a ``tools/call`` with input-required rounds first and a task
(``resultType: "task"``) on the last of them; a handshake-era server listing a tool with ``taskSupport`` answers
its task-augmented call with the task it created. The connection follows the task to its end either way, so a
kernel caller sees only the result. A gateway fronting the server needs the moment the task exists: its host is
asked the rounds before it as rounds, and given a task of the gateway's from then on. The gateway opens
:func:`on_server_task` around the call; the connection calls :func:`server_task_created` when the server's answer
is a task, which reaches the callback only inside such a block, so no other caller pays for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["on_server_task", "server_task_created"]

_callback: ContextVar[Callable[[], None] | None] = ContextVar("kavalai_mcp_on_server_task", default=None)


@contextmanager
def on_server_task(callback: Callable[[], None]) -> Iterator[None]:
    """Within the block, ``callback`` is called (in the calling task) each time an MCP server answers a tool call
    made from this context with a task of its own, before the connection follows the task."""
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


def server_task_created() -> None:
    """The server answered the current call with a task: tell the block's callback (when the caller opened one)."""
    callback = _callback.get()
    if callback is not None:
        callback()
