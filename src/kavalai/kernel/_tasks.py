"""ToolTask: a tool call running in the background, for long-running tools of every kind.

``kernel.start_tool(uri, arguments)`` starts the call in a task of the running event loop and returns at once with a
:class:`ToolTask`: its ``status``, ``await task.result()`` for the typed output (or the call's error), and
``await task.cancel()``. The call is an ordinary ``call_tool``: validated, under its timeout, through the middleware,
and failed with ``KernelClosedError`` when the kernel closes.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel

from kavalai.errors import FunctionKernelException

__all__ = ["TaskStatus", "ToolTask"]

#: ``running`` until the call ends; then ``completed``, ``failed`` (its error is kept) or ``cancelled``.
TaskStatus: TypeAlias = Literal["running", "completed", "failed", "cancelled"]

_next_id = itertools.count(1).__next__


class ToolTask:
    """One tool call running in the background (see the module docstring).

    Attributes:
        uri: the URI the call was started with.
        task_id: a string unique to this task within the process (``"task-3"``).
    """

    def __init__(
        self, uri: str, call: Coroutine[Any, Any, BaseModel], *, context: contextvars.Context | None = None
    ) -> None:
        self.uri = uri
        self.task_id = f"task-{_next_id()}"
        loop = asyncio.get_running_loop()
        self._task: asyncio.Task[BaseModel] = loop.create_task(call, name=self.task_id, context=context)

    @property
    def status(self) -> TaskStatus:
        """Where the call is."""
        task = self._task
        if not task.done():
            return "running"
        if task.cancelled():
            return "cancelled"
        return "failed" if task.exception() is not None else "completed"

    def add_done_callback(self, callback: Callable[[ToolTask], object]) -> None:
        """Call ``callback(self)`` once the call has ended (at once if it has)."""
        self._task.add_done_callback(lambda _: callback(self))

    def done(self) -> bool:
        """Whether the call has ended, one way or another."""
        return self._task.done()

    async def result(self) -> BaseModel:
        """Wait for the call and return its output (as ``call_tool`` returns it), or raise its error.

        Raises:
            FunctionKernelException: the call failed (the same error ``call_tool`` would have raised).
            asyncio.CancelledError: the task was cancelled.
        """
        return await asyncio.shield(self._task)

    async def cancel(self) -> None:
        """Cancel the call (if still running) and wait until it has ended."""
        if self._task.done():
            return
        self._task.cancel()
        try:
            await asyncio.wait({self._task})
        finally:
            if self._task.done() and not self._task.cancelled():
                self._task.exception()  # retrieved: a failure while cancelling is not "never retrieved"

    def error(self) -> FunctionKernelException | None:
        """The call's error once it has failed, else ``None``."""
        task = self._task
        if not task.done() or task.cancelled():
            return None
        exc = task.exception()
        return exc if isinstance(exc, FunctionKernelException) else None

    def __repr__(self) -> str:
        return f"<ToolTask {self.task_id} {self.uri} {self.status}>"
