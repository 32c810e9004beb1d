"""Hostile round 9 of issue 36 (``tests/kernel/hostile_cases_ninth.md``), the kernel's cases: odd limit values
(1-5), deadlines across tasks, threads and loops (11-16), what tools raise and swallow (17-24), and ``close()``
racing a callback from a thread, another loop, a second close and a fire-and-forget close (25-27, 33)."""

from __future__ import annotations

import asyncio
import enum
import fractions
import sys
import threading
import time
from collections.abc import Callable

import anyio
import numpy  # in every dev install (bm25s and wordllama need it): never a silent skip of this module
import pytest
from tests.adapters.test_threads import _until
from tests.kernel.test_ownership import in_second_loop, joined, wait_forever

from kavalai import FunctionKernel, pythontool
from kavalai.errors import DeadlineExceededError, KernelClosedError, ToolExecutionError, ToolTimeoutError
from kavalai.kernel import current_call, deadline


def _hanging() -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    return kernel


class _TextNumber(str):
    def __float__(self) -> float:
        return 0.05


class _One(enum.IntEnum):
    ONE = 1


# ---------------------------------------------------------------------------------------- 1-5: odd values


@pytest.mark.parametrize(
    ("value", "hint"), [(numpy.float32(0.05), r"float\(\.\.\.\)"), (numpy.int64(1), r"int\(\.\.\.\)")]
)
async def test_case_1_numpy_scalars_that_are_not_float_or_int_subclasses_are_refused(value: object, hint: str) -> None:
    kernel = _hanging()
    with pytest.raises(ValueError, match=hint) as info:
        await kernel.call_tool("python://wait", timeout=value)  # type: ignore[arg-type]
    assert "numpy" in str(info.value)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_2_a_fraction_is_refused_as_not_an_int_or_float() -> None:
    kernel = _hanging()
    with pytest.raises(ValueError, match="Fraction") as info:
        await kernel.call_tool("python://wait", timeout=fractions.Fraction(1, 20))  # type: ignore[arg-type]
    assert "must be positive" not in str(info.value)
    with pytest.raises(ValueError, match="Fraction"):
        deadline(fractions.Fraction(1, 2))  # type: ignore[arg-type]
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_3_a_str_subclass_with_a_float_hook_is_no_number() -> None:
    kernel = _hanging()
    given = _TextNumber("0.05")
    with pytest.raises(ValueError, match=r"'0\.05'"):
        await kernel.call_tool("python://wait", timeout=given)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'0\.05'"):
        deadline(given)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'0\.05'"):
        pythontool(timeout=given)(wait_forever)  # type: ignore[arg-type]
    await kernel.close()


async def test_case_4_an_int_enum_member_is_the_number_it_holds() -> None:
    kernel = _hanging()
    with pytest.raises(ToolTimeoutError, match=r"timed out after 1 s\.") as info:
        await kernel.call_tool("python://wait", timeout=_One.ONE)
    assert info.value.timeout == 1.0
    assert "ONE" not in str(info.value)
    await kernel.close()


async def test_case_5_start_tool_refuses_nan_itself() -> None:
    kernel = _hanging()
    with pytest.raises(ValueError, match="nan"):
        kernel.start_tool("python://wait", timeout=float("nan"))
    assert kernel.calls_in_flight() == []
    await kernel.close()


# ------------------------------------------------------------------- 11-16: across tasks, threads and loops


async def _in_thread_then_on(function: Callable[[], None]) -> None:
    """Run ``function`` in a worker thread, then wait on. The thread's call ends at the block's deadline too, on its
    own loop's timer: which of the two loops fires first is not ordered, so the body waits on past it and the
    block's cut is what ends it."""
    await asyncio.to_thread(function)
    await asyncio.sleep(10)


async def test_case_11_a_call_on_a_second_loop_in_a_thread_keeps_the_blocks_deadline() -> None:
    kernel = _hanging()
    outcome: list[BaseException | None] = []

    def second_loop() -> None:
        try:
            asyncio.run(kernel.call_tool("python://wait"))  # type: ignore[arg-type]
        except BaseException as exc:  # the test inspects it
            outcome.append(exc)
        else:
            outcome.append(None)

    with anyio.fail_after(20):
        with pytest.raises(ToolTimeoutError), deadline(0.1):  # the block's own cut of the awaiting task
            await _in_thread_then_on(second_loop)  # the thread gets a copy of the context, the block in it
        await _until(lambda: outcome)
    [ended] = outcome
    assert isinstance(ended, ToolTimeoutError), repr(ended)
    assert ended.uri == "python://wait"
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_12_a_child_task_that_outlives_its_block_is_cut_at_the_blocks_deadline() -> None:
    kernel = _hanging()
    go = asyncio.Event()

    async def child() -> object:
        await go.wait()
        return await kernel.call_tool("python://wait")

    with deadline(0.05):
        task = asyncio.create_task(child())
    go.set()
    with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
        await task
    await asyncio.sleep(0.1)  # the parent is never cancelled by the block later
    assert kernel.calls_in_flight() == []
    await kernel.close()


def test_case_13_a_block_entered_with_no_running_loop_cuts_or_refuses() -> None:
    kernel = _hanging()
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            with deadline(0.05):
                asyncio.run(kernel.call_tool("python://wait"))  # type: ignore[arg-type]
        except BaseException as exc:  # the test inspects it
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "a deadline entered with no loop never cut its call"
    [ended] = outcome
    assert isinstance(ended, ToolTimeoutError | RuntimeError | DeadlineExceededError), repr(ended)
    assert kernel.calls_in_flight() == []
    asyncio.run(kernel.close())


async def _none_inside(kernel: FunctionKernel, how: str) -> None:
    with deadline(0.05):
        if how == "block of None":
            with deadline(None):
                await kernel.call_tool("python://wait")
        else:
            await kernel.call_tool("python://wait", timeout=None)


@pytest.mark.parametrize("how", ["block of None", "timeout=None"])
async def test_case_14_none_never_lifts_the_deadline_around(how: str) -> None:
    kernel = _hanging()
    with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
        await _none_inside(kernel, how)
    await kernel.close()


async def test_case_15_a_shielded_call_inside_a_block_is_cut_at_its_deadline() -> None:
    kernel = _hanging()
    made: list[asyncio.Future[object]] = []

    async def shielded_call() -> None:
        with deadline(0.05):
            inner = asyncio.ensure_future(kernel.call_tool("python://wait"))  # its own task, the context copied
            made.append(inner)
            await asyncio.shield(inner)

    with anyio.fail_after(20):
        with pytest.raises(DeadlineExceededError):
            await shielded_call()
        with pytest.raises(ToolTimeoutError):
            await made[0]
    assert kernel.calls_in_flight() == []
    await kernel.close()


@pytest.mark.parametrize("seconds", [0.09, 1.0])  # a short deadline's own entry, a slot of the loop's timer wheel
async def test_case_15_a_call_in_another_task_waits_in_its_blocks_own_timer_entry(seconds: float) -> None:
    # Cut in one callback with the block it inherits from: with a timer of its own, due a rounding earlier, the call
    # could end and its ToolTimeoutError reach the block through the shield before the block's own cut (CI, 3.11).
    started: list[object] = []

    @pythontool
    async def hold() -> str:
        """Hold until cut."""
        started.append(current_call())
        await asyncio.sleep(30)
        return "late"

    kernel = FunctionKernel()
    kernel.register_python_tool("hold", hold)
    made: list[asyncio.Future[object]] = []

    async def held_in_block() -> None:
        with deadline(seconds) as block:
            made.append(asyncio.ensure_future(kernel.call_tool("python://hold")))
            await _until(lambda: started)
            assert started[0]._timer is block._timer is not None  # type: ignore[attr-defined]
            await asyncio.shield(made[0])

    with anyio.fail_after(20):
        with pytest.raises(DeadlineExceededError):
            await held_in_block()
        with pytest.raises(ToolTimeoutError, match="python://hold"):
            await made[0]
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def _grouped_in_block(kernel: FunctionKernel) -> None:
    with deadline(0.05):
        async with asyncio.TaskGroup() as group:
            for _ in range(3):
                group.create_task(kernel.call_tool("python://wait"))


async def test_case_16_a_block_around_a_task_group_of_hung_calls() -> None:
    kernel = _hanging()
    with anyio.fail_after(20), pytest.raises((DeadlineExceededError, ExceptionGroup)) as info:
        await _grouped_in_block(kernel)
    if isinstance(info.value, ExceptionGroup):
        assert all(isinstance(each, ToolTimeoutError) for each in info.value.exceptions), info.value
    assert kernel.calls_in_flight() == []
    await kernel.close()


# --------------------------------------------------------------------- 17-24: what tools raise and swallow


@pytest.mark.parametrize("raised", [KeyboardInterrupt(), SystemExit(3)], ids=type)
async def test_case_17_18_an_async_tool_raising_an_exit_fails_only_its_call(raised: BaseException) -> None:
    # Both went out of call_tool as they were, and asyncio re-raised them out of the event loop: a tool's
    # sys.exit() ended the program (a `kavalai serve` gateway with it), as a sync tool's in its thread does not.
    @pythontool
    async def leave() -> str:
        """Raise what the test gives."""
        raise raised

    kernel = FunctionKernel()
    kernel.register_python_tool("leave", leave)
    with pytest.raises(ToolExecutionError) as info:
        await kernel.call_tool("python://leave")
    assert info.value.uri == "python://leave"
    assert info.value.__cause__ is raised
    assert kernel.calls_in_flight() == []
    await asyncio.sleep(0)  # the loop goes on
    await kernel.close()


async def test_case_19_generator_exit_from_a_tool_goes_through_as_a_closed_coroutine_needs() -> None:
    # Kept, not changed (the case read strictly broke): GeneratorExit is how Python closes a suspended coroutine
    # (coroutine.close() throws it into the innermost await, a tool's), so a call lets it through; nothing stays.
    @pythontool
    async def leave() -> str:
        """Raise GeneratorExit."""
        raise GeneratorExit

    kernel = FunctionKernel()
    kernel.register_python_tool("leave", leave)
    with pytest.raises(GeneratorExit):
        await kernel.call_tool("python://leave")
    assert kernel.calls_in_flight() == []
    await asyncio.sleep(0)
    await kernel.close()


async def test_case_20_an_inline_sync_tool_calling_sys_exit_fails_its_call() -> None:
    @pythontool(inline=True)
    def leave() -> str:
        """Exit."""
        sys.exit(2)

    kernel = FunctionKernel()
    kernel.register_python_tool("leave", leave)
    with pytest.raises(ToolExecutionError) as info:
        await kernel.call_tool("python://leave")
    assert info.value.uri == "python://leave"
    await asyncio.sleep(0)
    await kernel.close()


@pythontool
async def grouped(fail: bool) -> str:
    """A task group: one child fails (or hangs) while another hangs."""

    async def bad() -> None:
        if fail:
            raise ValueError("child failed")
        await asyncio.Event().wait()

    async with asyncio.TaskGroup() as group:
        group.create_task(bad())
        group.create_task(asyncio.Event().wait())
    return "never"


async def test_case_21_a_task_group_failing_inside_a_tool() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("grouped", grouped)
    with anyio.fail_after(20), pytest.raises(ToolExecutionError) as info:
        await kernel.call_tool("python://grouped", {"fail": True})
    assert info.value.uri == "python://grouped"
    assert isinstance(info.value.__cause__, ExceptionGroup), repr(info.value.__cause__)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_22_a_task_group_cut_by_its_timeout() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("grouped", grouped)
    with anyio.fail_after(20), pytest.raises(ToolTimeoutError) as info:
        await kernel.call_tool("python://grouped", {"fail": False}, timeout=0.05)
    assert info.value.uri == "python://grouped"
    assert kernel.calls_in_flight() == []
    await kernel.close()


@pythontool
async def swallow() -> str:
    """Swallow the first cancellation and return late."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.sleep(0.01)
        return "late"
    return "slept"


async def test_case_23_a_cancelled_caller_whose_tool_swallows_the_cancellation() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("swallow", swallow)
    task = asyncio.create_task(kernel.call_tool("python://swallow"))
    await _until(lambda: len(kernel.calls_in_flight()) == 1)
    await asyncio.sleep(0.01)
    task.cancel()
    with anyio.fail_after(20), pytest.raises(asyncio.CancelledError):
        await task
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_24_a_swallowing_tool_cut_by_its_timeout() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("swallow", swallow)
    with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
        await kernel.call_tool("python://swallow", timeout=0.05)
    assert kernel.calls_in_flight() == []
    await kernel.close()


# ------------------------------------------------------------------------------------- 25-27, 33: close()


async def test_case_25_close_while_a_sync_tool_calls_back_into_the_kernel() -> None:
    kernel = _hanging()
    loop = asyncio.get_running_loop()
    release = threading.Event()
    entered: list[str] = []

    @pythontool
    def outer() -> str:
        """Call the hung tool from this worker thread, then wait to be let go."""
        entered.append("in")
        try:
            asyncio.run_coroutine_threadsafe(kernel.call_tool("python://wait"), loop).result(timeout=30)
        except BaseException as exc:  # the cut's error reaches the thread
            entered.append(type(exc).__name__)
        release.wait(timeout=30)
        return "outer"

    kernel.register_python_tool("outer", outer)
    task = asyncio.create_task(kernel.call_tool("python://outer"))
    await _until(lambda: len(kernel.calls_in_flight()) == 2)
    try:
        with anyio.fail_after(20):
            await kernel.close()
            with pytest.raises(KernelClosedError) as info:
                await task
        assert info.value.uri == "python://outer"
        assert kernel.calls_in_flight() == []
    finally:
        release.set()
    await _until(lambda: kernel.threads_in_flight() == [])
    assert entered[:2] == ["in", "KernelClosedError"], entered
    await kernel.close()


async def test_case_26_close_run_on_another_loop_in_another_thread() -> None:
    kernel = _hanging()
    tasks = [asyncio.create_task(kernel.call_tool("python://wait")) for _ in range(10)]
    await _until(lambda: len(kernel.calls_in_flight()) == 10)
    thread, outcome = in_second_loop(kernel.close())
    with anyio.fail_after(20):
        await joined(thread)
        ended = await asyncio.gather(*tasks, return_exceptions=True)
    assert outcome == [None], outcome
    assert all(isinstance(each, KernelClosedError) for each in ended), ended
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_27_two_closes_at_once_return_only_when_the_calls_have_ended() -> None:
    never: list[str] = []

    @pythontool
    async def slow_to_end() -> str:
        """Hang; once cut, take 0.2 s to end."""
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(asyncio.sleep(0.2))
        never.append("returned")
        return "never"

    kernel = FunctionKernel()
    kernel.register_python_tool("slow_to_end", slow_to_end)
    tasks = [asyncio.create_task(kernel.call_tool("python://slow_to_end")) for _ in range(10)]
    await _until(lambda: len(kernel.calls_in_flight()) == 10)
    in_flight_when_returned: list[int] = []

    async def close() -> None:
        await kernel.close()
        in_flight_when_returned.append(len(kernel.calls_in_flight()))

    with anyio.fail_after(20):
        await asyncio.gather(close(), close())
        ended = await asyncio.gather(*tasks, return_exceptions=True)
    assert in_flight_when_returned == [0, 0]
    assert all(isinstance(each, KernelClosedError) for each in ended), ended
    assert never == []
    await kernel.close()


async def test_case_33_a_fire_and_forget_close_from_a_sync_tools_thread() -> None:
    kernel = _hanging()
    loop = asyncio.get_running_loop()
    scheduled: list[asyncio.Future[None]] = []

    @pythontool
    def closer() -> str:
        """Schedule the kernel's close() on the loop and return at once."""
        loop.call_soon_threadsafe(lambda: scheduled.append(asyncio.ensure_future(kernel.close())))
        time.sleep(0.1)
        return "closer"

    kernel.register_python_tool("closer", closer)
    hung = [asyncio.create_task(kernel.call_tool("python://wait")) for _ in range(5)]
    await _until(lambda: len(kernel.calls_in_flight()) == 5)
    with anyio.fail_after(20):
        reply = await kernel.call_tool("python://closer")
        ended = await asyncio.gather(*hung, return_exceptions=True)
        await scheduled[0]
    assert reply.result == "closer"  # type: ignore[attr-defined]
    assert all(isinstance(each, KernelClosedError) for each in ended), ended
    assert kernel.calls_in_flight() == []
    await kernel.close()
