"""A call's progress on its way to the host that asked for it: the one place ``kavalai serve`` sends progress.

A backend may send progress notifications faster than its host reads them (or a host may not read at all). The
SDK's client hands each one to its own task, so sending each through the host's stream as it comes would hold one
task and one message per notification for as long as the host does not read: a backend sending 100,000 of them
held 100,000 tasks. Here one send at a time is under way per call; what comes meanwhile replaces what was waiting
(progress is a level, not a log: only the newest matters), so a call holds at most one progress being sent and one
waiting, however many come and however slowly the host reads. Replaced ones are counted in a log line. When the call
ends, what was waiting is dropped and a send still under way is cut (a progress after the result says nothing), so
nothing of a call's progress outlives it.
"""

from __future__ import annotations

from typing import Final, Protocol

import anyio

from kavalai.secrets import get_logger, redact_data

__all__ = ["LatestProgress"]

logger = get_logger("kavalai.serve")


class _Reports(Protocol):
    """What sends a request's progress to its host: the SDK's ``ServerSession`` of the request."""

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` for the request (nothing when the host asked for none)."""


_LOG_EVERY: Final = 10_000  # replaced progress notifications between two log lines of one call


class LatestProgress:
    """The progress of one host call, sent through ``session`` (the request's) one at a time, the newest kept while
    a send is under way; :meth:`close` when the call has ended."""

    def __init__(self, session: _Reports) -> None:
        self._session = session
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
                    await self._session.report_progress(*latest)
                    latest, self._waiting = self._waiting, None
            finally:
                self._sending = None

    def close(self) -> None:
        """The call has ended: drop what waits, cut a send under way, and send nothing more."""
        self._closed = True
        self._waiting = None
        if self._sending is not None:
            self._sending.cancel()
