"""A stateful model of one kernel used from everywhere at once, for Hypothesis (``RuleBasedStateMachine``).

Calls of every kind (an async Python tool, a sync Python tool in a worker thread, an MCP tool of a real stdio
server) are started from tasks of the kernel's event loop and from a second event loop in another thread, with and
without timeouts, interleaved with ``close()``, reconnects, ``remove_tool`` and the cancellation of callers; a sync
tool that hangs is cut by its timeout again and again (its threads run on), and ``close()`` races a burst of new
calls started on its own loop while it runs (issue 36). After
every step each call must have ended, or still be within its deadline (its timeout, or the ``close()`` that came
after it) plus a bounded slack; each ended call must have ended one of the ways it may: its result,
``ToolTimeoutError`` (it had a timeout), ``KernelClosedError`` (a close came after it started),
``ToolNotFoundError`` (its tool was withdrawn when it started), or ``CancelledError`` (its caller was cancelled).
After every step the threads of hung sync tools are counted: never more than the per-loop limit on each loop, and
each one accounted for by the kernel (a call in ``calls_in_flight()`` or ``threads_in_flight()``). A ``close()``
racing new calls leaves none of its loop running when it returns, and each of them ends with ``KernelClosedError``
or was never started. A tool closes its own kernel from its worker thread (its own call is left to finish, the others
are cut); a deadline block is entered twice (the second entry is refused, the first cuts the call inside it); a call
pauses its own deadline in two tasks at once, or from its worker thread, longer than its timeout, and is not cut
(issue 36, sixth session). No sync tool starts after its call has ended (a call cut while queued for a thread;
seventh session). A call that takes 3 ms under a 1 ms deadline (a timeout, a block, a float subclass whose
hooks lie) is cut every time, never before its deadline (eighth session: 4 ms timer slots let it finish). A block
left in another task than the one that entered it (refused) leaves the entering task as the entry found it: no
deadline current, its cancellation count back, its next call bound by its own timeout (ninth session). A
cancelled caller whose tool swallowed the cancellation still sees ``CancelledError`` (ninth session: the caller got
the tool's late value). Two ``close()`` run at once (two tasks, or one on each loop), or a ``close()`` races a
``connect()``: both return, no call is left in flight, and the next MCP call reconnects (tenth session). At the end
nothing the kernel started may be left: no call in flight, no thread of a cut
call, no server process, and both loops stop.

Used by ``tests/kernel/test_ownership_state.py`` with a few examples, and by ``bench/ownership_fuzz.py`` with many.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kavalai import FunctionKernel, McpServer, pythontool
from kavalai.adapters._threads import MAX_THREADS
from kavalai.errors import KernelClosedError, ToolNotFoundError, ToolTimeoutError
from kavalai.kernel import _closing, current_call, current_deadline, deadline, deadline_paused

ROOT = Path(__file__).resolve().parents[2]
#: How late past its deadline a call may still be running when a step ends (a loaded machine, a process start).
SLACK = 8.0
_RACING = 500  # the most calls started while one close() runs
_URIS = {"python": "python://nap", "sync": "python://doze", "mcp": "mcp://d.sleep"}


@pythontool
async def nap(seconds: float) -> str:
    """Sleep on the event loop."""
    await asyncio.sleep(seconds)
    return "napped"


# (when the cut reached it, its deadline) of each call of watched_nap cut: never before its deadline.
CUTS: list[tuple[float, float | None]] = []


@pythontool
async def swallow() -> str:
    """Catch the first cancellation and return late, as a careless tool does."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(0.01)
        return "late"
    return "slept"


@pythontool
async def watched_nap(seconds: float) -> str:
    """Sleep on the event loop; a cut is noted in CUTS with the call's deadline."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        call = current_call()
        CUTS.append((time.monotonic(), call.deadline if call is not None else None))
        raise
    return "napped"


# Sync tools that started after their call had ended (cut while queued for a thread): there must be none (36e).
LATE_STARTS: list[str] = []


def _note_a_late_start() -> None:
    call = current_call()
    if call is not None and call._done:
        LATE_STARTS.append(call.uri)


@pythontool
def doze(seconds: float) -> str:
    """Sleep in a worker thread."""
    _note_a_late_start()
    time.sleep(seconds)
    return "dozed"


@pythontool
async def wait_for_two_people(seconds: float) -> str:
    """Pause the call's own deadline in two tasks at once, for ``seconds`` and half of it."""

    async def ask(wait: float) -> None:
        with deadline_paused():
            await asyncio.sleep(wait)

    await asyncio.gather(ask(seconds), ask(seconds / 2))
    return "answered"


@pythontool
def wait_for_a_person_in_a_thread(seconds: float) -> str:
    """Pause the call's own deadline from the sync tool's worker thread for ``seconds``."""
    with deadline_paused():
        time.sleep(seconds)
    return "answered"


class Stall:
    """A sync tool's body that blocks its worker thread until released, counting the threads inside it (``running``
    now, ``peak`` at most)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def __call__(self) -> str:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            self.release.wait(timeout=120)
        finally:
            with self.lock:
                self.running -= 1
        return "stalled"


@dataclass
class Started:
    """One call the machine started, and what may become of it."""

    kind: str
    where: str
    timeout: float | None
    seconds: float
    started: float
    future: concurrent.futures.Future[Any]
    withdrawn: bool  # its tool was removed when it started
    closed_at: float | None = None  # the first close() after it started
    cancelled: bool = False

    def due(self) -> float | None:
        """By when it must have ended (``time.monotonic()``), or ``None`` while nothing bounds it."""
        bounds = [self.started + self.seconds]
        if self.timeout is not None:
            bounds.append(self.started + self.timeout)
        if self.closed_at is not None:
            bounds.append(self.closed_at)
        return min(bounds) + SLACK if self.seconds < 3600 or len(bounds) > 1 else None


class _LoopThread:
    """An event loop running forever in a thread of its own."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, Any], within: float = 60.0) -> Any:
        return self.submit(coro).result(within)

    def stop(self) -> None:
        self.run(self.loop.shutdown_asyncgens(), within=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        assert not self.thread.is_alive(), f"{self.thread.name} did not stop"
        self.loop.close()


class KernelMachine(RuleBasedStateMachine):
    """See the module docstring."""

    #: The MCP server's streamable HTTP endpoint, or ``None`` for a stdio server process of each example's own
    #: (``bench/ownership_fuzz.py``). Starting one costs seconds under load (importing the SDK), and each example
    #: starts one, then another at each reconnect after a ``close()``: the suite's run uses a server its test
    #: started once (every rule the same), so that its time is the rules', not process starts'.
    mcp_url: str | None = None

    def __init__(self) -> None:
        super().__init__()
        # Processes already there (servers other tests share for the session) are not this kernel's to end.
        self.before = {child.pid for child in psutil.Process().children(recursive=True)}
        self.main = _LoopThread("kernel-loop")
        self.second = _LoopThread("second-loop")
        self.kernel = FunctionKernel()
        self.kernel.register_python_tool("nap", nap)
        self.kernel.register_python_tool("watched_nap", watched_nap)
        self.kernel.register_python_tool("doze", doze)
        server = (
            McpServer(
                name="d", command=sys.executable, args=["-m", "tests.servers.mcp_deadline"], cwd=str(ROOT), timeout=30
            )
            if self.mcp_url is None
            else McpServer(name="d", url=self.mcp_url, timeout=30)
        )
        self.kernel.register_mcp_server(server)
        self.main.run(self.kernel.connect())
        self.calls: list[Started] = []
        self.withdrawn = False
        self.stall = Stall()
        # Calls of the hung tool started on each loop: their threads never return before teardown, and a loop's sync
        # calls wait for a turn once MAX_THREADS of its threads are held, so a sync call that must end goes elsewhere.
        self.hung = {"task": 0, "second-loop": 0}
        stall = self.stall

        @pythontool
        def hang() -> str:
            """Block the worker thread until the machine ends."""
            _note_a_late_start()
            return stall()

        self.kernel.register_python_tool("hang", hang)
        self.kernel.register_python_tool("ask_two", wait_for_two_people)
        self.kernel.register_python_tool("swallow", swallow)
        self.kernel.register_python_tool("ask_in_thread", wait_for_a_person_in_a_thread)
        kernel = self.kernel

        @pythontool
        def close_own_kernel() -> str:
            """Close this tool's own kernel from its worker thread, on the loop its call runs on."""
            call = current_call()
            assert call is not None
            assert call.loop is not None
            asyncio.run_coroutine_threadsafe(kernel.close(), call.loop).result(SLACK * 2)
            return "closed"

        self.kernel.register_python_tool("close_own", close_own_kernel)
        # close() waits for the threads of cut calls within its bound; the hung ones never return before teardown.
        self.close_wait = _closing._CLOSE_WAIT
        _closing._CLOSE_WAIT = 0.3

    # ----------------------------------------------------------------------------------------------- rules

    @rule(
        kind=st.sampled_from(["python", "sync", "mcp"]),
        where=st.sampled_from(["task", "second-loop"]),
        seconds=st.sampled_from([0.0, 0.05, 0.4, 3600.0]),
        timeout=st.sampled_from([None, 0.1, 1.0]),
    )
    def start_call(self, kind: str, where: str, seconds: float, timeout: float | None) -> None:
        if kind == "sync":
            seconds = min(seconds, 0.4)  # a thread cannot be stopped: a sync tool that never ends would outlive all
            free = self._free_loop(where)
            kind, where = ("python", where) if free is None else (kind, free)
        uri = _URIS[kind]
        withdrawn = self.withdrawn and kind != "mcp"
        coro = self.kernel.call_tool(uri, {"seconds": seconds}, timeout=timeout)
        loop = self.main if where == "task" else self.second
        before = {id(call) for call in self.kernel.calls_in_flight()}
        future = loop.submit(coro)
        self.calls.append(Started(kind, where, timeout, seconds, time.monotonic(), future, withdrawn))
        # Until the call is in flight (or over): a close() after this step is then one it must obey.
        limit = time.monotonic() + SLACK
        while not future.done() and {id(c) for c in self.kernel.calls_in_flight()} <= before:
            assert time.monotonic() < limit, f"{uri} did not start within {SLACK} s"
            time.sleep(0.002)

    @rule(where=st.sampled_from(["task", "second-loop"]), count=st.sampled_from([1, 5, 45]))
    def cut_hung_sync_calls(self, where: str, count: int) -> None:
        """Start ``count`` calls of the hung sync tool with a short timeout and wait until each has ended: cut at its
        deadline, running in a thread or waiting for a turn."""
        loop = self.main if where == "task" else self.second
        self.hung[where] += count
        outcomes = loop.run(_gather_calls(self.kernel, count), within=SLACK * 4)
        for outcome in outcomes:
            assert isinstance(outcome, ToolTimeoutError | KernelClosedError), outcome  # a close may race it

    @rule(where=st.sampled_from(["task", "second-loop"]), how=st.sampled_from(["timeout", "block", "float-subclass"]))
    def cut_under_a_timer_slot(self, where: str, how: str) -> None:
        """A deadline shorter than a timer slot (1 ms, given as a timeout, a block, or a float subclass) cuts a call
        that takes 3 ms, every time, and never before the deadline (hostile round 8: 4 ms slots let it finish)."""
        loop = self.main if where == "task" else self.second
        outcome, cut_at, due = loop.run(_short_deadline(self.kernel, how), within=SLACK * 4)
        if isinstance(outcome, KernelClosedError):  # a close() of another rule's thread may race it: not a result
            return
        assert isinstance(outcome, ToolTimeoutError), f"a 3 ms call under a 1 ms deadline ended with {outcome!r}"
        assert outcome.uri == "python://watched_nap", outcome
        assert cut_at is not None, "the call was cut without its tool seeing the cut"
        assert due is not None, "a cut call had no deadline"
        assert cut_at >= due, f"cut {due - cut_at:.6f} s before its deadline"

    @rule(kind=st.sampled_from(["python", "sync", "mcp"]))
    def close_racing_new_calls(self, kind: str) -> None:
        """``close()`` while new calls start on its loop at every turn: none is left running when it returns."""
        now = time.monotonic()
        for call in self.calls:
            if call.closed_at is None and not call.future.done():
                call.closed_at = now
        seconds = 0.4 if kind == "sync" else 3600.0
        left, outcomes = self.main.run(_close_racing(self.kernel, _URIS[kind], seconds), within=SLACK * 4)
        assert left == [], f"calls of the closing loop still running after close() returned: {left}"
        allowed = (KernelClosedError, asyncio.CancelledError)
        if self.withdrawn and kind != "mcp":
            allowed += (ToolNotFoundError,)  # the racing calls found no tool to call
        for outcome in outcomes:
            assert isinstance(outcome, allowed), outcome

    @precondition(lambda self: any(count < MAX_THREADS - 1 for count in self.hung.values()))
    @rule(where=st.sampled_from(["task", "second-loop"]))
    def close_from_a_tools_thread(self, where: str) -> None:
        """A sync tool closes its own kernel from its worker thread: its call is left to finish with its result; the
        calls in flight elsewhere are cut as by any ``close()``."""
        now = time.monotonic()
        for call in self.calls:
            if call.closed_at is None and not call.future.done():
                call.closed_at = now
        loop = self.main if self._free_loop(where) == "task" else self.second
        assert loop.run(self.kernel.call_tool("python://close_own"), within=SLACK * 4).result == "closed"

    @rule(where=st.sampled_from(["task", "second-loop"]))
    def enter_a_deadline_twice(self, where: str) -> None:
        """A deadline block cuts the call inside it, and a second entry of the same block is refused."""
        loop = self.main if where == "task" else self.second
        first, second = loop.run(_enter_twice(self.kernel), within=SLACK * 4)
        assert isinstance(first, ToolTimeoutError), first
        assert first.uri == "python://ask_two", first
        assert isinstance(second, RuntimeError), second
        assert "already entered" in str(second), second

    @rule(where=st.sampled_from(["task", "second-loop"]), cut=st.booleans())
    def leave_a_deadline_in_another_task(self, where: str, cut: bool) -> None:
        """A block left in another task than the one that entered it (refused as misuse) leaves that task as the
        entry found it: no deadline current, its cancellation count back, its next call bound by its own timeout."""
        loop = self.main if where == "task" else self.second
        refused, seen, cancelling, outcome = loop.run(_leave_elsewhere(self.kernel, cut), within=SLACK * 4)
        assert isinstance(refused, RuntimeError), refused
        assert "left in another task" in str(refused), refused
        assert seen is None, f"the entering task still sees the deadline {seen}"
        assert cancelling == 0, f"the entering task's cancellation count is {cancelling}"
        if not isinstance(outcome, KernelClosedError | ToolNotFoundError):  # a racing close(), a withdrawn nap
            assert isinstance(outcome, ToolTimeoutError), outcome
            assert "timed out after 0.05 s" in str(outcome), outcome

    @rule(where=st.sampled_from(["task", "second-loop"]), tool=st.sampled_from(["ask_two", "ask_in_thread"]))
    def pause_past_the_timeout(self, where: str, tool: str) -> None:
        """A call pausing its own deadline (in two tasks at once, or from its thread) longer than its timeout is not
        cut: its clock stops while any pause of it runs."""
        if tool == "ask_in_thread":
            free = self._free_loop(where)
            tool, where = ("ask_two", where) if free is None else (tool, free)
        loop = self.main if where == "task" else self.second
        call = self.kernel.call_tool(f"python://{tool}", {"seconds": 0.3}, timeout=0.1)
        assert loop.run(call, within=SLACK * 4).result == "answered"

    @rule(where=st.sampled_from(["task", "second-loop"]))
    def cancel_a_caller_whose_tool_swallows_it(self, where: str) -> None:
        """A caller cancelled while its tool catches the cancellation and returns: it sees ``CancelledError``."""
        loop = self.main if where == "task" else self.second
        outcome = loop.run(_cancel_swallowing(self.kernel), within=SLACK * 4)
        assert isinstance(outcome, asyncio.CancelledError), f"a cancelled caller got {outcome!r}"

    @rule(how=st.sampled_from(["two-tasks", "two-loops", "close-and-reconnect"]))
    def two_closes_at_once(self, how: str) -> None:
        """Two ``close()`` at once (two tasks of the kernel's loop, or one on each loop), or a ``close()`` racing a
        ``connect()`` on the other loop: each returns within its bound, no call is left in flight once both have,
        and the next call of the MCP tool reconnects and returns its result (tenth session)."""
        now = time.monotonic()
        for call in self.calls:
            if call.closed_at is None and not call.future.done():
                call.closed_at = now
        if how == "two-tasks":
            outcomes = self.main.run(_both(self.kernel.close(), self.kernel.close()), within=SLACK * 4)
        else:
            other = self.kernel.close() if how == "two-loops" else self.kernel.connect()
            first, second = self.main.submit(_outcome(self.kernel.close())), self.second.submit(_outcome(other))
            outcomes = [first.result(SLACK * 4), second.result(SLACK * 4)]
        for outcome in outcomes:  # a connect a close() ran into is refused as closed; nothing else may fail
            assert outcome is None or isinstance(outcome, KernelClosedError), outcome
        assert self.kernel.calls_in_flight() == [], f"calls left after two closes: {self.kernel.calls_in_flight()}"
        after = self.main.run(_outcome(self.kernel.call_tool(_URIS["mcp"], {"seconds": 0.0})), within=SLACK * 4)
        assert getattr(after, "result", after) == "slept", f"the call after the closes ended with {after!r}"

    # Enabled by what earlier steps did, never by timing (whether a call is still running), which Hypothesis needs
    # to replay a case: cancelling a call that has ended does nothing.
    @precondition(lambda self: bool(self.calls))
    @rule(data=st.data())
    def cancel_a_caller(self, data: st.DataObject) -> None:
        chosen = data.draw(st.sampled_from(self.calls))
        chosen.cancelled = chosen.future.cancel() or chosen.cancelled

    @rule()
    def close(self) -> None:
        now = time.monotonic()
        for call in self.calls:
            if call.closed_at is None and not call.future.done():
                call.closed_at = now
        self.main.run(self.kernel.close())

    @rule()
    def reconnect(self) -> None:
        self.main.run(self.kernel.connect())

    @rule()
    def withdraw_or_restore(self) -> None:
        if self.withdrawn:
            self.kernel.register_python_tool("nap", nap)
            self.kernel.register_python_tool("doze", doze)
        else:
            assert self.kernel.remove_tool("python://nap")
            assert self.kernel.remove_tool("python://doze")
            for call in self.calls:
                if call.kind != "mcp" and not call.future.done():
                    call.withdrawn = True  # not started yet, it may find no tool
        self.withdrawn = not self.withdrawn

    def check_invariants_now(self) -> None:
        """Every invariant, as Hypothesis checks them after a step (for a test driving the rules by hand)."""
        self.every_call_ends_in_time_and_one_way_it_may()
        self.threads_of_cut_calls_stay_counted()

    def _free_loop(self, where: str) -> str | None:
        """``where``, or the other loop, if a sync call started there gets a thread (not all held by hung calls)."""
        for name in (where, "second-loop" if where == "task" else "task"):
            if self.hung[name] < MAX_THREADS - 1:
                return name
        return None

    # ---------------------------------------------------------------------------------------- invariants

    @invariant()
    def every_call_ends_in_time_and_one_way_it_may(self) -> None:
        now = time.monotonic()
        for call in self.calls:
            if call.future.done():
                self._check_outcome(call)
                continue
            due = call.due()
            assert due is None or now <= due, f"{call} is still running {now - due + SLACK:.1f} s past its deadline"

    @invariant()
    def threads_of_cut_calls_stay_counted(self) -> None:
        running = self.stall.running
        assert running <= 2 * MAX_THREADS, f"{running} threads in the hung tool: more than the limit of two loops"
        accounted = [
            call
            for call in self.kernel.calls_in_flight() + self.kernel.threads_in_flight()
            if call.uri == "python://hang"
        ]
        assert running <= len(accounted), f"{running} hung threads, {len(accounted)} accounted for by the kernel"
        assert not LATE_STARTS, f"sync tools started after their calls had ended: {LATE_STARTS}"

    def _check_outcome(self, call: Started) -> None:
        if call.future.cancelled():
            assert call.cancelled, f"{call} was cancelled without its caller being cancelled"
            return
        error = call.future.exception()
        if error is None:
            expected = {"python": "napped", "sync": "dozed", "mcp": "slept"}[call.kind]
            assert call.future.result().result == expected
            return
        if isinstance(error, asyncio.CancelledError):
            assert call.cancelled, f"{call} saw CancelledError though its caller was not cancelled"
        elif isinstance(error, ToolNotFoundError):
            assert call.withdrawn, f"{call} found no tool though its tool was registered: {error}"
        elif isinstance(error, KernelClosedError):
            assert call.closed_at is not None, f"{call} failed with KernelClosedError without a close: {error}"
            assert error.uri == _URIS[call.kind]
        elif isinstance(error, ToolTimeoutError):
            assert call.timeout is not None, f"{call} timed out without a timeout: {error}"
            assert error.uri == _URIS[call.kind]
        else:
            raise AssertionError(f"{call} ended with {type(error).__name__}: {error}")

    # ------------------------------------------------------------------------------------------ teardown

    def teardown(self) -> None:
        try:
            self.close()
            for call in self.calls:
                with contextlib.suppress(concurrent.futures.CancelledError):
                    call.future.exception(timeout=SLACK + 2)  # the close above bounds every call
                self._check_outcome(call)
            assert self.kernel.calls_in_flight() == [], self.kernel.calls_in_flight()
            self.stall.release.set()
            limit = time.monotonic() + SLACK  # a bounded liveness wait for the released threads to end
            while (self.kernel.threads_in_flight() or self.stall.running) and time.monotonic() < limit:
                time.sleep(0.01)
            left = self.kernel.threads_in_flight()
            assert (left, self.stall.running) == ([], 0), f"threads of cut calls left: {left}"
            children = [p for p in psutil.Process().children(recursive=True) if p.pid not in self.before and _alive(p)]
            assert not children, f"processes left after close(): {children}"
        finally:
            self.stall.release.set()
            _closing._CLOSE_WAIT = self.close_wait
            self.main.stop()
            self.second.stop()


class _Millisecond(float):
    """A deadline given as a float subclass whose hooks lie: the rule reads the number it holds."""

    def __float__(self) -> float:
        return 3600.0

    def __gt__(self, other: object) -> bool:
        return True


async def _short_deadline(kernel: FunctionKernel, how: str) -> tuple[BaseException | Any, float | None, float | None]:
    """Call ``watched_nap(0.003)`` under a 1 ms deadline (``how``): its outcome, when its cut reached it, and its
    deadline."""
    CUTS.clear()
    uri = "python://watched_nap"
    try:
        if how == "block":
            with deadline(0.001):
                outcome: BaseException | Any = await kernel.call_tool(uri, {"seconds": 0.003})
        else:
            timeout = _Millisecond(0.001) if how == "float-subclass" else 0.001
            outcome = await kernel.call_tool(uri, {"seconds": 0.003}, timeout=timeout)
    except (ToolTimeoutError, KernelClosedError) as exc:
        outcome = exc
    cut_at, due = CUTS[0] if CUTS else (None, None)
    return outcome, cut_at, due


async def _outcome(coro: Coroutine[Any, Any, Any]) -> BaseException | Any:
    """What ``coro`` returned, or the exception it raised (as a value)."""
    try:
        return await coro
    except Exception as exc:
        return exc


async def _both(first: Coroutine[Any, Any, Any], second: Coroutine[Any, Any, Any]) -> list[BaseException | Any]:
    """Run two coroutines at once in two tasks: what each returned or raised."""
    return list(await asyncio.gather(_outcome(first), _outcome(second)))


async def _gather_calls(kernel: FunctionKernel, count: int) -> list[BaseException | Any]:
    calls = [kernel.call_tool("python://hang", timeout=0.05) for _ in range(count)]
    return await asyncio.gather(*calls, return_exceptions=True)


async def _close_racing(
    kernel: FunctionKernel, uri: str, seconds: float
) -> tuple[list[Any], list[BaseException | Any]]:
    """Run ``close()`` while a task starts a call of ``uri`` at every turn of the loop; return the calls of this
    loop still in flight when it returned (read before anything else runs) and how the racing calls ended (those
    not started by then are cancelled before their first step)."""
    loop = asyncio.get_running_loop()
    racing: list[asyncio.Task[Any]] = []
    stop = asyncio.Event()

    async def burst() -> None:
        while not stop.is_set() and len(racing) < _RACING:
            racing.append(asyncio.create_task(kernel.call_tool(uri, {"seconds": seconds})))
            await asyncio.sleep(0)

    spawner = asyncio.create_task(burst())
    await asyncio.sleep(0)
    await kernel.close()
    left = [call for call in kernel.calls_in_flight() if call.loop is loop]
    stop.set()
    await spawner
    for task in racing:
        task.cancel()  # done ones ignore it; the rest had not started
    return left, list(await asyncio.gather(*racing, return_exceptions=True))


async def _cancel_swallowing(kernel: FunctionKernel) -> BaseException | Any:
    """Cancel a caller once its call of the swallowing tool is in flight: how the caller's task ended."""
    task = asyncio.create_task(kernel.call_tool("python://swallow"))
    while not any(call._task is task for call in kernel.calls_in_flight()):  # noqa: ASYNC110 - polls the kernel's record; bounded by the caller's within=
        await asyncio.sleep(0.001)
    task.cancel()
    [outcome] = await asyncio.gather(task, return_exceptions=True)
    return outcome


async def _enter_twice(kernel: FunctionKernel) -> tuple[BaseException | None, BaseException | None]:
    """Enter one deadline block around a call that outlives it (its pauses stop only a deadline of its own, not the
    block's), then try to enter the block again: what each raised."""
    block = deadline(0.05)
    first: BaseException | None = None
    second: BaseException | None = None
    with block:
        try:
            await kernel.call_tool("python://ask_two", {"seconds": 3600}, timeout=None)
        except ToolTimeoutError as exc:
            first = exc
    try:
        with block:
            pass
    except RuntimeError as exc:
        second = exc
    return first, second


async def _leave_elsewhere(
    kernel: FunctionKernel, cut: bool
) -> tuple[BaseException | None, float | None, int, BaseException | None]:
    """Enter a 10 ms block in one task (cut first if ``cut``), leave it in another, and then, in the entering task,
    past the block's deadline: what the exit raised, the deadline current there, its cancellation count, and how a
    call of ``nap`` with a timeout of 0.05 s ended."""
    block = deadline(0.01)

    async def leave() -> BaseException | None:
        try:
            await block.__aexit__(None, None, None)
        except RuntimeError as exc:
            return exc
        return None

    async def enter() -> tuple[BaseException | None, float | None, int, BaseException | None]:
        await block.__aenter__()
        if cut:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)
        refused = await asyncio.create_task(leave())
        seen = current_deadline()
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else -1
        await asyncio.sleep(0.02)
        try:
            await kernel.call_tool("python://nap", {"seconds": 3600}, timeout=0.05)
        except (ToolTimeoutError, KernelClosedError, ToolNotFoundError) as exc:
            return refused, seen, cancelling, exc
        return refused, seen, cancelling, None

    return await asyncio.create_task(enter())


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
