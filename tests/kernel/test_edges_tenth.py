"""Hostile round 10 of issue 36 (``tests/kernel/hostile_cases_tenth.md``), the kernel's cases that held: odd limit
values (1, 3, 4, 6, 7), sync-code deadline blocks (11), a block's clock is not paused (14), and ``close()`` from
a worker thread's nested call, from two other loops at once, and from the tool being closed (18-20). Case 5 (a
deadline below the clock's step) is in ``test_short_deadlines.py``, cases 9-10 in ``test_deadline_outside_task.py``,
case 12 in ``test_loop_release.py``."""

from __future__ import annotations

import array
import asyncio
import threading
import time

import anyio
import pytest
from tests.adapters.test_threads import _until
from tests.kernel.test_ownership import wait_forever

from kavalai import FunctionKernel, pythontool
from kavalai.errors import DeadlineExceededError, KernelClosedError, ToolTimeoutError
from kavalai.kernel import MAX_SECONDS, current_call, deadline, deadline_paused

pytestmark = pytest.mark.anyio


@pythontool
async def quick() -> str:
    """Answer at once."""
    return "ok"


def _kernel() -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    kernel.register_python_tool("quick", quick)
    return kernel


class _Unhashable(float):
    def __hash__(self) -> int:
        raise RuntimeError("no hash")


async def test_case_1_numbers_indexed_from_buffers_are_plain_numbers() -> None:
    kernel = _kernel()
    with pytest.raises(ToolTimeoutError, match="timed out after 0.05 s"):
        await kernel.call_tool("python://wait", {}, timeout=array.array("d", [0.05])[0])
    result = await kernel.call_tool("python://quick", {}, timeout=memoryview(b"\x05")[0])
    assert result.result == "ok"  # type: ignore[attr-defined]
    await kernel.close()


async def test_case_3_a_complex_number_is_refused_as_not_seconds() -> None:
    kernel = _kernel()
    with pytest.raises(ValueError, match=r"must be a number of seconds \(an int or a float\)"):
        await kernel.call_tool("python://quick", {}, timeout=complex(0.05, 0))
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_4_an_integer_past_a_float_is_clamped_in_a_block() -> None:
    kernel = _kernel()
    with deadline(2**1100) as block:
        result = await kernel.call_tool("python://quick", {})
        assert result.result == "ok"  # type: ignore[attr-defined]
        left = block.remaining()
    assert left is not None
    assert 0 < left <= MAX_SECONDS
    await kernel.close()


@pytest.mark.parametrize("limit", [0.1, 0.0999999])
async def test_case_6_the_exact_timer_boundary_never_cuts_early(limit: float) -> None:
    seen: list[bool] = []

    @pythontool
    async def watch() -> str:
        """Wait until cut; on the way out, note whether the cut came at or after the call's deadline."""
        due = (current_call() or pytest.fail("no call")).deadline or 0.0
        try:
            await asyncio.sleep(3600)
        finally:
            seen.append(time.monotonic() >= due)
        return "finished"

    kernel = FunctionKernel()
    kernel.register_python_tool("watch", watch)
    with pytest.raises(ToolTimeoutError):
        await kernel.call_tool("python://watch", {}, timeout=limit)
    assert seen == [True]
    await kernel.close()


async def test_case_7_a_float_subclass_that_cannot_be_hashed_is_its_number() -> None:
    kernel = _kernel()
    with pytest.raises(ToolTimeoutError, match="timed out after 0.05 s"):
        await kernel.call_tool("python://wait", {}, timeout=_Unhashable(0.05))
    await kernel.close()


def test_case_11_a_sync_block_refuses_a_later_run_once_its_deadline_passed() -> None:
    kernel = _kernel()
    with deadline(0.05, what="batch"):
        asyncio.run(asyncio.sleep(0.1))
        with pytest.raises(ToolTimeoutError, match="was not started: the deadline of the batch"):
            asyncio.run(kernel.call_tool("python://quick", {}))


async def test_case_14_a_block_has_no_own_clock_to_pause() -> None:
    async def body() -> None:
        async with deadline(0.05):
            with deadline_paused():
                await asyncio.sleep(0.2)

    with anyio.fail_after(10), pytest.raises(DeadlineExceededError):
        await body()


async def test_case_18_a_nested_call_from_a_worker_thread_ends_with_close_naming_the_outer_uri() -> None:
    kernel = _kernel()
    loop = asyncio.get_running_loop()

    @pythontool
    def outer() -> str:
        """Call the hung tool back on the loop and wait for it."""
        return str(asyncio.run_coroutine_threadsafe(kernel.call_tool("python://wait", {}), loop).result())

    kernel.register_python_tool("outer", outer)
    with anyio.fail_after(10):
        call = asyncio.create_task(kernel.call_tool("python://outer", {}))
        await _until(lambda: len(kernel.calls_in_flight()) == 2)
        await kernel.close()
        with pytest.raises(KernelClosedError, match="python://outer was running") as raised:
            await call
    assert raised.value.uri == "python://outer"


async def test_case_19_two_closes_from_two_other_loops_at_once_cut_every_call() -> None:
    kernel = _kernel()
    with anyio.fail_after(20):
        calls = [asyncio.create_task(kernel.call_tool("python://wait", {})) for _ in range(5)]
        await _until(lambda: len(kernel.calls_in_flight()) == 5)
        await asyncio.gather(*(asyncio.to_thread(asyncio.run, kernel.close()) for _ in range(2)))
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(outcome, KernelClosedError) for outcome in outcomes), outcomes
    assert kernel.calls_in_flight() == []


async def test_case_20_a_sync_tool_waiting_for_its_own_kernels_close_is_left_to_finish() -> None:
    kernel = _kernel()
    loop = asyncio.get_running_loop()

    @pythontool
    def closer() -> str:
        """Close the kernel from the worker thread and wait for the close to return."""
        asyncio.run_coroutine_threadsafe(kernel.close(), loop).result(10)
        return f"returned in {threading.current_thread().name}"

    kernel.register_python_tool("closer", closer)
    with anyio.fail_after(15):
        result = await kernel.call_tool("python://closer", {})
    assert result.result.startswith("returned")  # type: ignore[attr-defined]
