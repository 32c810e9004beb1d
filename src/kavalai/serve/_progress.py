"""A call's progress on its way to the host that asked for it: the one place ``kavalai serve`` sends progress.

A backend may send progress notifications faster than its host reads them (or a host may not read at all). The
SDK's client hands each one to its own task, so sending each through the host's stream as it comes would hold one
task and one message per notification for as long as the host does not read: a backend sending 100,000 of them
held 100,000 tasks. Here one send at a time is under way per call; what comes meanwhile replaces what was waiting
(progress is a level, not a log: only the newest matters), so a call holds at most one progress being sent and one
waiting, however many come and however slowly the host reads. Replaced ones are counted in a log line. When the call
ends, what was waiting is dropped and a send still under way is cut (a progress after the result says nothing), so
nothing of a call's progress outlives it.

Progress is asked of backends only for a host request that carries a progress token (:func:`asks_progress`), and
sent only to the host request that asked. A 2026-07-28 host's call that runs across several of its requests (its
input-required rounds, or a call that becomes a task once its backend's does) spans several backend requests too:
its progress goes to the host's request in at the time (:class:`Rounds`: its ``ctx``), when that request carries a
token, and only when it rises above what that request was last sent (the protocol's progress must increase per
token; a backend's next request counts from its own start); between the host's requests there is none to send it to,
and it is dropped.

A tool that is not an MCP server's (a ``python://`` function) may call MCP tools itself while it runs. Those calls,
made without a progress callback of their own, send their servers' progress to the host's request too
(:func:`kavalai.adapters.mcp.relaying_progress`, opened by :func:`progress_for`): only to the host that asked, on its
token, and only when it rises above the highest that request was sent (the tool's own reports included), for the
same reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, Protocol

import anyio

from kavalai.adapters.mcp import relaying_progress
from kavalai.secrets import get_logger, redact_data

__all__ = ["LatestProgress", "Rounds", "asks_progress", "progress_for"]

logger = get_logger("kavalai.serve")


class _Reports(Protocol):
    """What sends a request's progress to its host: the SDK's ``ServerSession`` of the request."""

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` for the request (nothing when the host asked for none)."""


class Rounds(Protocol):
    """A host call across several host requests (``kavalai.serve._rounds.RoundsCall``): the request of its latest
    round (``ctx``, a ``ServerRequestContext``), and whether that request is in now (``answering``)."""

    ctx: Any
    answering: bool


_LOG_EVERY: Final = 10_000  # replaced progress notifications between two log lines of one call


def asks_progress(meta: Any) -> bool:
    """Whether a host request's ``_meta`` carries a progress token (the host asked for progress): the SDK's
    ``RequestParamsMeta`` names it ``progress_token``; a raw ``_meta`` (a mapping not validated) ``progressToken``."""
    return isinstance(meta, dict) and (meta.get("progress_token") is not None or meta.get("progressToken") is not None)


class LatestProgress:
    """The progress of one host call, sent through ``session`` (the request's) one at a time, the newest kept while
    a send is under way; :meth:`close` when the call has ended. ``rounds``: the call runs across several host
    requests, and each progress goes to the one in at the time (``session`` unused), as the module says."""

    def __init__(self, session: _Reports | None = None, *, rounds: Rounds | None = None) -> None:
        self._session = session
        self._rounds = rounds
        self._last: tuple[int, float] | None = None  # rounds: the request last sent progress, and the last sent
        self._highest: float | None = None  # one request: the highest progress reported for it
        self._waiting: tuple[float, float | None, str | None] | None = None
        self._sending: anyio.CancelScope | None = None
        self._closed = False
        self.replaced = 0  # progress notifications dropped for a newer one while the host was being sent one

    @property
    def unsent(self) -> int:
        """Progress notifications held for the host now: the one being sent, and the one waiting (at most 2)."""
        return (self._sending is not None) + (self._waiting is not None)

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        """Send ``progress`` to the host, or, while another is being sent, keep it as the one to send next (in
        place of the one kept before). A backend's message crosses the secret gate."""
        if self._closed:
            return
        if self._rounds is None and (self._highest is None or progress > self._highest):
            self._highest = progress
        latest: tuple[float, float | None, str | None] | None = (progress, total, redact_data(message))
        if self._sending is not None:
            if self._waiting is not None:
                self.replaced += 1
                if self.replaced == 1 or self.replaced % _LOG_EVERY == 0:
                    logger.info("kavalai serve: a host reads progress slowly: %d replaced by newer ones", self.replaced)
            self._waiting = latest
            return
        with anyio.CancelScope() as self._sending:
            try:
                while latest is not None and not self._closed:
                    session = self._session if self._rounds is None else self._now(latest[0])
                    if session is not None:
                        await session.report_progress(*latest)
                    latest, self._waiting = self._waiting, None
            finally:
                self._sending = None

    async def nested(self, progress: float, total: float | None, message: str | None) -> None:
        """A nested MCP call's progress (a call the tool made, :func:`~kavalai.adapters.mcp.relaying_progress`):
        sent as :meth:`report` does, but only when above the highest reported for the host's request (across rounds,
        :meth:`_now` holds each request to that already), since it counts from the nested call's own start."""
        if self._rounds is None and self._highest is not None and progress <= self._highest:
            return
        await self.report(progress, total, message)

    def _now(self, progress: float) -> _Reports | None:
        """The session of the host request in now that asked for progress and was sent less than ``progress``."""
        assert self._rounds is not None
        ctx = self._rounds.ctx
        if not self._rounds.answering or ctx is None or not asks_progress(ctx.meta):
            return None
        if self._last is not None and self._last[0] == id(ctx) and progress <= self._last[1]:
            return None  # not above what this request was sent: another backend request counting from its start
        self._last = (id(ctx), progress)
        session: _Reports = ctx.session
        return session

    def close(self) -> None:
        """The call has ended: drop what waits, cut a send under way, and send nothing more."""
        self._closed = True
        self._waiting = None
        if self._sending is not None:
            self._sending.cancel()


Report = Callable[[float, float | None, str | None], Awaitable[None]]


@contextlib.contextmanager
def progress_for(ctx: Any, meta: Any, rounds: Rounds | None = None) -> Iterator[Report | None]:
    """Within the block, the callback a host call's progress goes to (``None``: the host's request, whose ``_meta``
    is ``meta``, asked for none, so nothing is asked of the backends): to the request of ``ctx``, or, for a call
    across several host requests, to the one of ``rounds`` in at the time; the progress of the MCP calls the tool
    makes without a callback of their own goes there too (:meth:`LatestProgress.nested`). Closed at the block's end."""
    if not asks_progress(meta):
        yield None
        return
    latest = LatestProgress(ctx.session) if rounds is None else LatestProgress(rounds=rounds)
    try:
        with relaying_progress(latest.nested):  # the MCP calls a Python tool makes: their progress to this host
            yield latest.report
    finally:
        latest.close()
