"""Every call owned: the current call as a context variable, the in-flight registry that close() fails, deadlines
that flow down (issue 24). Each test below failed on the kernel that found calls by walking frames and tasks."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Generator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from pydantic import BaseModel, create_model

from kavalai import FunctionKernel, McpServer, pythontool
from kavalai.agent import Agent
from kavalai.agent.code_mode import CodeMode
from kavalai.errors import (
    DeadlineExceededError,
    KernelClosedError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from kavalai.kernel import (
    CallNext,
    Kernel,
    ToolAdapter,
    ToolCall,
    ToolDefinition,
    ToolRegistry,
    ToolURI,
    current_call,
    deadline,
    deadline_paused,
)
from kavalai.llm import ToolResultMessage
from kavalai.testing import ScriptedLLM, tool_call

ROOT = Path(__file__).resolve().parents[2]


def deadline_server(name: str = "d", **options: Any) -> McpServer:
    """The MCP server that records the io.kavalai/deadline of each call (tests/servers/mcp_deadline.py)."""
    return McpServer(
        name=name, command=sys.executable, args=["-m", "tests.servers.mcp_deadline"], cwd=str(ROOT), **options
    )


@pythontool
async def wait_forever() -> str:
    """Never return."""
    await asyncio.Event().wait()
    return "never"


@pythontool
async def nap(seconds: float) -> float | None:
    """Sleep; return the seconds the call had left when it started."""
    call = current_call()
    left = call.remaining() if call is not None else None
    await asyncio.sleep(seconds)
    return left


@pythontool
def sync_left() -> float | None:
    """In a worker thread: the seconds the current call has left."""
    call = current_call()
    return call.remaining() if call is not None else -1.0


@pythontool
async def call_id() -> str | None:
    """The id of the current call."""
    call = current_call()
    return call.call_id if call is not None else None


@pytest.fixture
async def mcp_kernel() -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server(timeout=60))
    kernel.register_python_tool("wait", wait_forever)
    kernel.register_python_tool("nap", nap)
    await kernel.connect_mcp_servers()
    try:
        yield kernel
    finally:
        await kernel.close()


def in_second_loop(work: Awaitable[Any] | Any) -> tuple[threading.Thread, list[Any]]:
    """Run the coroutine ``work`` with ``asyncio.run`` in a thread of its own; its outcome (value or exception)
    lands in the returned list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(work))
        except BaseException as exc:  # the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


async def joined(thread: threading.Thread, within: float = 30.0) -> None:
    """Wait (off the event loop) for ``thread`` to end, at most ``within`` seconds."""
    await asyncio.to_thread(thread.join, within)
    assert not thread.is_alive(), "the second loop's thread is still running"


# ------------------------------------------------------------------------------------------- second loop


async def test_a_call_from_a_second_event_loop_is_woken_by_the_reply(mcp_kernel: FunctionKernel) -> None:
    # With timeout=None the old kernel's call never returned: the reply was delivered to a waiter of the first loop.
    thread, outcome = in_second_loop(mcp_kernel.call_tool("mcp://d.echo", {"text": "hi"}, timeout=None))
    await joined(thread)
    [result] = outcome
    assert not isinstance(result, BaseException), result
    assert result.result == "hi"


async def test_a_second_loop_call_ends_with_kernel_closed_on_close(mcp_kernel: FunctionKernel) -> None:
    started = threading.Event()

    async def slow() -> Any:
        started.set()
        return await mcp_kernel.call_tool("mcp://d.sleep", {"seconds": 60}, timeout=None)

    thread, outcome = in_second_loop(slow())
    await asyncio.to_thread(started.wait, 10)
    await _until(lambda: len(mcp_kernel.calls_in_flight()) == 1)
    await mcp_kernel.close()
    await joined(thread)
    [error] = outcome
    assert isinstance(error, KernelClosedError), error
    assert error.uri == "mcp://d.sleep"
    assert mcp_kernel.calls_in_flight() == []


async def test_a_python_call_on_a_second_loop_ends_with_kernel_closed(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("wait", wait_forever)
    thread, outcome = in_second_loop(kernel.call_tool("python://wait", timeout=None))
    await _until(lambda: len(kernel.calls_in_flight()) == 1)
    await kernel.close()
    await joined(thread)
    assert isinstance(outcome[0], KernelClosedError)
    assert "python://wait" in str(outcome[0])


# ---------------------------------------------------------------------- callers discovery could not see


async def test_a_call_awaited_in_an_async_generator_is_closed(mcp_kernel: FunctionKernel) -> None:
    async def results(uri: str, arguments: dict[str, Any]) -> AsyncIterator[Any]:
        yield await mcp_kernel.call_tool(uri, arguments, timeout=None)

    async def first(uri: str, arguments: dict[str, Any]) -> Any:
        async for item in results(uri, arguments):
            return item
        return None

    mcp_call = asyncio.create_task(first("mcp://d.sleep", {"seconds": 60}))
    python_call = asyncio.create_task(first("python://wait", {}))
    await _until(lambda: len(mcp_kernel.calls_in_flight()) == 2)
    await mcp_kernel.close()
    for task, uri in ((mcp_call, "mcp://d.sleep"), (python_call, "python://wait")):
        with pytest.raises(KernelClosedError) as info:
            await asyncio.wait_for(task, 10)
        assert info.value.uri == uri


class Awaiting:
    """An object with its own ``__await__`` that awaits a kernel call."""

    def __init__(self, kernel: FunctionKernel, uri: str, arguments: dict[str, Any]) -> None:
        self.kernel, self.uri, self.arguments = kernel, uri, arguments

    def __await__(self) -> Generator[Any, None, Any]:
        return self.kernel.call_tool(self.uri, self.arguments, timeout=None).__await__()


async def test_a_call_awaited_through_a_custom_await_is_closed(mcp_kernel: FunctionKernel) -> None:
    async def await_it(uri: str, arguments: dict[str, Any]) -> Any:
        return await Awaiting(mcp_kernel, uri, arguments)

    tasks = [
        asyncio.create_task(await_it("mcp://d.sleep", {"seconds": 60})),
        asyncio.create_task(await_it("python://wait", {})),
    ]
    await _until(lambda: len(mcp_kernel.calls_in_flight()) == 2)
    await mcp_kernel.close()
    for task in tasks:
        with pytest.raises(KernelClosedError):
            await asyncio.wait_for(task, 10)


async def test_a_cancelled_caller_still_sees_cancelled_error(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("wait", wait_forever)
    task = asyncio.create_task(kernel.call_tool("python://wait", timeout=None))
    await _until(lambda: len(kernel.calls_in_flight()) == 1)
    task.cancel()
    await kernel.close()  # close() cuts the call too: the caller's own cancellation still wins
    with pytest.raises(asyncio.CancelledError):
        await task
    assert kernel.calls_in_flight() == []


async def test_close_leaves_the_caller_task_without_pending_cancellation(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("wait", wait_forever)

    async def caller() -> str:
        with contextlib.suppress(KernelClosedError):
            await kernel.call_tool("python://wait", timeout=None)
        await asyncio.sleep(0.01)  # no cancellation left pending on this task: this sleep completes
        task = asyncio.current_task()
        assert task is not None
        return f"cancelling={task.cancelling()}"

    task = asyncio.create_task(caller())
    await _until(lambda: len(kernel.calls_in_flight()) == 1)
    await kernel.close()
    assert await task == "cancelling=0"


# --------------------------------------------------------------------------------- the current call


class _Shielding:
    """Middleware that runs the rest of the chain in another task, as some do."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def __call__(self, call: ToolCall, call_next: CallNext) -> Any:
        if self.how == "shield":
            return await asyncio.shield(call_next(call))
        if self.how == "wait_for":
            return await asyncio.wait_for(call_next(call), 10)
        return await asyncio.create_task(_as_coroutine(call_next(call)))


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


@pytest.mark.parametrize("how", ["shield", "wait_for", "task"])
async def test_current_call_is_seen_when_middleware_runs_the_chain_in_another_task(how: str) -> None:
    kernel = FunctionKernel(middleware=[_Shielding(how)])
    kernel.register_python_tool("call_id", call_id)
    kernel.register_python_tool("sync_left", sync_left)
    try:
        seen = await kernel.call_tool("python://call_id")
        assert str(seen.result).startswith("call-")  # type: ignore[attr-defined]
        left = await kernel.call_tool("python://sync_left", timeout=30)  # a worker thread behind another task
        assert 0 < (left.result or -1) <= 30  # type: ignore[attr-defined]
    finally:
        await kernel.close()
    assert current_call() is None


# ------------------------------------------------------------------------------------ factory adapters


class EchoAdapter(ToolAdapter):
    """A toy scheme: toy://echo.say, published when the adapter is built."""

    scheme: ClassVar[str] = "toy"
    built: ClassVar[int] = 0

    def __init__(self, registry: ToolRegistry) -> None:
        super().__init__(registry)
        EchoAdapter.built += 1
        model = create_model("SayInput", text=(str, ...))

        async def invoke(args: BaseModel) -> str:
            return f"echo: {args.text}"  # type: ignore[attr-defined]

        output = create_model("SayOutput", result=(str, ...))
        registry.add_tool(
            ToolDefinition(
                uri=ToolURI.parse("toy://echo.say"),
                description="Echo the text.",
                input_model=model,
                output_model=output,
                invoke=invoke,
                wrapped=True,
            )
        )


async def test_an_adapter_plugged_in_as_a_factory_works_wherever_an_instance_does() -> None:
    for use in ("call", "resolve", "connect", "list", "describe", "definition"):
        kernel = Kernel()
        kernel.add_adapter(EchoAdapter)  # the class is the factory; its scheme is its class attribute
        before = EchoAdapter.built
        if use == "call":
            assert (await kernel.call_tool("toy://echo.say", {"text": "hi"})).result == "echo: hi"  # type: ignore[attr-defined]
        elif use == "resolve":
            assert (await kernel.resolve_tool("toy://echo.say")).name == "toy://echo.say"
        elif use == "connect":
            await kernel.connect()
            assert kernel.has_tool("toy://echo.say")
        elif use == "list":
            assert kernel.list_tools() == ["toy://echo.say"]
        elif use == "describe":
            assert [d["name"] for d in await kernel.describe_tools()] == ["toy://echo.say"]
        else:
            assert kernel.get_tool_definition("toy://echo.say").description == "Echo the text."
        assert EchoAdapter.built == before + 1, use  # built once
        await kernel.close()
    kernel = Kernel()
    kernel.add_adapter(lambda registry: EchoAdapter(registry), scheme="toy", lazy=True)
    assert kernel.list_tools() == []  # lazy: only a toy:// URI builds it
    assert (await kernel.call_tool("toy://echo.say", {"text": "x"})).result == "echo: x"  # type: ignore[attr-defined]
    with pytest.raises(ToolNotFoundError):
        await kernel.call_tool("toy://echo.shout", {"text": "x"})


def test_a_factory_that_builds_no_adapter_is_refused() -> None:
    kernel = Kernel()
    kernel.add_adapter(lambda registry: object(), scheme="bad")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return a ToolAdapter"):
        kernel.adapter("bad")


# ------------------------------------------------------------------------------------------- deadlines


async def test_nested_calls_inherit_the_deadline_without_an_argument(kernel: FunctionKernel) -> None:
    @pythontool
    async def outer() -> float | None:
        inner = await kernel.call_tool("python://nap", {"seconds": 0})  # its own timeout: none
        return inner.result  # type: ignore[attr-defined,no-any-return]

    kernel.register_python_tool("outer", outer)
    kernel.register_python_tool("nap", nap)
    left = (await kernel.call_tool("python://outer", timeout=5)).result  # type: ignore[attr-defined]
    assert 4 < (left or -1) <= 5
    with deadline(2):
        left = (await kernel.call_tool("python://nap", {"seconds": 0}, timeout=60)).result  # type: ignore[attr-defined]
    assert 1 < (left or -1) <= 2
    with deadline(60):
        left = (await kernel.call_tool("python://nap", {"seconds": 0}, timeout=3)).result  # type: ignore[attr-defined]
    assert 2 < (left or -1) <= 3  # its own timeout is the nearer


async def test_a_call_is_cut_at_the_deadline_around_it(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("nap", nap)
    with (
        pytest.raises(ToolTimeoutError, match="python://nap was cut at the deadline of the block") as info,
        deadline(0.3),
    ):
        await kernel.call_tool("python://nap", {"seconds": 30}, timeout=60)
    assert info.value.uri == "python://nap"  # cut: a nap left to its end would have returned, not raised
    with pytest.raises(ToolTimeoutError, match="was not started"), deadline(0):
        await kernel.call_tool("python://nap", {"seconds": 30})
    with pytest.raises(DeadlineExceededError), deadline(0.05):
        await asyncio.sleep(30)  # no tool: the block itself ends with the deadline's error
    with pytest.raises(DeadlineExceededError), deadline(0):
        await asyncio.sleep(30)  # a deadline already passed cuts the block at its first suspension
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_code_mode_cuts_the_tools_its_snippet_awaits() -> None:
    kernel = FunctionKernel()
    finished: list[float] = []

    @pythontool
    async def slow(seconds: float) -> str:
        """Sleep, then note it."""
        await asyncio.sleep(seconds)
        finished.append(seconds)
        return "done"

    kernel.register_python_tool("slow", slow, timeout=60)
    one = ScriptedLLM([tool_call("run_python", {"code": "await python_slow(seconds=30)"}), "ok"])
    many = "for i in range(40):\n    await python_slow(seconds=0.5)"
    forty = ScriptedLLM([tool_call("run_python", {"code": many}), "ok"])
    try:
        for llm in (one, forty):
            await Agent(llm, kernel=kernel, code_mode=CodeMode(max_seconds=2)).run("go")
            [message] = [m for m in llm.requests[-1].messages if isinstance(m, ToolResultMessage)]
            assert message.is_error
            assert "time limit of 2 s" in message.content, message.content
    finally:
        await kernel.close()
    assert 30 not in finished
    assert len(finished) <= 4  # of 40 half-second calls, only those within the 2 s ran to their end


async def test_an_agent_run_deadline_reaches_the_mcp_server(mcp_kernel: FunctionKernel) -> None:
    llm = ScriptedLLM([tool_call("mcp://d.sleep", {"seconds": 30}), "never asked"])
    with pytest.raises(DeadlineExceededError):  # a hang guard below the 30 s sleep: the call must have been cut
        await asyncio.wait_for(Agent(llm, kernel=mcp_kernel).run("sleep", timeout=1.0), 20)  # server's timeout: 60 s
    assert len(llm.requests) == 1  # no model call after the run's time was up
    seen = (await mcp_kernel.call_tool("mcp://d.seen")).result  # type: ignore[attr-defined]
    assert seen == [seen[0]]
    assert 800 <= seen[0] <= 1000, seen  # ~1000 ms left when the call was sent


async def test_the_mcp_meta_deadline_is_the_call_timeout_when_nearer(mcp_kernel: FunctionKernel) -> None:
    await mcp_kernel.call_tool("mcp://d.echo", {"text": "a"}, timeout=5)
    await mcp_kernel.call_tool("mcp://d.echo", {"text": "b"}, timeout=None)
    seen = (await mcp_kernel.call_tool("mcp://d.seen", timeout=None)).result  # type: ignore[attr-defined]
    assert 4000 <= seen[0] <= 5000
    assert seen[1] is None  # no deadline: nothing sent


async def test_a_second_loop_call_keeps_its_deadline(mcp_kernel: FunctionKernel) -> None:
    thread, outcome = in_second_loop(mcp_kernel.call_tool("mcp://d.sleep", {"seconds": 30}, timeout=0.5))
    await joined(thread)
    assert isinstance(outcome[0], ToolTimeoutError), outcome


async def _until(condition: Any, within: float = 10.0) -> None:
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 - the condition is the kernel's registry, which has no event
            await asyncio.sleep(0.01)


async def test_a_call_started_in_the_background_keeps_only_its_own_timeout(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("nap", nap)
    with deadline(0.5):
        background = kernel.start_tool("python://nap", {"seconds": 0.8}, timeout=10)
    left = (await background.result()).result  # type: ignore[attr-defined]
    assert 9 < left <= 10  # not the block's 0.5 s: it outlives the block and is not cut at its end


async def test_a_deadline_block_that_caught_its_cut_ends_as_asyncio_timeout_does(kernel: FunctionKernel) -> None:
    # Issue 36, finding 7: __exit__ raised even when the body caught its cut and returned.
    kernel.register_python_tool("nap", nap)
    with deadline(0.05) as caught, contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(30)  # the body handles its own cut and finishes
    assert caught.expired
    async with asyncio.timeout(0.05) as peer:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)  # asyncio's rule, side by side
    assert peer.expired()
    with deadline(0.05) as handled, contextlib.suppress(ToolTimeoutError):
        await kernel.call_tool("python://nap", {"seconds": 30})  # a call's timeout handled: the block ends too
    assert handled.expired
    with pytest.raises(KeyError), deadline(0.05):  # something else raised ends the block with that
        await _raise_on_cancel(KeyError("mine"))
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def _raise_on_cancel(error: Exception) -> None:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        raise error from None


@pytest.mark.parametrize("timeout", [None, 5.0])
async def test_an_ended_call_is_freed_at_once_not_by_the_cycle_collector(timeout: float | None) -> None:
    """A call (and a deadline block) refers to no cycle of its own: with the collector off, it is gone when it ends."""
    import gc
    import weakref

    seen: list[weakref.ref[Any]] = []

    @pythontool
    async def record() -> int:
        call = current_call()
        assert call is not None
        seen.append(weakref.ref(call))
        return 1

    kernel = FunctionKernel()
    kernel.register_python_tool("record", record)
    gc.disable()
    try:
        assert (await kernel.call_tool("python://record", timeout=timeout)).result == 1  # type: ignore[attr-defined]
        with deadline(5.0) as block:
            await kernel.call_tool("python://record")
        blocks = [weakref.ref(block)]
        del block
        assert [ref() for ref in seen] == [None, None]
        assert blocks[0]() is None
    finally:
        gc.enable()
        await kernel.close()


async def test_a_call_cut_through_the_timer_of_the_block_around_it_is_expired() -> None:
    """One timer per deadline: the call inside a block arms none of its own, yet ends expired as the block does."""
    calls: list[Any] = []

    @pythontool
    async def nap() -> int:
        calls.append(current_call())
        await asyncio.sleep(30)
        return 1

    kernel = FunctionKernel()
    kernel.register_python_tool("nap", nap)
    try:
        with deadline(0.05) as block, pytest.raises(ToolTimeoutError):
            await kernel.call_tool("python://nap")
        assert block.expired
        [call] = calls
        assert call.expired
        assert call._timer is None  # it armed no timer of its own
    finally:
        await kernel.close()


@pythontool
def waits_for_a_person_in_its_thread(then_wait: bool) -> float | None:
    """A sync tool that pauses its own deadline from its worker thread (0.6 s against a 0.3 s timeout), then, when
    ``then_wait``, waits for ``_RELEASE``, recording in ``_WAITED`` whether the wait ended before the call did."""
    with deadline_paused():
        threading.Event().wait(0.6)
    call = current_call()
    left = call.remaining() if call is not None else None
    if then_wait:
        _WAITED.append(_RELEASE.wait(30))
    return left


_RELEASE = threading.Event()
_WAITED: list[bool] = []


async def test_a_sync_tool_pauses_its_deadline_from_its_thread_and_is_cut_after_it(kernel: FunctionKernel) -> None:
    """From a worker thread the pause stopped and armed the loop's timer off the loop's thread (asyncio's debug
    mode: RuntimeError out of the tool), and the timer armed again never cut the call: it ended only when its
    thread returned."""
    kernel.register_python_tool("person", waits_for_a_person_in_its_thread)
    result = await kernel.call_tool("python://person", {"then_wait": False}, timeout=0.3)
    assert 0 < (result.result or -1) <= 0.3  # type: ignore[attr-defined]  # the clock went on from where it stopped
    try:
        with pytest.raises(ToolTimeoutError, match="python://person"):
            await kernel.call_tool("python://person", {"then_wait": True}, timeout=0.3)
        assert not _WAITED  # cut while its thread still waited, not when the thread returned
    finally:
        _RELEASE.set()
    await kernel.close()
    assert _WAITED == [True]


@pythontool
def pauses_once_cut() -> None:
    """A sync tool that, once its call was cut, pauses its deadline from its thread and records that it went on."""
    _GO.wait(30)
    with deadline_paused():
        pass
    _WENT_ON.set()


_GO = threading.Event()
_WENT_ON = threading.Event()


def test_a_cut_sync_tools_thread_pausing_after_its_loop_stopped_goes_on() -> None:
    """The thread of a cut call outlives it; pausing then, with its loop stopped (not closed), waited for the loop
    to run again: for ever, if it never does."""
    loop = asyncio.new_event_loop()
    kernel = FunctionKernel()
    kernel.register_python_tool("cut", pauses_once_cut)
    try:
        with pytest.raises(ToolTimeoutError):
            loop.run_until_complete(kernel.call_tool("python://cut", timeout=0.1))
        _GO.set()  # the loop is stopped now
        assert _WENT_ON.wait(30)
    finally:
        _GO.set()
        loop.run_until_complete(kernel.close())
        loop.close()


async def test_a_paused_deadline_stops_the_calls_own_clock_not_the_one_around_it(kernel: FunctionKernel) -> None:
    async def waits_for_a_person(call: ToolCall, call_next: CallNext) -> Any:
        with deadline_paused():  # as a durable run waits for the operator's answer about a step in doubt
            await asyncio.sleep(0.6)
        return await call_next(call)

    kernel.register_python_tool("nap", nap)
    kernel.add_middleware(waits_for_a_person)
    left = (await kernel.call_tool("python://nap", {"seconds": 0}, timeout=0.3)).result  # type: ignore[attr-defined]
    assert 0 < (left or -1) <= 0.3  # the call's own clock went on from where it stopped
    with pytest.raises(ToolTimeoutError, match="cut at the deadline of the block"), deadline(0.3):
        await kernel.call_tool("python://nap", {"seconds": 0}, timeout=60)  # an inherited deadline still runs
    with pytest.raises(ToolTimeoutError, match="python://nap"):
        await kernel.call_tool("python://nap", {"seconds": 30}, timeout=0.3)  # after the pause, the clock runs
