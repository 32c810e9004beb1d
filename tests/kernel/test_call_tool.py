"""FunctionKernel.call_tool on python:// tools: validation, coercion, errors, threads and timeouts."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from kavalai import (
    FunctionKernel,
    FunctionKernelException,
    InvalidToolURIError,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolOutputError,
    ToolTimeoutError,
    ToolURI,
    pythontool,
)


class Entry(BaseModel):
    name: str
    size: int


@pythontool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


@pythontool
async def aadd(a: int, b: int) -> int:
    return a + b


@pythontool
def stringly(value: str) -> int:
    return value


@pythontool
def listing(names: list[str]) -> list[Entry]:
    return [Entry(name=n, size=len(n)) for n in names]


@pythontool
def entry(name: str) -> Entry:
    return {"name": name, "size": "3"}


@pythontool
def total(entries: list[Entry]) -> int:
    assert all(isinstance(e, Entry) for e in entries)
    return sum(e.size for e in entries)


@pythontool
def boom(message: str) -> None:
    raise RuntimeError(message)


async def test_call_returns_validated_wrapped_output(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("math.add", add)
    result = await kernel.call_tool("python://math.add", arguments={"a": "2", "b": 3})
    assert result.result == 5
    assert type(result) is kernel.get_output_model("python://math.add")


async def test_defaults_and_none_arguments(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("math.add", add)
    assert (await kernel.call_tool("python://math.add", {"a": 1})).result == 2
    with pytest.raises(ToolInputError, match="a: Field required"):
        await kernel.call_tool("python://math.add")


async def test_async_tool_is_awaited(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("aadd", aadd)
    assert (await kernel.call_tool("python://aadd", {"a": 1, "b": 2})).result == 3


async def test_return_value_is_coerced(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("coerce", stringly)
    result = await kernel.call_tool("python://coerce", {"value": "50"})
    assert result.result == 50
    assert isinstance(result.result, int)


async def test_return_value_that_cannot_fit_raises_output_error(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("coerce", stringly)
    with pytest.raises(ToolOutputError) as info:
        await kernel.call_tool("python://coerce", {"value": "fifty"})
    message = str(info.value)
    assert "python://coerce returned 'fifty'" in message
    assert "result: Input should be a valid integer" in message
    assert info.value.uri == "python://coerce"
    assert info.value.errors[0]["loc"] == ("result",)


async def test_model_returns(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("entry", entry)
    kernel.register_python_tool("listing", listing)
    one = await kernel.call_tool("python://entry", {"name": "abc"})
    assert one == Entry(name="abc", size=3)
    many = await kernel.call_tool("python://listing", {"names": ["a", "bb"]})
    assert many.result == [Entry(name="a", size=1), Entry(name="bb", size=2)]


async def test_model_parameters_receive_instances(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("total", total)
    result = await kernel.call_tool(
        "python://total", {"entries": [{"name": "a", "size": 2}, {"name": "b", "size": "5"}]}
    )
    assert result.result == 7


async def test_arguments_may_be_a_model(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("math.add", add)
    input_model = kernel.get_input_model("python://math.add")
    assert (await kernel.call_tool("python://math.add", input_model(a=4))).result == 5

    class Other(BaseModel):
        a: int
        b: int

    assert (await kernel.call_tool("python://math.add", Other(a=1, b=1))).result == 2


async def test_input_error_names_the_uri_and_each_problem(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("math.add", add)
    with pytest.raises(ToolInputError) as info:
        await kernel.call_tool("python://math.add", {"a": "x", "extra": 1})
    message = str(info.value)
    assert message.startswith("Invalid arguments for python://math.add:")
    assert "a: Input should be a valid integer" in message
    assert "(got 'x')" in message
    assert "extra: unexpected argument" in message
    assert {e["type"] for e in info.value.errors} == {"int_parsing", "extra_forbidden"}
    assert isinstance(info.value.__cause__, Exception)


async def test_tool_exception_becomes_execution_error_chained(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("boom", boom)
    with pytest.raises(ToolExecutionError) as info:
        await kernel.call_tool("python://boom", {"message": "disk on fire"})
    assert str(info.value) == "Tool python://boom failed: RuntimeError: disk on fire"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert info.value.uri == "python://boom"


async def test_tool_raising_kernel_exception_passes_through(kernel: FunctionKernel) -> None:
    inner = FunctionKernel()

    @pythontool
    async def nested() -> int:
        return (await inner.call_tool("python://missing")).result

    kernel.register_python_tool("nested", nested)
    with pytest.raises(ToolNotFoundError, match="python://missing"):
        await kernel.call_tool("python://nested")


async def test_unknown_tool_suggests_close_match(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("fs.ls", add)
    with pytest.raises(ToolNotFoundError) as info:
        await kernel.call_tool("python://fs.lss")
    assert str(info.value) == "Unknown tool 'python://fs.lss'. Did you mean 'python://fs.ls'?"
    assert info.value.suggestions == ["python://fs.ls"]
    with pytest.raises(ToolNotFoundError) as far:
        await kernel.call_tool("mcp://nothing.here")
    assert "Did you mean" not in str(far.value)


async def test_invalid_uri(kernel: FunctionKernel) -> None:
    with pytest.raises(InvalidToolURIError, match="expected 'python://name'"):
        await kernel.call_tool("fs.ls")


async def test_call_with_tooluri_object(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("math.add", add)
    assert (await kernel.call_tool(ToolURI.parse("python://math.add"), {"a": 1})).result == 2


async def test_sync_tools_run_in_a_worker_thread_and_do_not_block_the_loop(kernel: FunctionKernel) -> None:
    release = threading.Event()
    seen: list[str] = []

    @pythontool
    def blocking() -> str:
        seen.append(threading.current_thread().name)
        # Blocks until the event loop (free, since we are in a thread) sets the event.
        assert release.wait(timeout=10)
        return "done"

    kernel.register_python_tool("blocking", blocking)
    call = asyncio.create_task(kernel.call_tool("python://blocking"))
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    release.set()
    assert (await call).result == "done"
    assert seen[0] != threading.main_thread().name


async def test_inline_tools_run_on_the_event_loop_thread(kernel: FunctionKernel) -> None:
    @pythontool(inline=True)
    def where() -> str:
        return threading.current_thread().name

    kernel.register_python_tool("where", where)
    assert (await kernel.call_tool("python://where")).result == threading.current_thread().name


async def test_per_call_timeout(kernel: FunctionKernel) -> None:
    @pythontool
    async def sleepy() -> None:
        await asyncio.sleep(30)

    kernel.register_python_tool("sleepy", sleepy)
    with pytest.raises(ToolTimeoutError) as info:
        await kernel.call_tool("python://sleepy", timeout=0.05)
    assert str(info.value) == "Tool python://sleepy timed out after 0.05 s."
    assert info.value.timeout == 0.05
    assert isinstance(info.value, TimeoutError)


async def test_per_tool_default_timeout_and_override(kernel: FunctionKernel) -> None:
    @pythontool(timeout=0.05)
    async def sleepy(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    kernel.register_python_tool("sleepy", sleepy)
    with pytest.raises(ToolTimeoutError, match="after 0.05 s"):
        await kernel.call_tool("python://sleepy", {"seconds": 30})
    assert (await kernel.call_tool("python://sleepy", {"seconds": 0.1}, timeout=None)).result == 0.1


async def test_timeout_of_a_sync_tool_returns_without_waiting_for_the_thread(kernel: FunctionKernel) -> None:
    release = threading.Event()

    @pythontool(timeout=0.05)
    def stuck() -> None:
        release.wait(timeout=10)

    kernel.register_python_tool("stuck", stuck)
    try:
        with pytest.raises(ToolTimeoutError):
            await kernel.call_tool("python://stuck")
    finally:
        release.set()


async def test_tool_raising_timeout_error_itself_is_an_execution_error(kernel: FunctionKernel) -> None:
    @pythontool(timeout=10)
    async def own_timeout() -> None:
        raise TimeoutError("upstream took too long")

    kernel.register_python_tool("own", own_timeout)
    with pytest.raises(ToolExecutionError, match="TimeoutError: upstream took too long"):
        await kernel.call_tool("python://own")


async def test_every_error_is_a_function_kernel_exception(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("boom", boom)
    for uri, args in [("python://boom", {"message": "x"}), ("python://nope", {}), ("bad", {})]:
        with pytest.raises(FunctionKernelException):
            await kernel.call_tool(uri, args)


async def test_cancellation_propagates(kernel: FunctionKernel) -> None:
    started = asyncio.Event()

    @pythontool
    async def forever() -> None:
        started.set()
        await asyncio.sleep(30)

    kernel.register_python_tool("forever", forever)
    task = asyncio.create_task(kernel.call_tool("python://forever"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
