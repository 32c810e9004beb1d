"""One pooled aiohttp session per event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeAlias

import aiohttp

__all__ = ["LoopSession", "SessionFactory"]

#: Makes a new session, and optionally what else to close with it (a resolver the connector does not own).
SessionFactory: TypeAlias = Callable[[], "tuple[aiohttp.ClientSession, Callable[[], Awaitable[None]] | None]"]


class LoopSession:
    """Owns one aiohttp session, bound to the event loop it was opened in.

    aiohttp sessions belong to one loop, so the session is opened on first use inside the running loop, and
    opened anew when used from another loop or after :meth:`aclose`. A session never closed by :meth:`aclose` is
    closed when its loop shuts down: an async generator of that loop owns it, and ``asyncio.run()`` finalises
    suspended async generators (``loop.shutdown_asyncgens()``), so no socket outlives the loop.
    """

    __slots__ = ("_closer", "_factory", "_loop", "_session")

    def __init__(self, factory: SessionFactory) -> None:
        self._factory = factory
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    @property
    def session(self) -> aiohttp.ClientSession | None:
        """The session opened last (of whichever loop), or ``None`` before the first use and after :meth:`aclose`."""
        return self._session

    def current(self) -> aiohttp.ClientSession | None:
        """The open session of the running loop, or ``None`` when :meth:`get` would open one."""
        session = self._session
        if session is None or session.closed or self._loop is not asyncio.get_running_loop():
            return None
        return session

    async def get(self) -> aiohttp.ClientSession:
        """The session of the running loop, opened now if there is none."""
        session = self.current()
        if session is not None:
            return session
        if self._closer is not None:
            await self.aclose()  # a closed session, or one of another loop: let go of it properly
            session = self.current()
            if session is not None:  # another call opened one meanwhile
                return session
        session, cleanup = self._factory()
        self._session, self._loop = session, asyncio.get_running_loop()
        self._closer = _own(session, cleanup)
        await anext(self._closer)
        return session

    async def aclose(self) -> None:
        """Close the session (if open); the next :meth:`get` opens a new one."""
        closer, self._closer, self._session, self._loop = self._closer, None, None, None
        if closer is not None:
            await closer.aclose()  # its finally block closes the session


async def _own(
    session: aiohttp.ClientSession, cleanup: Callable[[], Awaitable[None]] | None
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        try:
            if not session.closed:
                await session.close()
        finally:
            if cleanup is not None:
                await cleanup()
