"""The kernel's timer state never keeps an event loop alive (issue 36, tenth session): the cache of the last loop
that armed a timer, and the timers themselves, hold the loop weakly, so a loop closed and dropped is freed with
what it references, even with deadlines still pending on it when it closed."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from kavalai import FunctionKernel, pythontool


@pythontool
async def quick() -> str:
    """Answer at once."""
    return "ok"


@pythontool
async def hang() -> str:
    """Wait until cut."""
    await asyncio.sleep(3600)
    return "finished"


async def _calls(kernel: FunctionKernel, long: float | None, short: float | None) -> None:
    await kernel.call_tool("python://quick", {}, timeout=long)  # a slot timer left pending past the call
    if short is not None:
        await kernel.call_tool("python://quick", {}, timeout=short)  # an exact timer left pending
        pending = asyncio.create_task(kernel.call_tool("python://hang", {}, timeout=short))
        await asyncio.sleep(0)
        pending.cancel()  # the call ends by its caller's cancellation, its exact entry still on the heap


def _run_and_drop(long: float | None, short: float | None) -> weakref.ref[asyncio.AbstractEventLoop]:
    kernel = FunctionKernel()
    kernel.register_python_tool("quick", quick)
    kernel.register_python_tool("hang", hang)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_calls(kernel, long, short))
        loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(kernel.close())
    finally:
        loop.close()  # timers armed on it are still pending: the loop holds them, nothing else holds the loop
    return weakref.ref(loop)


@pytest.mark.parametrize(("long", "short"), [(30.0, None), (30.0, 0.05), (None, 0.05)])
def test_a_closed_and_dropped_loop_is_freed_after_deadlines_on_it(long: float | None, short: float | None) -> None:
    gone = _run_and_drop(long, short)
    gc.collect()
    assert gone() is None, gc.get_referrers(gone())
