"""One tool call as the middleware chain sees it, and the per-call context a tool can read.

A :class:`ToolCall` is built by :meth:`Kernel.call_tool` after the arguments are validated, handed down the kernel's
middleware chain and finally to the tool's adapter. The same object is the call's context: while the call runs,
:func:`current_call` returns it, in the tool, in what the tool awaits, and in the worker thread of a sync Python
tool.

How the current call is found, and why: setting a :class:`~contextvars.ContextVar` and resetting it costs about a
quarter of a microsecond, a tenth of a whole call. So :meth:`Kernel.call_tool` sets nothing: the call's slot is a
local variable of its frame, and :func:`current_call` finds the innermost ``call_tool`` frame on the running stack
(a coroutine awaited inline, as a tool and every middleware are, runs with its awaiting frames linked). Where no
kernel frame is on the stack, in the worker thread of a sync tool, the adapter sets the context variable for that
thread (:func:`bind_current_call`). A task that a tool spawns has neither, and sees ``None``: pass the call along
(``current_call()`` read in the tool) if the task needs it.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from kavalai.kernel._definition import ToolDefinition

__all__ = ["CallNext", "Middleware", "ProgressCallback", "ToolCall", "bind_current_call", "current_call"]

logger = logging.getLogger("kavalai")

R = TypeVar("R")

_next_id = itertools.count(1).__next__
# A call's slot: [definition, arguments, ToolCall or None]. The ToolCall is made when first asked for, so a call
# that no middleware and no tool looks at costs a three-item list, not an object built in Python. The slot is the
# local variable SLOT_NAME of Kernel.call_tool, and the value of _current in a worker thread (see the docstring).
_current: ContextVar[list[Any] | None] = ContextVar("kavalai_current_call", default=None)
SLOT_NAME = "slot"
# The code objects of the functions whose frames hold a slot (Kernel.call_tool registers itself).
CALL_FRAMES: set[CodeType] = set()


class ToolCall:
    """One call of one tool, with its validated arguments; also the context a running tool reads.

    Attributes:
        definition: the tool being called.
        arguments: the validated input model instance (a middleware may hand a new one to ``call_next``).
        deadline: the event loop time (``loop.time()``) by which the call must end, or ``None`` for no limit.
        metadata: a dict for middleware and tools to share facts about this call (an idempotency key, a span, ...).
        call_id: a string unique to this call within the process.
        progress: the caller's progress callback (``call_tool(..., progress=...)``), or ``None``; a tool reports
            through :meth:`report_progress`, an MCP server through its progress notifications.
    """

    # Not slotted: the id and metadata are class-level defaults until first written, so building one is cheap.
    _id: int = 0
    _metadata: dict[str, Any] | None = None
    deadline: float | None = None
    progress: ProgressCallback | None = None

    def __init__(self, definition: ToolDefinition, arguments: BaseModel) -> None:
        self.definition = definition
        self.arguments = arguments

    @property
    def uri(self) -> str:
        """The URI of the tool being called."""
        return self.definition.name

    @property
    def call_id(self) -> str:
        """A string unique to this call within the process (``"call-17"``); made when first read."""
        if not self._id:
            self._id = _next_id()
        return f"call-{self._id}"

    @property
    def metadata(self) -> dict[str, Any]:
        """Facts about this call that middleware and tools share; empty until something writes to it."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the caller how far the call is (``progress`` of ``total``, with an optional message); nothing
        happens when the caller gave no progress callback. A callback that fails is logged, not raised."""
        callback = self.progress
        if callback is None:
            return
        try:
            outcome = callback(progress, total, message)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # the caller's display failing must not fail the tool
            logger.warning("The progress callback of %s failed", self.uri, exc_info=True)

    def __repr__(self) -> str:
        return f"<ToolCall {self.uri} {self.call_id}>"


#: ``callback(progress, total, message)``, sync or async: how a caller follows a long call.
ProgressCallback: TypeAlias = Callable[[float, "float | None", "str | None"], "Awaitable[None] | None"]

#: The rest of the chain: the next middleware, or at its end the adapter. Returns the tool's raw value.
CallNext: TypeAlias = Callable[[ToolCall], Awaitable[Any]]

#: A middleware: ``async def middleware(call, call_next) -> raw value``. It may read or replace ``call.arguments``,
#: record facts in ``call.metadata``, wrap ``await call_next(call)`` in whatever it needs (a span, a journal step,
#: a policy check), or answer without calling the tool at all. What it returns is coerced by the tool's output model.
Middleware: TypeAlias = Callable[[ToolCall, CallNext], Awaitable[Any]]


def current_call() -> ToolCall | None:
    """The call being run in this context (a tool reads its call id, deadline and metadata here), or ``None``."""
    slot = _frame_slot() or _current.get()
    if slot is None:
        return None
    call: ToolCall | None = slot[2]
    if call is None:
        call = slot[2] = ToolCall(slot[0], slot[1])
    return call


def bind_current_call(func: Callable[[], R]) -> Callable[[], R]:
    """``func`` made to run with the current call as its context, wherever it runs: an adapter hands a tool's
    work to a worker thread through this, so that :func:`current_call` works there too."""
    slot = _frame_slot() or _current.get()
    if slot is None:
        return func

    def bound() -> R:
        token = _current.set(slot)
        try:
            return func()
        finally:
            _current.reset(token)

    return bound


def _frame_slot() -> list[Any] | None:
    """The slot of the innermost ``call_tool`` frame on this thread's stack (which, in a coroutine, runs through
    every coroutine awaiting it), or ``None``."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code in CALL_FRAMES:
            slot: list[Any] | None = frame.f_locals.get(SLOT_NAME)
            return slot
        frame = frame.f_back
    return None
