"""Deadlines and ``close()`` at their edges, as a careless or hostile user meets them (issue 36, fifth session):
a deadline block entered twice, a sync tool that closes its own kernel from its worker thread, and declared limits
given a bool or an integer too large for a float; and a hand-built ``ToolDefinition`` whose own output model has a
``result`` field. Sixth session: two pauses of one call at once, numbers the rule cannot take, a float subclass
whose hooks lie, and a ``close()`` that closes a server connecting for a call."""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from decimal import Decimal
from fractions import Fraction

import psutil
import pytest
from pydantic import BaseModel
from tests.adapters.test_threads import _until

from kavalai import FunctionKernel, pythontool
from kavalai.adapters.mcp import McpServer
from kavalai.adapters.rest import RestServer
from kavalai.errors import (
    DeadlineExceededError,
    KernelClosedError,
    ServerConnectionError,
    ToolOutputError,
    ToolTimeoutError,
)
from kavalai.kernel import (
    MAX_SECONDS,
    ToolDefinition,
    ToolURI,
    current_call,
    deadline,
    deadline_paused,
    limit_seconds,
)


@pythontool
async def nap(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "rested"


async def test_a_deadline_block_is_entered_once_as_asyncio_timeout_is() -> None:
    # Entered a second time, the block's deadline was never armed again: the body ran uncut.
    block = deadline(0.05)
    with block:
        pass
    with pytest.raises(RuntimeError, match="already entered: make a new one"), block:
        await asyncio.sleep(30)  # pragma: no cover - refused before the body runs
    kernel = FunctionKernel()
    kernel.register_python_tool("nap", nap)
    with pytest.raises(ToolTimeoutError), deadline(0.05):  # a new block for each: cut as documented
        await kernel.call_tool("python://nap", {"seconds": 30})
    await kernel.close()


async def test_a_deadline_block_is_also_an_async_context_manager_as_asyncio_timeout_is() -> None:
    # `async with deadline(2):`, written as asyncio.timeout is, raised TypeError: not an async context manager.
    kernel = FunctionKernel()
    kernel.register_python_tool("nap", nap)
    with pytest.raises(ToolTimeoutError, match="cut at the deadline of the block around it"):
        async with deadline(0.05):
            await kernel.call_tool("python://nap", {"seconds": 30})
    with pytest.raises(DeadlineExceededError):
        async with deadline(0.05) as block:
            await asyncio.sleep(30)
    assert block.expired
    async with deadline(5) as calm:
        assert (await kernel.call_tool("python://nap", {"seconds": 0})).result == "rested"  # type: ignore[attr-defined]
    assert not calm.expired
    await kernel.close()


async def test_a_sync_tool_that_closes_its_own_kernel_is_left_to_finish(caplog: pytest.LogCaptureFixture) -> None:
    # The call asking for close() from its worker thread was cut, and close() waited its whole bound (5 s) for that
    # very thread, then named it as left running; an async tool closing its kernel is left to finish at once.
    kernel = FunctionKernel()
    loop = asyncio.get_running_loop()

    @pythontool
    def shut() -> str:
        """Close the kernel this tool runs in, from the tool's worker thread."""
        asyncio.run_coroutine_threadsafe(kernel.close(), loop).result(30)
        return "closed"

    kernel.register_python_tool("shut", shut)
    kernel.register_python_tool("nap", nap)
    other = asyncio.create_task(kernel.call_tool("python://nap", {"seconds": 30}))
    await _until(lambda: len(kernel.calls_in_flight()) == 1)
    with caplog.at_level(logging.WARNING, logger="kavalai"):
        result = await kernel.call_tool("python://shut")
    assert result.result == "closed"  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="closed while python://nap"):
        await other  # the other call was cut as ever
    assert not [r for r in caplog.records if "worker thread" in r.getMessage()]
    await _until(lambda: kernel.threads_in_flight() == [])
    assert kernel.calls_in_flight() == []


@pytest.mark.parametrize("value", [True, False])
def test_a_declared_limit_refuses_a_bool(value: bool) -> None:
    # `timeout: yes` in a config file was one second; the one rule takes no bool.
    with pytest.raises(ValueError, match="not true or false"):
        RestServer(name="r", url="http://h", timeout=value)
    with pytest.raises(ValueError, match="not true or false"):
        McpServer(name="m", command="x", connect_timeout=value)


@pytest.mark.parametrize("value", [10**400, 10**20, int(MAX_SECONDS)])
def test_a_declared_limit_clamps_an_integer_too_large_for_a_float(value: int) -> None:
    # 10**400 was refused "Input should be a valid number"; the rule clamps it, as it clamps math.inf.
    assert RestServer(name="r", url="http://h", timeout=value).timeout == MAX_SECONDS
    assert McpServer(name="m", command="x", timeout=value, connect_timeout=value).connect_timeout == MAX_SECONDS
    assert RestServer(name="r", url="http://h", timeout="30").timeout == 30.0  # a number as text, as ${VAR} gives
    assert RestServer(name="r", url="http://h", timeout=math.inf).timeout == MAX_SECONDS


class EmptyInput(BaseModel):
    """No arguments."""


class Reading(BaseModel):
    """A tool's own output model with a ``result`` field among others: the output itself, not a wrapper."""

    result: int
    unit: str


class Boxed(BaseModel):
    """A model whose only field is ``result``: a wrapper, as the generated ones are."""

    result: int


async def _reading(_: BaseModel) -> dict[str, object]:
    return {"result": 3, "unit": "mm"}


async def _three(_: BaseModel) -> int:
    return 3


async def test_a_hand_built_definitions_own_output_model_is_not_taken_for_a_wrapper() -> None:
    # wrapped defaulted to True: a hand-built definition whose own model has a `result` field was validated as
    # {"result": raw} and every call failed with ToolOutputError.
    kernel = FunctionKernel()
    own = ToolDefinition(ToolURI.parse("python://reading"), "A reading.", EmptyInput, Reading, _reading)
    boxed = ToolDefinition(ToolURI.parse("python://boxed"), "Three.", EmptyInput, Boxed, _three)
    assert (own.wrapped, boxed.wrapped) == (False, True)
    kernel.add_tool(own)
    kernel.add_tool(boxed)
    assert await kernel.call_tool("python://reading") == Reading(result=3, unit="mm")
    assert (await kernel.call_tool("python://boxed")).result == 3  # type: ignore[attr-defined]
    said = ToolDefinition(ToolURI.parse("python://said"), "Three.", EmptyInput, Boxed, _three, wrapped=False)
    kernel.add_tool(said)  # said so: validated as the model itself (and 3 is not a Boxed)
    with pytest.raises(ToolOutputError, match="does not fit its output model Boxed"):
        await kernel.call_tool("python://said")
    await kernel.close()


# Issue 36, sixth session: two pauses of one call at once, a number the rule cannot take, a subclass of float
# whose hooks lie, and a close() that closes a server while it connects for a call.


async def test_two_pauses_of_one_call_in_two_tasks_keep_the_clock_stopped_until_the_last_ends() -> None:
    """The first pause to end armed the call's own timer again while the second still waited: the call was cut at
    its 0.2 s timeout though every moment of it past 0.05 s was paused."""

    @pythontool
    async def asks_two_people() -> float:
        async def ask(seconds: float) -> None:
            with deadline_paused():
                await asyncio.sleep(seconds)

        await asyncio.gather(ask(0.05), ask(0.5))
        call = current_call()
        assert call is not None
        return call.remaining() or 0.0

    kernel = FunctionKernel()
    kernel.register_python_tool("ask", asks_two_people)
    kernel.register_python_tool("nap", nap)
    left = (await kernel.call_tool("python://ask", timeout=0.2)).result  # type: ignore[attr-defined]
    assert 0 < left <= 0.2  # the clock goes on from what was left at the first pause
    with pytest.raises(ToolTimeoutError, match="python://nap"):
        await kernel.call_tool("python://nap", {"seconds": 30}, timeout=0.1)  # nothing paused is left behind
    assert kernel.calls_in_flight() == []
    await kernel.close()


@pytest.mark.parametrize(("value", "kind"), [(Decimal(5), "decimal.Decimal"), (Fraction(1, 2), "fractions.Fraction")])
def test_a_number_that_is_not_an_int_or_a_float_is_refused_without_calling_it_not_positive(
    value: object, kind: str
) -> None:
    """The message said "timeout must be positive ..., got Decimal('5')" (numpy's int64 too): 5 is positive."""
    with pytest.raises(ValueError, match="must be a number of seconds") as info:
        limit_seconds(value)
    assert "positive" not in str(info.value)
    assert repr(value) in str(info.value)
    assert kind in str(info.value)


class _Lying(float):
    """A float whose own hooks give another number than the one it holds."""

    def __float__(self) -> float:
        return -1.0

    def __gt__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


@pytest.mark.parametrize(("held", "seconds"), [(5.0, 5.0), (-3.0, None), (math.nan, None)])
async def test_a_subclass_of_float_is_read_as_the_number_it_holds(held: float, seconds: float | None) -> None:
    """A float subclass holding 5 whose __float__ said -1 gave a call already past its deadline; one holding -3 whose
    __gt__ said yes was taken; one holding nan failed with "cannot convert float NaN to integer"."""
    if seconds is None:
        with pytest.raises(ValueError, match=r"must be positive \(in seconds\) or None, got"):
            limit_seconds(_Lying(held))
        return
    assert limit_seconds(_Lying(held)) == seconds
    kernel = FunctionKernel()

    @pythontool
    async def left() -> float:
        call = current_call()
        assert call is not None
        return call.remaining() or 0.0

    kernel.register_python_tool("left", left)
    assert 4 < (await kernel.call_tool("python://left", timeout=_Lying(held))).result <= 5  # type: ignore[attr-defined]
    await kernel.close()


async def test_a_call_whose_server_is_connecting_when_close_runs_ends_with_kernel_closed() -> None:
    """The call of a tool not known yet connects its server before it is a call in flight; close() closed that server
    and the caller saw ServerConnectionError "closed while connecting", not KernelClosedError naming its URI."""
    kernel = FunctionKernel()
    mute = McpServer(name="mute", command=sys.executable, args=["-c", "import time; time.sleep(60)"], timeout=60)
    kernel.register_mcp_server(mute)
    before = {child.pid for child in psutil.Process().children()}  # servers other tests share are not this one
    call = asyncio.create_task(kernel.call_tool("mcp://mute.anything"))
    await _until(lambda: {child.pid for child in psutil.Process().children()} - before)  # it is connecting
    await kernel.close()
    with pytest.raises(KernelClosedError, match="mcp://mute.anything") as info:
        await call
    assert info.value.uri == "mcp://mute.anything"
    assert isinstance(info.value.__cause__, ServerConnectionError)
    kernel.register_mcp_server(McpServer(name="gone", command=sys.executable, args=["-c", "pass"], timeout=60))
    with pytest.raises(ServerConnectionError) as later:  # a connection failing with no close() around it is itself
        await kernel.call_tool("mcp://gone.anything")
    assert not isinstance(later.value, KernelClosedError)
    assert kernel.calls_in_flight() == []
    await kernel.close()
