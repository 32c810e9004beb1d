"""One attempt at a connection (a *generation*), from spawn to shutdown, and its one state machine.

A generation moves forward only, through :class:`Phase`: ``CONNECTING`` → ``CONNECTED`` → ``STOPPING`` → ``DONE``
(``CONNECTED`` is skipped when it never got that far). Why it stopped is one :class:`Ending`. Every change goes
through :meth:`Generation.move`, which also sets the events that waiting tasks watch, so no flag and no event can
disagree with the phase.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.client.session import ClientSession

from kavalai.adapters.mcp._stdio import StdioProcess
from kavalai.errors import ServerConnectionError

__all__ = ["Ending", "Generation", "Phase"]


class Phase(enum.IntEnum):
    """Where a generation is; it only ever moves to a later phase."""

    CONNECTING = 1  # starting the transport, initializing, listing the tools
    CONNECTED = 2  # the session is open and its tools are published
    STOPPING = 3  # asked to stop (or its transport ended); the owner task is shutting it down
    DONE = 4  # shut down: the process is gone, the owner task has finished


class Ending(enum.Enum):
    """Why a generation stopped."""

    ENDED = "ended"  # the transport ended: a stdio process exited, an event stream closed, a call found it gone
    EXPIRED = "expired"  # the HTTP server answered 404 for the session: it ran nothing sent on it
    CLOSED = "closed"  # the kernel closed it (or the event loop is shutting down): nothing failed


@dataclass(eq=False)
class Generation:
    """One attempt at a connection, owned by one task (see :mod:`kavalai.adapters.mcp._connection`)."""

    number: int
    phase: Phase = Phase.CONNECTING
    ending: Ending | None = None
    was_connected: bool = False  # it reached CONNECTED (a later failure is "while connected")
    session: ClientSession | None = None
    client: Any = None  # the SDK's mcp.Client around the session, while connected
    relisten: anyio.Event | None = None  # set to reopen the 2026-07-28 change stream (subscriptions changed)
    listened: list[anyio.Event] = field(default_factory=list)  # set once a change stream with the new filter is open
    process: StdioProcess | None = None
    scope: anyio.CancelScope | None = None
    error: ServerConnectionError | None = None  # why it failed, once it has
    cause: BaseException | None = None  # the transport's own exception, if one ended it
    challenge: str | None = None  # the WWW-Authenticate header of an HTTP 401 answer, if the server sent one
    task: asyncio.Task[None] | None = None
    refresh: anyio.Event = field(default_factory=anyio.Event)  # the server said its tool list changed
    gap: bool = False  # the next refresh follows a change stream that closed: tell on_change what changed
    deaf: str | None = None  # why its event stream could not be opened again (it is then ended, to reconnect)
    _ready: anyio.Event = field(default_factory=anyio.Event)  # CONNECTED or DONE
    _stopping: anyio.Event = field(default_factory=anyio.Event)  # STOPPING or DONE
    _done: anyio.Event = field(default_factory=anyio.Event)  # DONE

    def move(self, phase: Phase, ending: Ending | None = None) -> None:
        """Go to ``phase`` (a no-op unless it is later than the current one), recording why it stops.

        The first ending given is kept, except that the kernel closing it (``CLOSED``) always wins: a closed
        connection is not reported as failed.
        """
        if ending is not None and (self.ending is None or ending is Ending.CLOSED):
            self.ending = ending
        if phase <= self.phase:
            return
        self.phase = phase
        if phase is Phase.CONNECTED:
            self.was_connected = True
            self._ready.set()
            return
        self._stopping.set()
        if phase is Phase.DONE:
            self.session = None
            self._ready.set()
            self._done.set()

    # The transports' callbacks.
    def end(self) -> None:
        """The connection is gone: let the owner shut it down."""
        self.move(Phase.STOPPING, Ending.ENDED)

    def unheard(self, why: str) -> None:
        """Its event stream could not be opened again: notifications no longer arrive, so it ends."""
        if self.deaf is None:
            self.deaf = why
        self.end()

    def challenged(self, header: str) -> None:
        """The HTTP server answered 401 with this ``WWW-Authenticate`` header (empty: none)."""
        self.challenge = header

    def expire(self) -> None:
        """The HTTP server answered 404 for the session: a new session is needed."""
        self.move(Phase.STOPPING, Ending.EXPIRED)

    @property
    def live(self) -> bool:
        """Whether its session is open and usable now."""
        return self.phase is Phase.CONNECTED and self.session is not None

    @property
    def stopping(self) -> bool:
        """Whether it has been asked to stop (or has stopped)."""
        return self.phase >= Phase.STOPPING

    def is_done(self) -> bool:
        """Whether it has shut down completely."""
        return self.phase is Phase.DONE

    @property
    def closing(self) -> bool:
        """Whether the kernel is closing (or has closed) it."""
        return self.ending is Ending.CLOSED

    @property
    def expired(self) -> bool:
        """Whether the HTTP server forgot its session."""
        return self.ending is Ending.EXPIRED

    async def wait_ready(self) -> None:
        """Until it is connected, or done trying."""
        await self._ready.wait()

    async def wait_stopping(self) -> None:
        """Until it is asked to stop."""
        await self._stopping.wait()

    async def wait_done(self) -> None:
        """Until it has shut down."""
        await self._done.wait()
