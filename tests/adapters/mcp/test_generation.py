"""The state machine of one connection attempt: forward-only phases, one ending, events that follow the phase."""

from __future__ import annotations

import anyio
import pytest

from kavalai.adapters.mcp import McpStatus
from kavalai.adapters.mcp._generation import Ending, Generation, Phase


async def test_a_generation_moves_forward_only_and_wakes_its_waiters() -> None:
    gen = Generation(number=1)
    woke: list[str] = []

    async def wait(name: str, waiter: object) -> None:
        await waiter()  # type: ignore[operator]
        woke.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, "ready", gen.wait_ready)
        tg.start_soon(wait, "stopping", gen.wait_stopping)
        tg.start_soon(wait, "done", gen.wait_done)
        await anyio.wait_all_tasks_blocked()
        gen.move(Phase.CONNECTED)
        await anyio.wait_all_tasks_blocked()
        assert woke == ["ready"]
        assert gen.was_connected
        assert gen.phase is Phase.CONNECTED
        gen.move(Phase.CONNECTING)  # backwards: ignored
        assert gen.phase is Phase.CONNECTED
        gen.end()
        await anyio.wait_all_tasks_blocked()
        assert woke == ["ready", "stopping"]
        assert gen.stopping
        assert gen.ending is Ending.ENDED
        gen.move(Phase.DONE)
    assert woke == ["ready", "stopping", "done"]
    assert gen.is_done()
    assert gen.session is None


def test_a_generation_stopped_while_connecting_was_never_connected() -> None:
    gen = Generation(number=1)
    gen.expire()
    gen.move(Phase.CONNECTED)  # the owner finished connecting after the stop: too late
    assert gen.phase is Phase.STOPPING
    assert not gen.was_connected
    assert gen.expired
    assert not gen.live


@pytest.mark.parametrize("first", [Ending.ENDED, Ending.EXPIRED])
def test_the_first_ending_is_kept_but_closing_always_wins(first: Ending) -> None:
    gen = Generation(number=1)
    gen.move(Phase.STOPPING, first)
    gen.move(Phase.STOPPING, Ending.ENDED if first is Ending.EXPIRED else Ending.EXPIRED)
    assert gen.ending is first
    assert not gen.closing
    gen.move(Phase.DONE, Ending.CLOSED)
    assert gen.closing
    assert gen.ending is Ending.CLOSED


def test_the_status_enum_is_also_its_string() -> None:
    assert McpStatus.CONNECTED == "connected"
    assert f"{McpStatus.FAILED}" == "failed"
    assert [status.value for status in McpStatus] == ["registered", "connecting", "connected", "failed", "closed"]
