"""2026-07-28 era: one generation's ``subscriptions/listen`` stream, held open for as long as the generation lives.

A stream's filter is fixed when it opens, so the stream is opened again whenever the resources subscribed to
change (``subscribe_resource`` returns once the new one is open). A stream that closes while the server lives
(the server ended it, a proxy timed it out) is opened again with bounded backoff (:class:`~kavalai.adapters.mcp.
_healing.Backoff`, within the server's ``connect_timeout``) and the same filter; what the server no longer honors
is reported lost, and the tools are listed again (what changed in between is not replayed). When it cannot be
opened again within that time, every subscription is reported lost and the generation ends: the next use
connects again. A server that refuses the first stream of a generation offers none, and is not asked again until
the subscriptions change.
"""

from __future__ import annotations

import anyio
import anyio.abc

from kavalai.adapters.mcp import _era as era
from kavalai.adapters.mcp._generation import Generation
from kavalai.adapters.mcp._healing import Backoff, Healing

__all__ = ["ChangeStream"]


class _Stream:
    """One stream being opened: who waits for it to be open, the filter it asks for, and how it went."""

    def __init__(self, waiting: list[anyio.Event], asked: tuple[str, ...]) -> None:
        self.waiting = waiting
        self.asked = asked
        self.replaced = False  # the subscriptions changed again before it opened: its waiters wait for the next
        self.opened = False  # the server acknowledged it
        self.ended = False  # it ended by itself (closed, or never opened), not replaced

    def wake(self) -> None:
        """The stream is open (or will not be): its waiters go on."""
        for event in self.waiting:
            event.set()
        self.waiting.clear()


class ChangeStream:
    """Holds the change stream of one generation (see the module docstring)."""

    def __init__(self, gen: Generation, healing: Healing, budget: float, *, restoring: bool) -> None:
        self._gen = gen
        self._healing = healing
        self._backoff = Backoff(budget)
        self._restoring = restoring  # the next stream stands in for one that is gone (counted as restored)
        self._retrying = False  # a stream closed and none has opened since
        self._started = False

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Open streams until the generation ends; ``task_status`` is told once the first one is open (or once it
        is clear that there will be none). Whoever changed the subscriptions before a stream was asked for
        (``gen.listened``) is woken once it is open (or will not be), and when this ends."""
        gen = self._gen
        waiting: list[anyio.Event] = []
        try:
            while True:
                relisten = gen.relisten = anyio.Event()
                waiting, gen.listened = waiting + gen.listened, []  # their changes are in the filter asked for now
                stream = _Stream(waiting, tuple(sorted(self._healing.subscribed | self._healing.dropped)))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._hold, stream, relisten, task_status)
                    await relisten.wait()
                    stream.replaced = not stream.ended
                    tg.cancel_scope.cancel()
                if stream.replaced:
                    continue  # the subscriptions changed: a stream with the new filter
                if stream.opened or self._retrying:  # it closed while the server lives: open it again
                    self._retrying = self._restoring = True
                    if not await self._backoff.wait():
                        self._give_up()
                        return
                    continue
                self._refused(stream)
                await self._wait_for_subscriptions()
        finally:
            for event in [*waiting, *gen.listened]:
                event.set()  # the generation is ending: nobody waits for a stream that will not open

    async def _hold(self, stream: _Stream, relisten: anyio.Event, task_status: anyio.abc.TaskStatus[None]) -> None:
        def opened(honored: tuple[str, ...] | None) -> None:
            if stream.replaced:
                return  # left for the next stream before this one opened
            if honored is not None:
                stream.opened = True
                self._healing.listened(stream.asked, honored, restoring=self._restoring)
                if self._started:
                    self._gen.refresh.set()  # opened again: what changed in between is listed again
                    self._gen.gap = self._retrying
                self._restoring = self._retrying = False
                self._backoff.reset()
            if not self._started:
                self._started = True
                task_status.started()
            stream.wake()

        await era.listen(self._gen.client, self._healing.server, stream.asked, opened, self._backoff.budget)
        stream.ended = True
        relisten.set()

    async def _wait_for_subscriptions(self) -> None:
        """The server refused the first stream: ask again only once the subscriptions change."""
        relisten = self._gen.relisten = anyio.Event()
        await relisten.wait()

    def _refused(self, stream: _Stream) -> None:
        """The first stream of a generation was refused: what it should have restored is lost."""
        if self._restoring:
            for uri in stream.asked:
                self._healing.lose(uri, "the server refused its subscriptions/listen stream")
            self._restoring = False

    def _give_up(self) -> None:
        budget = self._backoff.budget
        for uri in sorted(self._healing.subscribed):
            reason = f"its subscriptions/listen stream closed and did not open again within {budget:g} s"
            self._healing.lose(uri, reason)
        self._gen.end()
