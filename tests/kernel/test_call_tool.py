"""FunctionKernel.call_tool on python:// tools: validation, coercion, errors, threads and timeouts."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import threading
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, field_validator

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
from kavalai.kernel import FIELDS_CALL, CallNext, ToolCall, current_call, deadline


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


async def test_an_inner_calls_error_a_tool_lets_through_ends_the_outer_call_naming_it(kernel: FunctionKernel) -> None:
    inner = FunctionKernel()

    @pythontool
    async def nested() -> int:
        return (await inner.call_tool("python://missing")).result

    @pythontool
    async def slow() -> int:
        await asyncio.sleep(30)
        return 1

    @pythontool
    async def waits() -> int:
        return (await kernel.call_tool("python://slow", timeout=0.05)).result

    kernel.register_python_tool("nested", nested)
    kernel.register_python_tool("slow", slow)
    kernel.register_python_tool("waits", waits)
    with pytest.raises(
        ToolExecutionError, match="^Tool python://nested failed: Unknown tool 'python://missing'"
    ) as info:
        await kernel.call_tool("python://nested")
    assert info.value.uri == "python://nested"
    assert isinstance(info.value.__cause__, ToolNotFoundError)
    assert info.value.__cause__.uri == "python://missing"
    with pytest.raises(ToolExecutionError, match="^Tool python://waits failed: Tool python://slow timed out") as timed:
        await kernel.call_tool("python://waits", timeout=10)
    assert timed.value.uri == "python://waits"
    assert isinstance(timed.value.__cause__, ToolTimeoutError)
    assert timed.value.__cause__.uri == "python://slow"


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


# ------------------------------------------------------------------------------------------ hardening (review)


class OtherEntry(BaseModel):
    name: str
    size: str


@dataclasses.dataclass
class EntryRecord:
    name: str
    size: int


async def test_objects_with_the_fields_of_the_output_model_are_coerced_into_it(kernel: FunctionKernel) -> None:
    @pythontool
    def from_other_model() -> Entry:
        return OtherEntry(name="a", size="1")  # type: ignore[return-value]

    @pythontool
    def from_dataclasses() -> list[Entry]:
        return [EntryRecord(name="b", size=2)]  # type: ignore[list-item]

    kernel.register_python_tool("other", from_other_model)
    kernel.register_python_tool("records", from_dataclasses)
    assert await kernel.call_tool("python://other") == Entry(name="a", size=1)
    assert (await kernel.call_tool("python://records")).result == [Entry(name="b", size=2)]


async def test_an_output_that_fails_as_a_whole_is_labelled_as_the_return_value(kernel: FunctionKernel) -> None:
    @pythontool
    def not_an_entry() -> Entry:
        return 42  # type: ignore[return-value]

    kernel.register_python_tool("bad", not_an_entry)
    with pytest.raises(ToolOutputError) as info:
        await kernel.call_tool("python://bad")
    assert str(info.value).startswith("python://bad returned 42, which does not fit its output model Entry: ")
    assert "(return value): Input should be a valid dictionary or object to extract fields from (got 42)" in str(
        info.value
    )


class Picky(BaseModel):
    value: int

    @field_validator("value")
    @classmethod
    def no_thirteen(cls, value: int) -> int:
        if value == 13:
            raise LookupError("13 is unlucky")  # not a ValueError: pydantic lets it through
        return value


async def test_a_model_validator_raising_anything_is_still_a_kernel_error(kernel: FunctionKernel) -> None:
    @pythontool
    def take(p: Picky) -> int:
        return p.value

    @pythontool
    def give(value: int) -> Picky:
        return {"value": value}  # type: ignore[return-value]

    kernel.register_python_tool("take", take)
    kernel.register_python_tool("give", give)
    with pytest.raises(ToolInputError) as into:
        await kernel.call_tool("python://take", {"p": {"value": 13}})
    assert (
        str(into.value) == "Invalid arguments for python://take: validating them raised LookupError: 13 is unlucky "
        "(argument validation failed)"
    )
    assert isinstance(into.value.__cause__, LookupError)
    with pytest.raises(ToolOutputError) as out:
        await kernel.call_tool("python://give", {"value": 13})
    assert str(out.value) == (
        "python://give returned {'value': 13}, and validating it raised LookupError: 13 is unlucky"
    )
    assert isinstance(out.value.__cause__, LookupError)


@pytest.mark.parametrize("arguments", [[1, 2], "a=1", 5])
async def test_arguments_that_are_not_a_mapping(kernel: FunctionKernel, arguments: Any) -> None:
    kernel.register_python_tool("math.add", add)
    with pytest.raises(ToolInputError) as info:
        await kernel.call_tool("python://math.add", arguments)
    assert str(info.value).startswith("Invalid arguments for python://math.add: (arguments): Input should be a valid")


async def _plus_one(x: int) -> int:
    return x + 1


@pytest.mark.parametrize("inline", [False, True])
async def test_a_sync_function_returning_an_awaitable_gives_its_result(kernel: FunctionKernel, inline: bool) -> None:
    @pythontool(inline=inline)
    def delegate(x: int) -> int:
        return _plus_one(x)  # type: ignore[return-value]

    kernel.register_python_tool("delegate", delegate)
    assert (await kernel.call_tool("python://delegate", {"x": 1})).result == 2


async def test_async_callables_of_every_shape_run_on_the_loop(kernel: FunctionKernel) -> None:
    loop_thread = threading.current_thread().name

    class Where:
        async def __call__(self) -> str:
            return threading.current_thread().name

    async def where(tag: str) -> str:
        return f"{tag}:{threading.current_thread().name}"

    kernel.register_python_tool("object", pythontool(Where()))
    kernel.register_python_tool("partial", pythontool(functools.partial(where, "p")))
    assert (await kernel.call_tool("python://object")).result == loop_thread
    assert (await kernel.call_tool("python://partial")).result == f"p:{loop_thread}"


async def test_concurrent_async_calls_each_get_their_own_result(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("aadd", aadd)
    results = await asyncio.gather(*(kernel.call_tool("python://aadd", {"a": i, "b": i}) for i in range(300)))
    assert [r.result for r in results] == [2 * i for i in range(300)]


async def test_sync_tools_run_concurrently_in_separate_threads(kernel: FunctionKernel) -> None:
    parties = 8
    barrier = threading.Barrier(parties, timeout=20)

    @pythontool
    def meet(i: int) -> int:
        barrier.wait()  # only returns once all eight calls are running at the same time
        return i

    kernel.register_python_tool("meet", meet)
    results = await asyncio.gather(*(kernel.call_tool("python://meet", {"i": i}) for i in range(parties)))
    assert [r.result for r in results] == list(range(parties))


async def test_a_timed_out_sync_call_returns_while_its_thread_still_runs(kernel: FunctionKernel) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @pythontool(timeout=0.05)
    def stuck() -> None:
        started.set()
        release.wait(timeout=20)
        finished.set()

    kernel.register_python_tool("stuck", stuck)
    try:
        with pytest.raises(ToolTimeoutError):
            await kernel.call_tool("python://stuck")
        assert started.is_set()
        assert not finished.is_set()  # the call came back without waiting for the thread
    finally:
        release.set()
    assert await asyncio.to_thread(finished.wait, 20)


async def test_cancelling_a_sync_call_returns_while_its_thread_still_runs(kernel: FunctionKernel) -> None:
    started, release = threading.Event(), threading.Event()

    @pythontool
    def blocked() -> None:
        started.set()
        release.wait(timeout=20)

    kernel.register_python_tool("blocked", blocked)
    task = asyncio.create_task(kernel.call_tool("python://blocked"))
    try:
        assert await asyncio.to_thread(started.wait, 20)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not release.is_set()
    finally:
        release.set()


async def test_a_tool_that_swallows_the_timeout_still_times_out(kernel: FunctionKernel) -> None:
    @pythontool(timeout=0.05)
    async def stubborn() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "finished anyway"
        return "slept"

    kernel.register_python_tool("stubborn", stubborn)
    with pytest.raises(ToolTimeoutError, match=r"^Tool python://stubborn timed out after 0.05 s\.$"):
        await kernel.call_tool("python://stubborn")
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("timeout", [0, -1])
async def test_a_per_call_timeout_of_zero_or_less_is_refused(kernel: FunctionKernel, timeout: float) -> None:
    # Issue 36: one rule for limits. A timeout is positive; a budget that may have run out is a deadline block.
    @pythontool
    async def sleepy() -> None:
        await asyncio.sleep(30)

    kernel.register_python_tool("sleepy", sleepy)
    with pytest.raises(ValueError, match=f"timeout must be positive \\(in seconds\\) or None, got {timeout}"):
        await kernel.call_tool("python://sleepy", timeout=timeout)
    with pytest.raises(ToolTimeoutError, match="was not started"), deadline(max(timeout, 0)):
        await kernel.call_tool("python://sleepy")


async def test_an_arbitrary_class_parameter_accepts_instances_from_python(kernel: FunctionKernel) -> None:
    class Handle:
        def __init__(self, name: str) -> None:
            self.name = name

    @pythontool
    def open_handle(handle: Handle) -> str:
        return handle.name

    kernel.register_python_tool("handle", open_handle)
    assert (await kernel.call_tool("python://handle", {"handle": Handle("h")})).result == "h"
    with pytest.raises(ToolInputError, match="handle: Input should be an instance of"):
        await kernel.call_tool("python://handle", {"handle": {"name": "h"}})


# --------------------------------------------------------------------------------------------- call_tool_as


async def test_call_tool_as_returns_the_model_or_the_wrapped_result(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("entry", entry)
    kernel.register_python_tool("listing", listing)
    kernel.register_python_tool("math.add", add)
    assert await kernel.call_tool_as(Entry, "python://entry", {"name": "abc"}) == Entry(name="abc", size=3)
    many = await kernel.call_tool_as(list[Entry], "python://listing", {"names": ["a"]})
    assert many == [Entry(name="a", size=1)]
    assert await kernel.call_tool_as(int, "python://math.add", {"a": 1, "b": "2"}) == 3
    assert await kernel.call_tool_as(int | None, "python://math.add", {"a": 1}, timeout=5) == 2  # type: ignore[arg-type]
    output_model = kernel.get_output_model("python://math.add")
    assert isinstance(await kernel.call_tool_as(output_model, "python://math.add", {"a": 1}), output_model)


async def test_call_tool_as_names_the_tool_and_what_it_returned(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("entry", entry)
    kernel.register_python_tool("math.add", add)
    with pytest.raises(ToolOutputError) as wrapped:
        await kernel.call_tool_as(str, "python://math.add", {"a": 1})
    assert str(wrapped.value).startswith("python://math.add returned 2, which does not fit the output_type str")
    assert wrapped.value.uri == "python://math.add"
    with pytest.raises(ToolOutputError, match=r"does not fit the output_type typing.Literal\[3\]"):
        await kernel.call_tool_as(Literal[3], "python://math.add", {"a": 1})  # type: ignore[arg-type]
    assert await kernel.call_tool_as(Literal[3], "python://math.add", {"a": 2}) == 3  # type: ignore[arg-type]
    with pytest.raises(ToolNotFoundError, match="Did you mean 'python://math.add'"):
        await kernel.call_tool_as(int, "python://math.ad")


class Todo(BaseModel):
    name: str
    size: int


async def test_output_type_validates_into_the_callers_own_types(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("entry", entry)
    kernel.register_python_tool("listing", listing)
    one = await kernel.call_tool("python://entry", {"name": "abc"}, output_type=Todo)
    assert type(one) is Todo
    assert one == Todo(name="abc", size=3)
    many = await kernel.call_tool("python://listing", {"names": ["a", "bb"]}, output_type=list[Todo])
    assert [type(item) for item in many] == [Todo, Todo]
    assert [item.size for item in many] == [1, 2]
    as_dict = await kernel.call_tool("python://entry", {"name": "abc"}, output_type=dict[str, Any])
    assert as_dict == {"name": "abc", "size": 3}
    with pytest.raises(ToolOutputError, match="size: Input should be a valid string"):
        await kernel.call_tool("python://entry", {"name": "a"}, output_type=OtherEntry)  # no int -> str coercion


class Total(BaseModel):
    result: int


class Named(BaseModel):
    value: float = Field(alias="Value")


async def test_a_bare_value_fills_a_one_field_output_type(kernel: FunctionKernel) -> None:
    # Kaval.AI 1.0 wrapped a tool's bare answer into a caller's model of one field.
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("coerce", stringly)
    assert await kernel.call_tool("python://math.add", {"a": 40, "b": 2}, output_type=Total) == Total(result=42)
    named = await kernel.call_tool("python://math.add", {"a": 1, "b": 1}, output_type=Named)
    assert named.value == 2.0
    with pytest.raises(ToolOutputError, match="output_type Todo"):  # two fields: no guessing
        await kernel.call_tool("python://math.add", {"a": 1, "b": 1}, output_type=Todo)


async def test_output_type_that_does_not_fit_is_an_output_error_naming_the_tool(kernel: FunctionKernel) -> None:
    kernel.register_python_tool("listing", listing)
    with pytest.raises(ToolOutputError, match=r"python://listing returned .*output_type list\[int\]") as info:
        await kernel.call_tool("python://listing", {"names": ["a"]}, output_type=list[int])
    assert info.value.errors


# --------------------------------------------------------------------------------- every message names the URI


async def test_every_call_error_names_the_uri_in_its_message_and_field(kernel: FunctionKernel) -> None:
    @pythontool(timeout=0.01)
    async def slow() -> None:
        await asyncio.sleep(30)

    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("coerce", stringly)
    kernel.register_python_tool("boom", boom)
    kernel.register_python_tool("slow", slow)
    cases: list[tuple[str, dict[str, Any], type[FunctionKernelException]]] = [
        ("python://math.add", {"a": "x"}, ToolInputError),
        ("python://coerce", {"value": "x"}, ToolOutputError),
        ("python://boom", {"message": "m"}, ToolExecutionError),
        ("python://slow", {}, ToolTimeoutError),
        ("python://math.ad", {}, ToolNotFoundError),
        ("python:/math.add", {}, InvalidToolURIError),
    ]
    for uri, arguments, expected in cases:
        with pytest.raises(expected) as info:
            await kernel.call_tool(uri, arguments)
        assert uri in str(info.value), (expected.__name__, str(info.value))
        assert info.value.uri == uri


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


async def test_sync_tools_in_threads_see_the_callers_context_variables(kernel: FunctionKernel) -> None:
    @pythontool
    def request_id() -> str:
        return f"{REQUEST_ID.get()} on {threading.current_thread() is threading.main_thread()}"

    kernel.register_python_tool("request_id", request_id)
    REQUEST_ID.set("req-7")
    assert (await kernel.call_tool("python://request_id")).result == "req-7 on False"


async def test_the_fields_call_an_invoker_names_is_its_own_and_middleware_still_sees_the_call() -> None:
    """A plain async Python tool's invoker names its function (``FIELDS_CALL``), which the kernel calls itself when
    nothing wraps the call; a definition given another ``invoke`` runs that one, never the old function; with
    middleware the chain runs, as before."""
    kernel = FunctionKernel()

    @pythontool
    async def total(a: int, b: int) -> int:
        return a + b

    uri = kernel.register_python_tool("total", total)
    definition = kernel.get_tool_definition(uri)
    assert getattr(definition.invoke, FIELDS_CALL) is inspect.unwrap(total)
    assert (await kernel.call_tool(uri, {"a": 1, "b": 2})).result == 3

    async def doubled(args: BaseModel) -> int:
        return 2 * (args.a + args.b)  # type: ignore[attr-defined]

    kernel.registry.add_tool(dataclasses.replace(definition, invoke=doubled), replace=True)
    assert (await kernel.call_tool(uri, {"a": 1, "b": 2})).result == 6

    seen: list[str] = []

    async def note(call: ToolCall, call_next: CallNext) -> Any:
        seen.append(call.uri)
        return await call_next(call)

    kernel.registry.add_tool(definition, replace=True)
    kernel.add_middleware(note)
    assert (await kernel.call_tool(uri, {"a": 2, "b": 2})).result == 4
    assert seen == [uri]
    await kernel.close()


async def test_the_record_call_tool_builds_has_every_slot_a_constructed_one_has() -> None:
    """call_tool writes ToolCall.__init__'s stores itself (no frame): a slot added to the record and not written
    there would be unset, and this fails; the values match a constructed record's, bar the task it runs in."""
    kernel = FunctionKernel()
    seen: list[ToolCall] = []

    @pythontool
    async def look() -> int:
        call = current_call()
        assert call is not None
        seen.append(call)
        return 1

    uri = kernel.register_python_tool("look", look)
    await kernel.call_tool(uri, {}, timeout=None)
    [made] = seen
    definition = kernel.get_tool_definition(uri)
    built = ToolCall(definition, made.arguments)
    slots = {name for cls in ToolCall.__mro__ for name in getattr(cls, "__slots__", ()) if name != "__weakref__"}
    assert len(slots) > 15
    for name in sorted(slots):
        assert hasattr(made, name), name
        if name not in {"_task", "_done"}:
            assert getattr(made, name) == getattr(built, name), name
    assert made._task is not None  # the task it ran in
    assert made._done is False  # ended without a timer: nothing marks it done
    await kernel.close()
