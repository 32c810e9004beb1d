"""The call pipeline: adapters plugged in by scheme, one registry, middleware around every call, the call context,
and close() failing the calls in flight."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, ClassVar

import anyio
import pytest
from pydantic import BaseModel

from kavalai import (
    FunctionKernel,
    InvalidToolURIError,
    KernelClosedError,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolTimeoutError,
    pythontool,
)
from kavalai.kernel import (
    CallNext,
    Kernel,
    ToolAdapter,
    ToolCall,
    ToolDefinition,
    ToolURI,
    current_call,
    model_from_json_schema,
    output_model_from_json_schema,
)

# ----------------------------------------------------------------------------------------- a toy scheme, plugged in


class EchoAdapter(ToolAdapter):
    """A scheme of our own: ``echo://<server>.<tool>`` tools that answer with their arguments, upper-cased.

    Servers are "connected" on demand, as an MCP server would be: resolve() publishes the tool then.
    """

    scheme: ClassVar[str] = "echo"

    def __init__(self, registry: Any) -> None:
        super().__init__(registry)
        self.servers: dict[str, list[str]] = {}
        self.connected: set[str] = set()
        self.closed = 0

    def add_server(self, name: str, tools: list[str]) -> None:
        self.servers[name] = tools

    async def connect(self) -> None:
        for name in self.servers:
            self._publish(name)

    def _publish(self, server: str) -> None:
        if server in self.connected:
            return
        self.connected.add(server)
        for tool in self.servers[server]:
            uri = ToolURI.build("echo", server, tool)

            async def invoke(args: BaseModel, tool: str = tool) -> Any:
                return {"said": f"{tool}: {args.text.upper()}"}  # type: ignore[attr-defined]

            self.registry.add_tool(
                ToolDefinition(
                    uri=uri,
                    description=f"Echo {tool}",
                    input_model=model_from_json_schema(
                        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                        f"Echo{tool.title()}Input",
                    ),
                    output_model=output_model_from_json_schema(
                        {"type": "object", "properties": {"said": {"type": "string"}}}, f"Echo{tool.title()}Output"
                    )[0],
                    invoke=invoke,
                    wrapped=False,
                )
            )

    async def resolve(self, uri: ToolURI) -> ToolDefinition | None:
        if uri.server in self.servers:
            self._publish(uri.server)
            return self.registry.get(str(uri))
        return None

    def missing_hint(self, uri: ToolURI) -> str | None:
        return f"Echo servers: {', '.join(self.servers)}."

    async def aclose(self) -> None:
        self.closed += 1
        self.connected.clear()
        for definition in self.registry.tools_of("echo"):
            self.registry.remove_tool(definition.name)


async def test_a_new_scheme_is_a_new_adapter_and_nothing_in_the_kernel_changes() -> None:
    kernel = FunctionKernel()
    echo = EchoAdapter(kernel.registry)
    echo.add_server("loud", ["shout"])
    kernel.add_adapter(echo)
    assert "echo" in kernel.schemes
    result = await kernel.call_tool("echo://loud.shout", {"text": "hi"})  # connected on demand
    assert result.said == "shout: HI"  # type: ignore[attr-defined]
    assert kernel.list_tools("echo://*") == ["echo://loud.shout"]
    described = await kernel.get_tool_descriptions(["echo://*"])
    assert described[0]["inputSchema"]["required"] == ["text"]
    with pytest.raises(ToolNotFoundError, match="Echo servers: loud"):
        await kernel.call_tool("echo://loud.whisper", {"text": "hi"})
    await kernel.close()
    assert echo.closed == 1
    assert kernel.list_tools("echo://*") == []


async def test_the_leaf_kernel_serves_only_the_schemes_plugged_into_it() -> None:
    kernel = Kernel()
    with pytest.raises(InvalidToolURIError, match="Unsupported protocol .python.*this kernel handles nothing"):
        await kernel.call_tool("python://x")
    kernel.add_adapter(lambda registry: EchoAdapter(registry), scheme="echo")
    assert kernel.schemes == ["echo"]
    with pytest.raises(InvalidToolURIError, match="unknown scheme 'mcp'; this kernel handles 'echo'"):
        await kernel.call_tool("mcp://a.b")
    adapter = kernel.adapter("echo")  # a factory is called when the scheme is first needed
    assert isinstance(adapter, EchoAdapter)
    assert kernel.adapter("echo") is adapter


def test_a_scheme_has_one_adapter_and_it_must_share_the_kernels_registry() -> None:
    kernel = FunctionKernel()
    with pytest.raises(ValueError, match="already plugged"):
        kernel.add_adapter(lambda registry: EchoAdapter(registry), scheme="rest")
    with pytest.raises(ValueError, match="built on another registry"):
        kernel.add_adapter(EchoAdapter(FunctionKernel().registry))
    with pytest.raises(ValueError, match="needs the scheme"):
        kernel.add_adapter(lambda registry: EchoAdapter(registry))


def test_an_unknown_scheme_says_which_schemes_the_kernel_handles() -> None:
    kernel = FunctionKernel()
    with pytest.raises(InvalidToolURIError, match="unknown scheme 'http'; this kernel handles 'mcp', 'python', 'rest'"):
        kernel.get_tool_definition("http://x.y")


# ------------------------------------------------------------------------------------------ one owner per tool


@pythontool
def double(n: int) -> int:
    return 2 * n


async def test_remove_tool_goes_through_the_owner_so_nothing_stale_stays_callable_or_listed() -> None:
    kernel = FunctionKernel()
    echo = EchoAdapter(kernel.registry)
    echo.add_server("loud", ["shout", "sing"])
    kernel.add_adapter(echo)
    kernel.register_python_tool("double", double)
    await kernel.connect()
    assert kernel.remove_tool("echo://loud.shout") is True
    assert kernel.remove_tool("python://double") is True
    assert kernel.remove_tool("python://double") is False
    assert kernel.list_tools() == ["echo://loud.sing"]
    with pytest.raises(ToolNotFoundError):
        await kernel.call_tool("python://double", {"n": 1})
    with pytest.raises(ToolNotFoundError):
        kernel.get_tool_definition("echo://loud.shout")
    kernel.register_python_tool("double", double)  # the name is free again
    assert (await kernel.call_tool("python://double", {"n": 2})).result == 4  # type: ignore[attr-defined]


def test_definitions_are_frozen() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("double", double)
    definition = kernel.get_tool_definition("python://double")
    with pytest.raises(AttributeError):
        definition.timeout = 3  # type: ignore[misc]
    with pytest.raises(ToolRegistrationError, match="already registered"):
        kernel.registry.add_tool(definition)


# -------------------------------------------------------------------------------------------------- middleware


@pythontool
async def greet(name: str) -> str:
    call = current_call()
    assert call is not None
    return f"hello {name} ({call.uri}, {call.metadata.get('tag', '-')})"


async def test_middleware_run_in_order_around_the_call_and_see_validated_arguments() -> None:
    order: list[str] = []

    def recorder(label: str) -> Any:
        async def middleware(call: ToolCall, call_next: CallNext) -> Any:
            order.append(f"{label} in {call.uri} {type(call.arguments).__name__}:{call.arguments.model_dump()}")
            raw = await call_next(call)
            order.append(f"{label} out {raw!r}")
            return raw

        return middleware

    kernel = FunctionKernel(middleware=[recorder("outer")])
    kernel.add_middleware(recorder("inner"))
    kernel.register_python_tool("double", double)
    result = await kernel.call_tool("python://double", {"n": "21"})
    assert result.result == 42  # type: ignore[attr-defined]
    assert order == [
        "outer in python://double DoubleInput:{'n': 21}",
        "inner in python://double DoubleInput:{'n': 21}",
        "inner out 42",
        "outer out 42",
    ]
    assert len(kernel.middleware) == 2


async def test_middleware_can_rewrite_arguments_share_metadata_and_answer_without_the_tool() -> None:
    async def tagger(call: ToolCall, call_next: CallNext) -> Any:
        if call.uri != "python://greet":
            return await call_next(call)
        call.metadata["tag"] = "tagged"
        call.arguments = call.arguments.model_copy(update={"name": call.arguments.name.title()})  # type: ignore[attr-defined]
        return await call_next(call)

    async def cache(call: ToolCall, call_next: CallNext) -> Any:
        if call.uri == "python://double":
            return "7"  # still coerced by the output model
        return await call_next(call)

    kernel = FunctionKernel(middleware=[tagger, cache])
    kernel.register_python_tool("greet", greet)
    kernel.register_python_tool("double", double)
    assert (await kernel.call_tool("python://greet", {"name": "ada"})).result == (  # type: ignore[attr-defined]
        "hello Ada (python://greet, tagged)"
    )
    assert (await kernel.call_tool("python://double", {"n": 1})).result == 7  # type: ignore[attr-defined]


async def test_a_failing_middleware_is_an_execution_error_naming_the_tool_and_the_timeout_covers_the_chain() -> None:
    async def broken(call: ToolCall, call_next: CallNext) -> Any:
        raise RuntimeError("policy store down")

    async def slow(call: ToolCall, call_next: CallNext) -> Any:
        await asyncio.sleep(30)
        return await call_next(call)

    kernel = FunctionKernel(middleware=[broken])
    kernel.register_python_tool("double", double)
    with pytest.raises(ToolExecutionError, match="python://double failed: RuntimeError: policy store down"):
        await kernel.call_tool("python://double", {"n": 1})
    slow_kernel = FunctionKernel(middleware=[slow])
    slow_kernel.register_python_tool("double", double)
    with pytest.raises(ToolTimeoutError, match="timed out after 0.05 s"):
        await slow_kernel.call_tool("python://double", {"n": 1}, timeout=0.05)


def test_a_middleware_must_be_callable() -> None:
    with pytest.raises(TypeError, match="async callable"):
        FunctionKernel(middleware=["not a function"])  # type: ignore[list-item]


# ------------------------------------------------------------------------------------------------ call context

seen_in_thread: list[Any] = []


@pythontool
def sync_reader(n: int) -> str:
    call = current_call()
    seen_in_thread.append((threading.current_thread() is threading.main_thread(), call))
    assert call is not None
    return f"{call.uri} {call.call_id} deadline={'set' if call.deadline else 'none'}"


async def test_python_tools_read_their_call_context_in_the_loop_and_in_a_worker_thread() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("reader", sync_reader)
    first = (await kernel.call_tool("python://reader", {"n": 1}, timeout=5)).result  # type: ignore[attr-defined]
    second = (await kernel.call_tool("python://reader", {"n": 1}, timeout=None)).result  # type: ignore[attr-defined]
    assert first.startswith("python://reader call-")
    assert first.endswith("deadline=set")
    assert second.endswith("deadline=none")
    assert first.split()[1] != second.split()[1]  # a call id per call
    assert [in_main for in_main, _ in seen_in_thread[-2:]] == [False, False]
    assert current_call() is None  # reset after the call


async def test_nested_calls_see_their_own_context_and_the_outer_one_after() -> None:
    kernel = FunctionKernel()

    @pythontool
    async def outer() -> list[str]:
        before = current_call()
        inner = await kernel.call_tool("python://greet", {"name": "x"})
        after = current_call()
        assert before is after
        return [before.uri if before else "?", inner.result]  # type: ignore[attr-defined]

    kernel.register_python_tool("outer", outer)
    kernel.register_python_tool("greet", greet)
    result = await kernel.call_tool("python://outer")
    assert result.result == ["python://outer", "hello x (python://greet, -)"]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------- close fails calls in flight


@pythontool
async def wait_forever() -> None:
    await asyncio.Event().wait()


@pythontool
def sleep_in_thread(seconds: float) -> str:
    threading.Event().wait(seconds)
    return "woke"


async def test_close_fails_every_call_in_flight_promptly_and_the_callers_task_lives_on() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    kernel.register_python_tool("sleepy", sleep_in_thread)
    outcomes: list[str] = []

    async def caller(uri: str, arguments: dict[str, Any]) -> None:
        try:
            await kernel.call_tool(uri, arguments, timeout=None)
        except KernelClosedError as exc:
            outcomes.append(f"{exc.uri}: {exc}")
        await asyncio.sleep(0)  # the task was not left cancelled: it goes on after the error
        outcomes.append("task goes on")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller, "python://wait", {})
            tg.start_soon(caller, "python://sleepy", {"seconds": 3})
            await asyncio.sleep(0.05)
            await kernel.close()
    assert sorted(outcomes) == [
        "python://sleepy: The kernel was closed while python://sleepy was running.",
        "python://wait: The kernel was closed while python://wait was running.",
        "task goes on",
        "task goes on",
    ]
    kernel.register_python_tool("double", double)  # the kernel is usable again after close()
    assert (await kernel.call_tool("python://double", {"n": 1})).result == 2  # type: ignore[attr-defined]


async def test_a_cancellation_that_is_not_close_stays_a_cancellation() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    task = asyncio.create_task(kernel.call_tool("python://wait"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await kernel.close()


async def test_a_bracketed_qualifier_is_the_adapters_to_interpret() -> None:
    seen: list[str | None] = []

    class QualifiedEcho(EchoAdapter):
        async def resolve(self, uri: ToolURI) -> ToolDefinition | None:
            seen.append(uri.qualifier)
            return await super().resolve(uri) if uri.qualifier in (None, "LOUD") else None

    kernel = FunctionKernel()
    echo = QualifiedEcho(kernel.registry)
    echo.add_server("s", ["say"])
    kernel.add_adapter(echo)
    assert (await kernel.call_tool("echo://s.say [loud]", {"text": "a"})).said == "say: A"  # type: ignore[attr-defined]
    assert (await kernel.call_tool("echo://s.say", {"text": "b"}, method="loud")).said == "say: B"  # type: ignore[attr-defined]
    assert seen == ["LOUD", "LOUD"]
    with pytest.raises(ToolNotFoundError, match=r"Unknown tool 'echo://s.say \[QUIET\]'"):
        await kernel.call_tool("echo://s.say [QUIET]", {"text": "c"})
    assert kernel.select_tools(["echo://s.say [LOUD]"]) == ["echo://s.say"]  # allowed_tools as Kaval.AI printed them
    kernel.register_python_tool("double", double)
    with pytest.raises(ToolNotFoundError, match=r"Unknown tool 'python://double \[GET\]'"):
        await kernel.call_tool("python://double", {"n": 1}, method="GET")


async def test_the_call_context_under_middleware_a_deadline_and_in_what_the_tool_awaits() -> None:
    seen: list[tuple[str, str | None]] = []

    async def helper() -> str | None:
        await asyncio.sleep(0)
        call = current_call()  # in a coroutine the tool awaits, across a suspension
        return call.call_id if call else None

    @pythontool
    async def reader(tag: str) -> str:
        call = current_call()
        assert call is not None
        seen.append((tag, await helper()))
        assert current_call() is call  # the same object for the whole call
        return call.call_id

    async def passthrough(call: ToolCall, call_next: CallNext) -> Any:
        call.metadata["via"] = "mw"
        return await call_next(call)

    plain, wrapped = FunctionKernel(), FunctionKernel(middleware=[passthrough])
    for kernel in (plain, wrapped):
        kernel.register_python_tool("reader", reader)
    ids = [
        (await plain.call_tool("python://reader", {"tag": "plain"})).result,  # type: ignore[attr-defined]
        (await plain.call_tool("python://reader", {"tag": "deadline"}, timeout=5)).result,  # type: ignore[attr-defined]
        (await wrapped.call_tool("python://reader", {"tag": "middleware"})).result,  # type: ignore[attr-defined]
    ]
    assert [tag for tag, _ in seen] == ["plain", "deadline", "middleware"]
    assert [call_id for _, call_id in seen] == ids
    assert len(set(ids)) == 3
    assert current_call() is None


async def test_a_task_a_tool_spawns_sees_the_call_it_was_started_in() -> None:
    # The current call is a context variable: a task copies the context it was created in.
    @pythontool
    async def spawner() -> list[bool]:
        mine = current_call()

        async def child() -> list[bool]:
            return [mine is not None, current_call() is mine]

        return await asyncio.create_task(child())

    kernel = FunctionKernel()
    kernel.register_python_tool("spawner", spawner)
    assert (await kernel.call_tool("python://spawner")).result == [True, True]  # type: ignore[attr-defined]
    assert current_call() is None


async def test_a_python_tool_reports_progress_to_the_callers_callback() -> None:
    @pythontool
    async def steps(n: int) -> int:
        call = current_call()
        assert call is not None
        for i in range(n):
            await call.report_progress(i + 1, n, f"step {i + 1}")
        return n

    seen: list[tuple[float, float | None, str | None]] = []
    kernel = FunctionKernel()
    kernel.register_python_tool("steps", steps)
    assert (await kernel.call_tool("python://steps", {"n": 2}, progress=lambda *a: seen.append(a))).result == 2  # type: ignore[attr-defined]
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert (await kernel.call_tool("python://steps", {"n": 1})).result == 1  # type: ignore[attr-defined]  # no callback

    def broken(progress: float, total: float | None, message: str | None) -> None:
        raise RuntimeError("display gone")

    # The caller's callback failing does not fail the tool.
    assert (await kernel.call_tool("python://steps", {"n": 1}, progress=broken)).result == 1  # type: ignore[attr-defined]


async def test_start_tool_runs_a_call_in_the_background_with_status_result_and_cancel() -> None:
    release = asyncio.Event()

    @pythontool
    async def slow_double(n: int) -> int:
        await release.wait()
        return n * 2

    kernel = FunctionKernel()
    kernel.register_python_tool("slow_double", slow_double)
    kernel.register_python_tool("greet", greet)
    task = kernel.start_tool("python://slow_double", {"n": 21})
    await asyncio.sleep(0.01)
    assert (task.status, task.done(), task.uri) == ("running", False, "python://slow_double")
    assert task.task_id.startswith("task-")
    release.set()
    assert (await task.result()).result == 42  # type: ignore[attr-defined]
    assert task.status == "completed"

    bad = kernel.start_tool("python://slow_double", {"n": "x"})  # validated as call_tool validates
    with pytest.raises(ToolInputError):
        await bad.result()
    assert bad.status == "failed"
    assert isinstance(bad.error(), ToolInputError)

    release.clear()
    stopped = kernel.start_tool("python://slow_double", {"n": 1})
    await asyncio.sleep(0.01)
    await stopped.cancel()
    assert stopped.status == "cancelled"

    timed = kernel.start_tool("python://slow_double", {"n": 1}, timeout=0.05)
    with pytest.raises(ToolTimeoutError):
        await timed.result()


async def test_close_ends_the_background_calls_still_running() -> None:
    @pythontool
    async def forever() -> None:
        await asyncio.Event().wait()

    kernel = FunctionKernel()
    kernel.register_python_tool("forever", forever)
    running = kernel.start_tool("python://forever")
    await asyncio.sleep(0.01)
    with anyio.fail_after(5):
        await kernel.close()
    assert running.done()
    assert running.status in ("failed", "cancelled")
