"""Deadlines less than 0.1 s away share one loop timer per loop, armed at the first of them (issue 36, ninth
session: a TimerHandle per call cost about 1.2 µs more a call): each is still cut at its own deadline, never early,
whatever order they are set in (a nearer one set after a later one moves the timer), and none is lost."""

from __future__ import annotations

import asyncio
import sys
import time

import anyio
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.errors import ToolTimeoutError
from kavalai.kernel import current_call

pytestmark = pytest.mark.anyio


async def test_short_deadlines_set_in_any_order_are_each_cut_at_their_own_time_never_early() -> None:
    seen: dict[float, tuple[float, float]] = {}  # timeout -> (when the cut reached the tool, its deadline)

    @pythontool
    async def hang(limit: float) -> str:
        """Wait until cut."""
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            call = current_call()
            assert call is not None
            assert call.deadline is not None
            seen[limit] = (time.monotonic(), call.deadline)
            raise
        return "finished"

    kernel = FunctionKernel()
    kernel.register_python_tool("hang", hang)
    limits = [0.09, 0.06, 0.03, 0.005, 0.07, 0.001, 0.02]  # later first, then nearer ones: the timer moves
    with anyio.fail_after(20):
        calls = [
            asyncio.create_task(kernel.call_tool("python://hang", {"limit": limit}, timeout=limit)) for limit in limits
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(outcome, ToolTimeoutError) for outcome in outcomes), outcomes
    assert sorted(seen) == sorted(limits)
    assert all(cut_at >= due for cut_at, due in seen.values())  # never early
    order = sorted(limits, key=lambda limit: seen[limit][0])
    # cut in the order of their deadlines (those due in the same loop turn may be cut in one go, by deadline)
    assert [seen[limit][1] for limit in order] == sorted(seen[limit][1] for limit in order)
    await kernel.close()


@pytest.mark.parametrize("limit", [sys.float_info.min, 5e-324])
async def test_a_deadline_already_due_on_the_loop_clock_cuts_before_the_tool_runs_again(limit: float) -> None:
    """Round 10, case 5: a timeout so small that the loop's clock plus it is the clock itself was armed as a timer
    the loop runs only after the tool's next step (a tool awaiting ``asyncio.sleep(0)`` once returned its result);
    as with ``asyncio.timeout``, such a deadline is due at once and cuts the tool at its first suspension."""

    @pythontool
    async def step() -> str:
        """Yield once, then answer."""
        await asyncio.sleep(0)
        return "finished"

    kernel = FunctionKernel()
    kernel.register_python_tool("step", step)
    with pytest.raises(ToolTimeoutError, match="python://step timed out"):
        await kernel.call_tool("python://step", {}, timeout=limit)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_an_ended_calls_deadline_ahead_of_a_hung_one_never_holds_its_cut_back() -> None:
    """The timer is armed again past the entries of calls that ended (dropped, not due yet): a hung call whose
    deadline comes after such an entry, and one set later that falls before both (on the heap, not in order), are
    each cut, never early."""
    seen: dict[float, tuple[float, float]] = {}

    @pythontool
    async def hold(limit: float) -> str:
        """Wait until cut, noting when the cut came and the deadline."""
        call = current_call()
        assert call is not None
        assert call.deadline is not None
        try:
            await asyncio.sleep(3600)
        finally:
            seen[limit] = (time.monotonic(), call.deadline)
        return "finished"

    kernel = FunctionKernel()
    kernel.register_python_tool("hold", hold)
    kernel.register_python_tool("quick", _quick)
    with anyio.fail_after(20):
        assert (await kernel.call_tool("python://quick", {}, timeout=0.05)).result == "ok"  # type: ignore[attr-defined]
        late = asyncio.create_task(kernel.call_tool("python://hold", {"limit": 0.09}, timeout=0.09))
        await asyncio.sleep(0)
        early = asyncio.create_task(kernel.call_tool("python://hold", {"limit": 0.01}, timeout=0.01))
        outcomes = await asyncio.gather(late, early, return_exceptions=True)
    assert all(isinstance(outcome, ToolTimeoutError) for outcome in outcomes), outcomes
    assert sorted(seen) == [0.01, 0.09]
    assert all(cut_at >= due for cut_at, due in seen.values())
    await kernel.close()


@pythontool
async def _quick() -> str:
    """Answer at once."""
    return "ok"
