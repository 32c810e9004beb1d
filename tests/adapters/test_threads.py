"""The worker threads of sync Python tools: context, errors, the limit per event loop, cancellation, reuse, idling."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import subprocess
import sys
import threading
import time

import pytest

from kavalai.adapters import _threads
from kavalai.adapters._threads import MAX_THREADS, run_in_thread

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_the_function_runs_in_another_thread_in_a_copy_of_the_callers_context() -> None:
    request_id.set("r-1")

    def work() -> tuple[str, str]:
        seen = request_id.get()
        request_id.set("changed in the thread")
        return threading.current_thread().name, seen

    name, seen = await run_in_thread(work)
    assert name == "kavalai-tool"
    assert name != threading.current_thread().name
    assert seen == "r-1"
    assert request_id.get() == "r-1"  # the thread changed its copy only


async def test_an_exception_reaches_the_caller_as_it_was_raised() -> None:
    class Boom(Exception):
        pass

    def fail() -> None:
        raise Boom("in the thread")

    with pytest.raises(Boom, match="in the thread"):
        await run_in_thread(fail)


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()])
async def test_an_exit_raised_in_the_thread_is_the_calls_error_not_the_event_loops(raised: BaseException) -> None:
    # Hostile review 36e: a sync tool's sys.exit() (a wrapped CLI, argparse) was handed to the awaiting task as it
    # was, and asyncio re-raised it out of the event loop: the whole process (a kavalai serve) ended. In a thread
    # it ends nothing but the call.
    def leave() -> None:
        raise raised

    task = asyncio.create_task(run_in_thread(leave))  # a task of its own: what asyncio would re-raise out of the loop
    with pytest.raises(RuntimeError, match="raised in a worker thread, where it ends nothing but the call") as info:
        await task
    assert info.value.__cause__ is raised
    assert await run_in_thread(lambda: "next") == "next"


class _Stop(BaseException):
    """Not an Exception, not an exit: a test's stand-in for the process dying (the durable tests')."""


async def test_any_other_base_exception_reaches_the_awaiting_task_as_it_was_raised() -> None:
    raised = _Stop()

    def stop() -> None:
        raise raised

    with pytest.raises(_Stop) as info:
        await run_in_thread(stop)
    assert info.value is raised
    assert await run_in_thread(lambda: "next") == "next"


async def test_a_call_cancelled_before_a_thread_took_it_never_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hostile review 36e: a call cut (a deadline, close()) after it was queued but before a thread took it ran its
    # function afterwards, once its caller had been told it ended (1 in ~640 calls with a 0.5 ms timeout).
    held: list[_threads._Turns] = []
    monkeypatch.setattr(_threads, "_wake", held.append)  # no thread takes the call until the test says so
    ran: list[str] = []
    returned: list[str] = []
    task = asyncio.create_task(run_in_thread(lambda: ran.append("ran"), lambda: returned.append("returned")))
    await _until(lambda: bool(held))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()
    loop = asyncio.get_running_loop()
    _threads._wake(held[0])
    await _until(lambda: _threads._turns[loop].free == MAX_THREADS)  # its turn back once a thread saw it
    assert ran == []
    assert returned == ["returned"]
    assert await run_in_thread(lambda: "next") == "next"


async def test_a_thread_is_reused_once_it_is_idle() -> None:
    first = await run_in_thread(threading.get_ident)
    second = await run_in_thread(threading.get_ident)
    assert first == second


async def test_at_most_max_threads_calls_of_a_loop_run_at_once_and_a_cancelled_one_keeps_its_turn() -> None:
    # Issue 36, finding 5: a cut call gave its turn back while its thread ran on, so a hung tool cut again and
    # again held ever more threads. Its turn now comes back when the thread returns.
    release = threading.Event()
    running = 0
    peak = 0
    returned: list[int] = []
    lock = threading.Lock()

    def blocked() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(timeout=20)
        with lock:
            running -= 1

    tasks = [
        asyncio.create_task(run_in_thread(blocked, lambda n=n: returned.append(n)))  # type: ignore[misc]
        for n in range(MAX_THREADS + 2)
    ]
    try:
        await _until(lambda: running == MAX_THREADS)
        tasks[0].cancel()  # returns at once; its thread keeps running, and so keeps its turn
        with pytest.raises(asyncio.CancelledError):
            await tasks[0]
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        assert (running, _threads._turns[loop].free, len(_threads._turns[loop].waiting)) == (MAX_THREADS, 0, 2)
        assert returned == []
    finally:
        release.set()
    await asyncio.gather(*tasks[1:])
    assert peak == MAX_THREADS
    await _until(lambda: len(returned) == MAX_THREADS + 2)  # on_return: once each, the cancelled call's too
    assert sorted(returned) == list(range(MAX_THREADS + 2))


async def test_a_call_cancelled_while_it_waits_for_a_turn_leaves_the_count_right() -> None:
    release = threading.Event()
    running = [asyncio.create_task(run_in_thread(lambda: release.wait(timeout=20))) for _ in range(MAX_THREADS)]
    loop = asyncio.get_running_loop()
    await _until(lambda: loop in _threads._turns and _threads._turns[loop].free == 0)
    turns = _threads._turns[loop]
    waiting = [asyncio.create_task(run_in_thread(lambda: "late")) for _ in range(3)]
    await _until(lambda: len(turns.waiting) == 3)
    waiting[0].cancel()
    waiting[1].cancel()
    release.set()
    assert await waiting[2] == "late"
    await asyncio.gather(*running)
    for task in waiting[:2]:
        assert task.cancelled()
    assert (turns.free, len(turns.waiting)) == (MAX_THREADS, 0)  # every turn back, no waiter left behind


async def test_a_call_waiting_for_a_turn_past_the_warning_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 36's leftover: once every turn of a loop is held (hung cut calls whose threads run on), a later sync
    # call waited for a turn without a word.
    monkeypatch.setattr(_threads, "WAIT_WARNING", 0.05)
    release = threading.Event()
    running = [asyncio.create_task(run_in_thread(lambda: release.wait(timeout=20))) for _ in range(MAX_THREADS)]
    loop = asyncio.get_running_loop()
    try:
        await _until(lambda: loop in _threads._turns and _threads._turns[loop].free == 0)
        with caplog.at_level(logging.WARNING, logger="kavalai.threads"):
            late = asyncio.create_task(run_in_thread(lambda: "late"))
            await _until(lambda: any("waited" in record.getMessage() for record in caplog.records))
            await asyncio.sleep(0.2)  # four warnings' worth: still one
    finally:
        release.set()
    assert await late == "late"
    await asyncio.gather(*running)
    [told] = [record.getMessage() for record in caplog.records if record.name == "kavalai.threads"]
    assert f"all {MAX_THREADS} of its event loop's are busy" in told
    assert "threads_in_flight()" in told


async def test_a_call_given_a_turn_in_time_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kavalai.threads"):
        assert await asyncio.gather(*(run_in_thread(lambda: 1) for _ in range(MAX_THREADS * 3))) == [1] * 120
    assert not [record for record in caplog.records if record.name == "kavalai.threads"]


async def test_calls_arriving_together_share_few_threads_and_every_one_is_answered() -> None:
    # Issue 40: a thread woken per call made 32 sessions of kavalai serve spend a sixth of the GIL's time handing
    # calls over (each woken thread waits for the GIL its waker holds). Calls submitted while a thread of the loop
    # is awake wait for it: 32 calls made in one turn of the loop used 32 threads, now a few.
    def work(n: int) -> tuple[int, int]:
        return n * 2, threading.get_ident()

    answers = await asyncio.gather(*(run_in_thread(lambda n=n: work(n)) for n in range(32)))  # type: ignore[misc]
    assert [doubled for doubled, _ in answers] == [n * 2 for n in range(32)]
    assert len({thread for _, thread in answers}) <= 8


async def test_a_call_that_blocks_does_not_hold_up_the_call_waiting_behind_it() -> None:
    # The thread taking a call while another waits, with no other thread awake, wakes one for it: the second call
    # is answered while the first still blocks.
    release = threading.Event()
    first = asyncio.ensure_future(run_in_thread(lambda: release.wait(timeout=20)))
    second = asyncio.ensure_future(run_in_thread(lambda: "second"))
    try:
        assert await asyncio.wait_for(second, 15) == "second"
        assert not first.done()
    finally:
        release.set()
    assert await first is True


async def test_idle_threads_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "IDLE_SECONDS", 0.05)
    started = threading.Event()

    def work() -> threading.Thread:
        started.set()
        return threading.current_thread()

    # A fresh thread, which reads the short idle time: every idle one is busy meanwhile.
    busy = threading.Event()
    holders = [asyncio.create_task(run_in_thread(lambda: busy.wait(timeout=20))) for _ in _threads._idle[:]]
    try:
        thread = await run_in_thread(work)
    finally:
        busy.set()
        await asyncio.gather(*holders)
    await _until(lambda: not thread.is_alive())
    assert thread not in _threads._idle
    assert await run_in_thread(lambda: 7) == 7  # a new thread starts when none is idle


async def _until(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.005)


def test_idle_worker_threads_end_when_the_interpreter_exits() -> None:
    # A daemon thread still waiting at finalization is stopped by force, which can abort the process; the idle
    # ones are ended and joined at exit instead. The child's own exit handler, registered before kavalai's (exit
    # handlers run last-registered first), counts the worker threads still alive after kavalai's has run.
    code = (
        "import atexit, threading\n"
        "atexit.register(lambda: print('left', sum(t.name == 'kavalai-tool' and t.is_alive()"
        " for t in threading.enumerate())))\n"
        "import asyncio\n"
        "from kavalai.adapters._threads import run_in_thread\n"
        "async def main():\n"
        "    await asyncio.gather(*(run_in_thread(lambda: 1) for _ in range(8)))\n"
        "asyncio.run(main())\n"
        "print('started', sum(t.name == 'kavalai-tool' for t in threading.enumerate()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    started, left = done.stdout.splitlines()
    assert int(started.removeprefix("started ")) >= 1  # there were threads to end
    assert left == "left 0"
