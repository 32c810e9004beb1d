"""Deadlines and ``close()`` at their edges, eighth session: the items left by the seventh (a call kept waiting for
a thread names who holds the turns; timeouts shorter than a timer slot) and the hostile cases of
``tests/kernel/hostile_cases_eighth.md``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import decimal
import inspect
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

import anyio
import psutil
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.adapters.test_threads import _until
from tests.kernel.test_ownership import deadline_server, wait_forever
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, RestServer, pythontool
from kavalai.adapters import _threads
from kavalai.agent import Agent
from kavalai.errors import DeadlineExceededError, FunctionKernelException, KernelClosedError, ToolTimeoutError
from kavalai.kernel import current_call, deadline, deadline_paused
from kavalai.testing import ScriptedLLM


async def test_a_call_kept_waiting_for_a_thread_logs_the_uris_holding_the_turns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The seventh session's line said only that all 40 turns were busy: a loop whose turns were all held by hung,
    # cut calls of one tool did not say which tool to look at.
    monkeypatch.setattr(_threads, "WAIT_WARNING", 0.05)
    release = threading.Event()
    running: list[str] = []

    @pythontool
    def hang() -> str:
        """Hang until the test lets go."""
        running.append("running")
        release.wait(timeout=30)
        return "late"

    @pythontool
    def quick() -> str:
        """Answer."""
        return "quick"

    kernel = FunctionKernel()
    kernel.register_python_tool("hang", hang)
    kernel.register_python_tool("quick", quick)
    loop = asyncio.get_running_loop()
    try:
        cut = [asyncio.create_task(kernel.call_tool("python://hang")) for _ in range(_threads.MAX_THREADS)]
        # each in its thread before any is cut: a call cut while still queued for one never starts, and gives its
        # turn back (a timeout would cut the calls whose thread a loaded machine had not started yet)
        await _until(lambda: len(running) == _threads.MAX_THREADS, timeout=30)
        for task in cut:
            task.cancel()
        for task in cut:
            with pytest.raises(asyncio.CancelledError):
                await task
        assert len(kernel.threads_in_flight()) == _threads.MAX_THREADS
        with caplog.at_level(logging.WARNING, logger="kavalai.threads"):
            waiting = asyncio.create_task(kernel.call_tool("python://quick"))
            await _until(lambda: any(record.name == "kavalai.threads" for record in caplog.records))
    finally:
        release.set()
    assert (await waiting).result == "quick"  # type: ignore[attr-defined]
    [told] = [record.getMessage() for record in caplog.records if record.name == "kavalai.threads"]
    assert f"python://hang x{_threads.MAX_THREADS}" in told
    assert "by calls running: none" in told
    await _until(lambda: _threads._turns[loop].free == _threads.MAX_THREADS)
    assert _threads._turns[loop].holders == {}
    await kernel.close()


@pytest.mark.parametrize("how", ["own timeout", "deadline block"])
async def test_a_deadline_shorter_than_a_timer_slot_cuts_a_call_that_takes_longer(how: str) -> None:
    # The seventh session's leftover: deadlines share 4 ms timer slots, so a call with a timeout of 1 ms whose
    # tool took 3 ms finished about half the time (its slot ended after the tool did). A deadline under 0.1 s now
    # has a loop timer of its own, at the deadline: a 3 ms sleep is cut every time, and never before the deadline.
    seen: list[tuple[float, float]] = []

    @pythontool
    async def nap() -> str:
        """Take 3 ms."""
        try:
            await asyncio.sleep(0.003)
        except asyncio.CancelledError:
            call = current_call()
            assert call is not None
            assert call.deadline is not None
            seen.append((time.monotonic(), call.deadline))
            raise
        return "finished"

    kernel = FunctionKernel()
    kernel.register_python_tool("nap", nap)
    finished = not_started = 0
    for _ in range(30):
        try:
            if how == "own timeout":
                await kernel.call_tool("python://nap", timeout=0.001)
            else:
                with deadline(0.001):
                    await kernel.call_tool("python://nap")
        except ToolTimeoutError as exc:
            not_started += "was not started" in str(exc)  # the block's 1 ms passed before the call began (load)
        else:
            finished += 1
    assert finished == 0
    assert len(seen) + not_started == 30
    assert all(cut_at >= due for cut_at, due in seen)  # never early
    await kernel.close()


# Hostile round 8 (tests/kernel/hostile_cases_eighth.md), the kernel's cases: 1-9, 22, 23, 25.


async def _settled(attempt: Callable[[], object]) -> None:
    made = attempt()
    if inspect.isawaitable(made):
        await made


async def _hanging_kernel() -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    return kernel


async def test_case_1_a_numpy_float64_timeout_is_the_number_it_holds() -> None:
    numpy = pytest.importorskip("numpy")
    kernel = await _hanging_kernel()
    with pytest.raises(ToolTimeoutError, match=r"timed out after 0\.05 s") as info:
        await kernel.call_tool("python://wait", timeout=numpy.float64(0.05))
    assert info.value.uri == "python://wait"
    await kernel.close()


async def test_case_2_3_a_timedelta_is_refused_as_not_a_number_of_seconds() -> None:
    kernel = await _hanging_kernel()
    given = datetime.timedelta(seconds=1)
    for attempt in (
        lambda: kernel.call_tool("python://wait", timeout=given),  # type: ignore[arg-type]
        lambda: deadline(given),  # type: ignore[arg-type]
        lambda: pythontool(timeout=given)(wait_forever),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match=r"number of seconds") as info:
            await _settled(attempt)
        assert "timedelta(seconds=1)" in str(info.value)
        assert "must be positive" not in str(info.value)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_4_a_decimal_is_refused_before_anything_runs() -> None:
    kernel = await _hanging_kernel()
    for attempt in (
        lambda: kernel.call_tool("python://wait", timeout=decimal.Decimal("0.5")),  # type: ignore[arg-type]
        lambda: kernel.start_tool("python://wait", timeout=decimal.Decimal("0.5")),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match=r"give int\(\.\.\.\) or float\(\.\.\.\)"):
            await _settled(attempt)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_5_negative_zero_is_no_timeout_but_a_passed_deadline() -> None:
    ran: list[str] = []

    @pythontool
    async def effect() -> str:
        """Record that it ran."""
        ran.append("ran")
        return "done"

    kernel = FunctionKernel()
    kernel.register_python_tool("effect", effect)
    with pytest.raises(ValueError, match=r"got -0\.0"):
        await kernel.call_tool("python://effect", timeout=-0.0)
    with deadline(-0.0), pytest.raises(ToolTimeoutError, match="was not started"):
        await kernel.call_tool("python://effect")
    assert ran == []
    await kernel.close()


async def test_case_6_the_smallest_subnormal_timeout_cuts_at_once() -> None:
    @pythontool
    async def nap() -> str:
        """Take 10 ms."""
        await asyncio.sleep(0.01)
        return "slept"

    kernel = FunctionKernel()
    kernel.register_python_tool("nap", nap)
    with pytest.raises(ToolTimeoutError, match="timed out after"):
        await kernel.call_tool("python://nap", timeout=5e-324)
    assert kernel.calls_in_flight() == []
    await kernel.close()


class _Hostile(float):
    def __float__(self) -> float:
        raise RuntimeError("__float__ of a hostile float")

    def __gt__(self, other: object) -> bool:
        raise RuntimeError("__gt__ of a hostile float")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ of a hostile float")


class _NotANumber:
    def __float__(self) -> float:
        raise RuntimeError("__float__ of an object")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ of an object")


async def test_case_7_a_float_whose_hooks_raise_is_read_as_the_number_it_holds() -> None:
    kernel = await _hanging_kernel()
    with pytest.raises(ToolTimeoutError, match=r"timed out after 0\.05 s"):
        await kernel.call_tool("python://wait", timeout=_Hostile(0.05))
    await kernel.close()


async def test_case_8_an_object_whose_hooks_raise_is_refused_naming_its_class() -> None:
    kernel = await _hanging_kernel()
    with pytest.raises(ValueError, match="a _NotANumber"):
        await kernel.call_tool("python://wait", timeout=_NotANumber())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a _NotANumber"):
        deadline(_NotANumber())  # type: ignore[arg-type]
    await kernel.close()


async def test_case_9_true_is_not_one_second_anywhere() -> None:
    kernel = await _hanging_kernel()
    with pytest.raises(ValueError, match="got True"):
        await kernel.call_tool("python://wait", timeout=True)
    with pytest.raises(ValueError, match="got True"):
        deadline(True)
    with pytest.raises(ValueError, match="got True"):
        await Agent(ScriptedLLM(["never"]), kernel=kernel).run("hi", timeout=True)
    await kernel.close()


async def test_case_22_close_scheduled_by_a_signal_handler_ends_every_call() -> None:
    kernel = await _hanging_kernel()
    loop = asyncio.get_running_loop()
    calls = [asyncio.create_task(kernel.call_tool("python://wait")) for _ in range(20)]
    await _until(lambda: len(kernel.calls_in_flight()) == 20)
    closing: list[asyncio.Task[None]] = []
    loop.add_signal_handler(signal.SIGUSR1, lambda: closing.append(asyncio.ensure_future(kernel.close())))
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await _until(lambda: bool(closing))
        await closing[0]
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    errors = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(error, KernelClosedError) for error in errors), errors
    assert kernel.calls_in_flight() == []


async def test_case_23_close_twice_from_two_threads_and_the_loop_at_once() -> None:
    release = threading.Event()

    running: list[str] = []

    @pythontool
    def stuck() -> str:
        """Block a thread until the test lets go."""
        running.append("running")
        release.wait(timeout=30)
        return "late"

    kernel = await _hanging_kernel()
    kernel.register_python_tool("stuck", stuck)
    loop = asyncio.get_running_loop()
    calls = [
        asyncio.create_task(kernel.call_tool("python://wait" if index % 2 else "python://stuck")) for index in range(50)
    ]
    await _until(lambda: len(kernel.calls_in_flight()) == 50 and len(running) == 25)  # each in its thread
    closers: list[concurrent.futures.Future[None]] = []

    def from_thread() -> None:
        closers.append(asyncio.run_coroutine_threadsafe(kernel.close(), loop))

    threads = [threading.Thread(target=from_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        on_loop = asyncio.create_task(kernel.close())
        for thread in threads:
            thread.join()
        await asyncio.gather(on_loop, *(asyncio.wrap_future(closer) for closer in closers))
        errors = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(error, KernelClosedError) for error in errors), errors
        assert kernel.calls_in_flight() == []
        assert {call.uri for call in kernel.threads_in_flight()} == {"python://stuck"}
    finally:
        release.set()
    await _until(lambda: kernel.threads_in_flight() == [])


async def test_case_25_a_tool_that_closes_its_kernel_then_calls_it_again() -> None:
    kernel = FunctionKernel()

    @pythontool
    async def other() -> str:
        """Answer."""
        return "other"

    @pythontool
    async def closer() -> str:
        """Close the kernel, then call another tool of it."""
        await kernel.close()
        reply = await kernel.call_tool("python://other")
        return f"after close: {reply.result}"  # type: ignore[attr-defined]

    kernel.register_python_tool("other", other)
    kernel.register_python_tool("closer", closer)
    with anyio.fail_after(30):
        try:
            outcome = (await kernel.call_tool("python://closer")).result  # type: ignore[attr-defined]
        except FunctionKernelException as exc:
            assert exc.uri == "python://closer"
            outcome = str(exc)
    assert outcome == "after close: other" or "closed" in outcome, outcome
    assert kernel.calls_in_flight() == []
    await kernel.close()


def _server_children() -> set[int]:
    return {
        child.pid
        for child in psutil.Process().children(recursive=True)
        if child.cmdline()[1:3] == ["-m", "tests.servers.mcp_deadline"]  # the server, not the shim starting it
    }


async def test_case_24_reconnect_after_close_while_calls_race() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server())
    try:
        assert (await kernel.call_tool("mcp://d.echo", {"text": "a"})).result == "a"  # type: ignore[attr-defined]
        first = _server_children()
        old = [asyncio.create_task(kernel.call_tool("mcp://d.sleep", {"seconds": 30})) for _ in range(20)]
        await _until(lambda: len(kernel.calls_in_flight()) == 20)
        closing = asyncio.create_task(kernel.close())
        new: list[asyncio.Task[object]] = []
        while not closing.done():  # new calls start at every turn while close() runs, and as it returns
            new.append(asyncio.create_task(kernel.call_tool("mcp://d.echo", {"text": "b"})))
            await asyncio.sleep(0)
        new += [asyncio.create_task(kernel.call_tool("mcp://d.echo", {"text": "b"})) for _ in range(20)]
        with anyio.fail_after(60):
            old_errors = await asyncio.gather(*old, return_exceptions=True)
            outcomes = await asyncio.gather(*new, return_exceptions=True)
        assert all(isinstance(error, KernelClosedError) for error in old_errors), old_errors
        refused = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert all(isinstance(error, KernelClosedError) for error in refused), refused
        answered = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
        assert len(answered) >= 20
        assert {reply.result for reply in answered} == {"b"}  # type: ignore[attr-defined]
        started = _server_children() - first
        assert len(started) == 1, started
    finally:
        await kernel.close()


# The second list (26-40), the kernel's cases.


async def test_case_26_a_short_timeout_on_an_mcp_call_and_the_connection_goes_on() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server())
    try:
        await kernel.connect()
        servers = _server_children()
        with anyio.fail_after(20), pytest.raises(ToolTimeoutError) as info:
            await kernel.call_tool("mcp://d.sleep", {"seconds": 30}, timeout=0.05)
        assert info.value.uri == "mcp://d.sleep"
        assert (await kernel.call_tool("mcp://d.echo", {"text": "on"})).result == "on"  # type: ignore[attr-defined]
        assert _server_children() == servers
    finally:
        await kernel.close()


async def test_case_27_a_short_timeout_on_a_rest_call_and_the_session_goes_on() -> None:
    async def slow(request: Request) -> JSONResponse:
        await asyncio.sleep(2)
        return JSONResponse({"late": True})

    async def fast(request: Request) -> JSONResponse:
        return JSONResponse({"fast": True})

    app = Starlette(routes=[Route("/slow", slow), Route("/fast", fast)])
    with serve(app) as url:
        kernel = FunctionKernel()
        kernel.register_rest_server(RestServer(name="s", url=url))
        kernel.register_rest_tool("s", "slow", "GET", path="/slow", timeout=0.02)
        kernel.register_rest_tool("s", "fast", "GET", path="/fast")
        try:
            with pytest.raises(ToolTimeoutError) as info:
                await kernel.call_tool("rest://s.slow")
            assert info.value.uri == "rest://s.slow"
            assert (await kernel.call_tool("rest://s.fast")).result == {"fast": True}  # type: ignore[attr-defined]
        finally:
            await kernel.close()


async def test_case_28_a_background_call_with_a_short_timeout() -> None:
    kernel = await _hanging_kernel()
    handle = kernel.start_tool("python://wait", timeout=0.01)
    with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
        await handle.result()
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_29_a_paused_short_timeout_is_paused_and_runs_on_after() -> None:
    @pythontool
    async def ask(after: float) -> str:
        """Wait 0.2 s for a person, then work for ``after`` seconds."""
        with deadline_paused():
            await asyncio.sleep(0.2)
        await asyncio.sleep(after)
        return "answered"

    kernel = FunctionKernel()
    kernel.register_python_tool("ask", ask)
    assert (await kernel.call_tool("python://ask", {"after": 0}, timeout=0.05)).result == "answered"  # type: ignore[attr-defined]
    with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
        await kernel.call_tool("python://ask", {"after": 1}, timeout=0.05)
    await kernel.close()


async def test_case_30_a_short_declared_timeout_of_a_blocking_sync_tool() -> None:
    release = threading.Event()

    @pythontool(timeout=0.01)
    def block() -> str:
        """Block a thread for up to 0.3 s."""
        release.wait(timeout=0.3)
        return "done"

    kernel = FunctionKernel()
    kernel.register_python_tool("block", block)
    with pytest.raises(ToolTimeoutError, match=r"timed out after 0\.01 s"):
        await kernel.call_tool("python://block")
    assert [call.uri for call in kernel.threads_in_flight()] == ["python://block"]
    release.set()
    await _until(lambda: kernel.threads_in_flight() == [])
    await kernel.close()


async def test_case_31_an_outer_short_timeout_names_the_outer_call() -> None:
    kernel = await _hanging_kernel()

    @pythontool
    async def outer() -> str:
        """Call the hung tool with a long timeout of its own."""
        return str((await kernel.call_tool("python://wait", timeout=10)).result)  # type: ignore[attr-defined]

    kernel.register_python_tool("outer", outer)
    with anyio.fail_after(20), pytest.raises(FunctionKernelException) as info:
        await kernel.call_tool("python://outer", timeout=0.05)
    assert info.value.uri == "python://outer"
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_32_a_child_task_inside_a_block_inherits_its_deadline() -> None:
    kernel = await _hanging_kernel()
    with anyio.fail_after(20):
        with deadline(0.05):
            child = asyncio.create_task(kernel.call_tool("python://wait"))
        with pytest.raises(ToolTimeoutError, match="cut at the deadline of the block"):
            await child
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_33_the_callers_own_asyncio_timeout_is_its_own() -> None:
    kernel = await _hanging_kernel()
    with pytest.raises(TimeoutError) as info:
        async with asyncio.timeout(0.05):
            await kernel.call_tool("python://wait", timeout=10)
    assert not isinstance(info.value, ToolTimeoutError)
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_34_a_short_block_around_a_plain_sleep() -> None:
    block = deadline(0.05)
    with anyio.fail_after(20), pytest.raises(DeadlineExceededError):
        async with block:
            await asyncio.sleep(1)
    assert block.expired


@pytest.mark.parametrize(("outer", "inner", "cut"), [(10, 0.05, "inner"), (0.05, 10, "outer")])
async def test_case_35_nested_blocks_cut_at_the_nearer_and_name_it(outer: float, inner: float, cut: str) -> None:
    kernel = await _hanging_kernel()
    with anyio.fail_after(20):
        try:
            with deadline(outer, what="outer"), deadline(inner, what="inner"):
                await kernel.call_tool("python://wait")
        except (ToolTimeoutError, DeadlineExceededError) as exc:
            error: BaseException = exc
    assert isinstance(error, ToolTimeoutError), repr(error)  # the call's cut, caught by neither block's own rule
    assert f"deadline of the {cut} around it" in str(error), str(error)
    await kernel.close()


async def test_case_36_a_background_call_right_after_close_runs() -> None:
    @pythontool
    async def quick() -> str:
        """Answer."""
        return "quick"

    kernel = FunctionKernel()
    kernel.register_python_tool("quick", quick)
    await kernel.close()
    assert (await kernel.start_tool("python://quick").result()).result == "quick"  # type: ignore[attr-defined]
    await kernel.close()


# The third list (41-48), the kernel's cases (48 is the agent's: tests/agent/test_deadline_edges_eighth.py).


async def test_case_41_close_scheduled_by_a_plain_signal_handler() -> None:
    kernel = await _hanging_kernel()
    calls = [asyncio.create_task(kernel.call_tool("python://wait")) for _ in range(10)]
    await _until(lambda: len(kernel.calls_in_flight()) == 10)
    closing: list[asyncio.Future[None]] = []
    previous = signal.signal(signal.SIGUSR2, lambda *_: closing.append(asyncio.ensure_future(kernel.close())))
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        await _until(lambda: bool(closing))
        with anyio.fail_after(20):
            await closing[0]
    finally:
        signal.signal(signal.SIGUSR2, previous)
    errors = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(error, KernelClosedError) for error in errors), errors
    assert kernel.calls_in_flight() == []


async def test_case_42_a_block_exited_in_another_task_is_refused_as_misuse() -> None:
    kernel = await _hanging_kernel()
    block = deadline(1.0)

    async def enter() -> None:
        await block.__aenter__()

    async def leave() -> BaseException | None:
        try:
            await block.__aexit__(None, None, None)
        except (RuntimeError, ValueError) as exc:
            return exc
        return None

    with anyio.fail_after(20):
        await asyncio.create_task(enter())
        refused = await asyncio.create_task(leave())
    assert isinstance(refused, RuntimeError), repr(refused)  # not contextvars' "Token ... created in a different
    assert "left in another task" in str(refused), str(refused)  # Context": a message naming the misuse
    assert block.what in str(refused)
    with pytest.raises(ToolTimeoutError, match=r"timed out after 1\.5 s"):  # its own timeout, not the block's 1 s
        await kernel.call_tool("python://wait", timeout=1.5)
    await kernel.close()


async def test_case_43_a_progress_callback_that_closes_the_kernel() -> None:
    kernel = FunctionKernel()

    @pythontool
    async def report() -> str:
        """Report progress, then answer."""
        call = current_call()
        assert call is not None
        await call.report_progress(1, 2, "half")
        await asyncio.sleep(0)
        return "reported"

    async def close_on_progress(progress: float, total: float | None, message: str | None) -> None:
        await kernel.close()

    kernel.register_python_tool("report", report)
    with anyio.fail_after(20):
        try:
            outcome = (await kernel.call_tool("python://report", progress=close_on_progress)).result  # type: ignore[attr-defined]
        except KernelClosedError as exc:
            assert exc.uri == "python://report"
            outcome = "closed"
    assert outcome in {"reported", "closed"}
    assert kernel.calls_in_flight() == []
    await kernel.close()


async def test_case_44_a_first_lazy_call_with_a_nanosecond_timeout() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server())
    try:
        with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
            await kernel.call_tool("mcp://d.echo", {"text": "a"}, timeout=1e-9)
        with anyio.fail_after(60):
            assert (await kernel.call_tool("mcp://d.echo", {"text": "b"})).result == "b"  # type: ignore[attr-defined]
        assert len(_server_children()) == 1, _server_children()
    finally:
        await kernel.close()


async def test_case_45_a_background_call_closed_before_it_began() -> None:
    kernel = await _hanging_kernel()
    handle = kernel.start_tool("python://wait", timeout=5)
    closing = asyncio.create_task(kernel.close())
    with anyio.fail_after(20), pytest.raises(KernelClosedError):
        await handle.result()
    await closing
    assert kernel.calls_in_flight() == []


async def test_case_46_a_sync_tool_pausing_its_short_clock_from_its_thread() -> None:
    began: list[tuple[float, float | None]] = []

    @pythontool(timeout=0.05)
    def ask(after: float) -> str:
        """Wait 0.2 s for a person (the clock paused), then work for ``after`` seconds."""
        call = current_call()
        due = call.deadline if call is not None else None
        with deadline_paused():
            began.append((time.monotonic(), due))  # the pause is in force from here (set on the loop)
            time.sleep(0.2)
        time.sleep(after)
        return "answered"

    kernel = FunctionKernel()
    kernel.register_python_tool("ask", ask)
    with anyio.fail_after(20):
        try:
            answered = (await kernel.call_tool("python://ask", {"after": 0})).result  # type: ignore[attr-defined]
        except ToolTimeoutError:
            # under load the thread may take its call (or its pause reach the loop) only after the 50 ms: then it was
            # cut before its pause was in force (a pause never stops a deadline already passed); never during it
            await _until(lambda: bool(began))
            paused_at, due = began[0]
            assert due is not None
            assert paused_at >= due, "cut while its clock was paused"
        else:
            assert answered == "answered"
        with pytest.raises(ToolTimeoutError):
            await kernel.call_tool("python://ask", {"after": 1})
    await _until(lambda: kernel.threads_in_flight() == [])
    await kernel.close()


async def test_case_47_a_numpy_block_around_an_mcp_call_sends_what_is_left() -> None:
    numpy = pytest.importorskip("numpy")
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server())
    try:
        await kernel.connect()
        with deadline(numpy.float64(0.5)):
            await kernel.call_tool("mcp://d.echo", {"text": "a"})
        seen = (await kernel.call_tool("mcp://d.seen")).result  # type: ignore[attr-defined]
        assert seen[-1] is not None  # the echo call's (seen itself records nothing)
        assert 0 <= seen[-1] <= 500, seen
    finally:
        await kernel.close()
