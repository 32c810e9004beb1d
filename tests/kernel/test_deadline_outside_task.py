"""A ``deadline(...)`` block entered outside any task (issue 36, tenth session): in sync code or before
``asyncio.run`` it carries its deadline to the calls made under it; left in another thread it raises
``RuntimeError`` saying so (it raised a bare ``ValueError`` about a context variable token), and the entering
thread no longer sees it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.errors import ToolTimeoutError
from kavalai.kernel import current_deadline, deadline


@pythontool
async def slow() -> str:
    """Take a minute."""
    await asyncio.sleep(60)
    return "done"


def test_a_block_left_in_another_thread_says_so_and_is_no_longer_current() -> None:
    block = deadline(30.0, what="batch")
    block.__enter__()
    assert current_deadline() == block.deadline
    raised: list[BaseException] = []

    def leave() -> None:
        try:
            block.__exit__(None, None, None)
        except BaseException as exc:  # handed to the test's thread
            raised.append(exc)

    thread = threading.Thread(target=leave)
    thread.start()
    thread.join(10)
    assert len(raised) == 1
    assert isinstance(raised[0], RuntimeError), raised
    assert "entered in one context and left in another" in str(raised[0])
    assert current_deadline() is None  # the entering thread sees what it saw before the entry


def test_a_block_entered_before_asyncio_run_cuts_the_calls_of_the_run() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("slow", slow)
    with (
        deadline(0.05, what="batch") as block,
        pytest.raises(ToolTimeoutError, match="deadline of the batch around it"),
    ):
        asyncio.run(kernel.call_tool("python://slow", {}))
    assert not block.expired  # the block itself had no task to cut: its calls were cut at its deadline
    assert current_deadline() is None
