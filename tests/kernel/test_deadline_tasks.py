"""A ``deadline(...)`` block left in another task than the one that entered it (issue 36): the exit is still refused
as misuse (``RuntimeError``), but it undoes what the entry did in the entering task, as ``asyncio.timeout`` does:
the entering task's context no longer carries the block (its later calls and blocks do not inherit the deadline of
a block that was left), and a cut the block made of that task is withdrawn (its cancellation count is back)."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from tests.kernel.test_ownership import wait_forever

from kavalai import FunctionKernel, pythontool
from kavalai.errors import ToolTimeoutError
from kavalai.kernel import current_call, current_deadline, deadline

pytestmark = pytest.mark.anyio


async def _leave_elsewhere(block: object) -> BaseException | None:
    """Leave ``block`` in a task of its own; the error its exit raised."""

    async def leave() -> BaseException | None:
        try:
            await block.__aexit__(None, None, None)  # type: ignore[attr-defined]
        except RuntimeError as exc:
            return exc
        return None

    return await asyncio.create_task(leave())


async def test_a_block_left_in_another_task_leaves_the_entering_tasks_context_as_it_was() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    block = deadline(0.05, what="split block")

    async def enter_then_go_on() -> tuple[float | None, BaseException | None]:
        await block.__aenter__()
        assert current_deadline() == block.deadline
        refused = await _leave_elsewhere(block)
        seen = current_deadline()  # before the fix: the block's deadline, though the block was left
        await asyncio.sleep(0.1)  # past the block's 0.05 s
        with pytest.raises(ToolTimeoutError, match=r"timed out after 0\.3 s"):  # its own timeout, not "not started"
            await kernel.call_tool("python://wait", timeout=0.3)
        with deadline(5.0) as inner:  # a new block takes its own limit, not the left block's (passed) deadline
            assert inner.parent is None
        return seen, refused

    with anyio.fail_after(20):
        seen, refused = await asyncio.create_task(enter_then_go_on())
    assert seen is None
    assert isinstance(refused, RuntimeError)
    assert "left in another task" in str(refused)
    await kernel.close()


async def test_a_block_left_in_another_task_withdraws_the_cut_it_made_of_the_entering_task() -> None:
    block = deadline(0.01, what="split block")

    async def enter_be_cut_then_go_on() -> tuple[int, int]:
        before = asyncio.current_task().cancelling()  # type: ignore[union-attr]
        await block.__aenter__()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.sleep(5)  # the block's cut
        await _leave_elsewhere(block)
        after = asyncio.current_task().cancelling()  # type: ignore[union-attr]
        return before, after

    with anyio.fail_after(20):
        before, after = await asyncio.create_task(enter_be_cut_then_go_on())
    assert block.expired
    assert after == before  # asyncio.timeout takes back its own request of the task, whoever leaves it


async def test_a_block_left_in_another_task_inside_a_call_leaves_the_call_current() -> None:
    kernel = FunctionKernel()
    seen: list[object] = []

    @pythontool
    async def split() -> str:
        """Enter a block, have another task leave it, then look at the context."""
        call = current_call()
        block = deadline(30.0)
        await block.__aenter__()
        await _leave_elsewhere(block)
        seen.extend([current_call() is call, current_deadline() == (call.deadline if call else None)])
        return "done"

    kernel.register_python_tool("split", split)
    with anyio.fail_after(20):
        assert (await kernel.call_tool("python://split", timeout=60)).result == "done"  # type: ignore[attr-defined]
    assert seen == [True, True]
    await kernel.close()


def test_a_block_whose_task_ended_without_leaving_it_is_not_inherited_by_the_next_task_of_its_context() -> None:
    """An ``asyncio.Runner`` runs each ``run()`` in one context of its own: a block its first task entered and never
    left (the task ended first) must not bound what the next task of that context does."""
    kernel = FunctionKernel()
    kernel.register_python_tool("wait", wait_forever)
    block = deadline(0.05, what="abandoned block")

    async def enter() -> None:
        await block.__aenter__()

    async def after() -> tuple[float | None, BaseException]:
        seen = current_deadline()
        await asyncio.sleep(0.1)  # past the block's 0.05 s
        try:
            await kernel.call_tool("python://wait", timeout=0.3)
        except ToolTimeoutError as exc:
            return seen, exc
        finally:
            await kernel.close()
        raise AssertionError("a hung tool answered")

    with asyncio.Runner() as runner:
        runner.run(enter())
        seen, error = runner.run(after())
    assert seen is None
    assert "timed out after 0.3 s" in str(error), str(error)
