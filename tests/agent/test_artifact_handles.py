"""Artifact handles the model sends: a store serves only what it wrote, a run reads only its own artifacts unless
shared on purpose, and every bad handle (a file the store never wrote, too long, traversal, NUL, 1 MB, another
run's) is a short error result for the model, never an exception out of ``Agent.run()``."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.agent import (
    Agent,
    ArtifactStore,
    FileArtifactStore,
    MemoryArtifactStore,
    OutputBudget,
    artifact_scope,
)
from kavalai.agent.budget import HANDLE_ECHO_CHARS
from kavalai.llm import ToolResultMessage
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call

StoreFactory = Callable[[Path], ArtifactStore]
STORES: dict[str, StoreFactory] = {"memory": lambda _: MemoryArtifactStore(), "file": FileArtifactStore}


@pythontool
def big(n: int) -> str:
    """A text of n characters."""
    return "x" * n


def _results(request: ScriptedRequest) -> list[ToolResultMessage]:
    return [m for m in request.messages if isinstance(m, ToolResultMessage)]


def _kernel(budget: OutputBudget | None = None) -> FunctionKernel:
    kernel = FunctionKernel(output_budget=budget)
    kernel.register_python_tool("big", big)
    return kernel


async def _read_with(kernel: FunctionKernel, handle: str) -> ToolResultMessage:
    """What the model gets for ``read_artifact(handle)`` in a run that first kept a result of its own."""
    llm = ScriptedLLM([tool_call("python://big", {"n": 500}), tool_call("read_artifact", {"handle": handle}), "done"])
    result = await Agent(llm, kernel=kernel).run("go")
    assert result.output == "done"  # the run went on: the bad handle was an error result, not an exception
    return _results(llm.requests[2])[-1]


async def _kept_handle(kernel: FunctionKernel) -> str:
    """Run an agent that keeps one artifact; its handle."""
    llm = ScriptedLLM([tool_call("python://big", {"n": 500}), "done"])
    await Agent(llm, kernel=kernel).run("go")
    found = re.search(r"artifact://[0-9a-f]+", _results(llm.requests[1])[0].content)
    assert found is not None
    return found.group()


def _assert_refused(message: ToolResultMessage, handle: str) -> None:
    assert message.is_error
    assert message.content.startswith("There is no artifact ")
    assert len(message.content) <= 200
    # At most HANDLE_ECHO_CHARS characters of the handle are quoted: no longer run of it appears.
    assert handle[: HANDLE_ECHO_CHARS + 1] not in message.content or len(handle) <= HANDLE_ECHO_CHARS


async def test_a_file_in_the_directory_that_the_store_never_wrote_is_not_served(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the user's private notes")
    impostor = "0123456789abcdef" * 2  # a name of the right shape, written by someone else
    (tmp_path / f"{impostor}.txt").write_text("not an artifact")
    store = FileArtifactStore(tmp_path)
    for handle in ("artifact://notes", f"artifact://{impostor}"):
        with pytest.raises(KeyError):
            await store.get(handle)
        # Shared on purpose, handles reach the store itself: it still refuses what it did not write.
        kernel = _kernel(OutputBudget(max_chars=100, overflow="artifact", store=store, share_artifacts=True))
        message = await _read_with(kernel, handle)
        _assert_refused(message, handle)
        assert "private" not in message.content
        assert "not an artifact" not in message.content


async def test_a_new_file_store_on_the_directory_reads_what_an_earlier_one_wrote(tmp_path: Path) -> None:
    handle = await FileArtifactStore(tmp_path).put("kept across processes")
    assert await FileArtifactStore(tmp_path).get(handle) == "kept across processes"
    (tmp_path / f"{handle.removeprefix('artifact://')}.txt").unlink()
    with pytest.raises(KeyError):  # listed, but gone: an unknown handle still, not an OSError
        await FileArtifactStore(tmp_path).get(handle)


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize(
    "handle",
    [
        "artifact://" + "a" * 300,
        "artifact://" + "7" * 1_000_000,
        "artifact://../../../../etc/passwd",
        "artifact://abc\x00def",
        "artifact://" + "0" * 32,
        "",
    ],
    ids=["300-chars", "1-MB", "traversal", "nul", "unknown", "empty"],
)
async def test_every_bad_handle_is_a_short_error_result(tmp_path: Path, kind: str, handle: str) -> None:
    for share in (False, True):  # refused by the run's scope, and by the store itself
        store = STORES[kind](tmp_path)
        kernel = _kernel(OutputBudget(max_chars=100, overflow="artifact", store=store, share_artifacts=share))
        message = await _read_with(kernel, handle)
        assert message.is_error
        assert len(message.content) <= 200
        assert "x" * 10 not in message.content  # nothing of an artifact leaked
        if handle:
            _assert_refused(message, handle)


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_a_run_cannot_read_another_runs_artifact_unless_shared_on_purpose(tmp_path: Path, kind: str) -> None:
    kernel = _kernel(OutputBudget(max_chars=100, overflow="artifact", store=STORES[kind](tmp_path)))
    handle = await _kept_handle(kernel)  # run A, on the kernel's budget
    _assert_refused(await _read_with(kernel, handle), handle)  # run B, same budget: refused

    with artifact_scope():  # runs in one block share their artifacts
        shared = await _kept_handle(kernel)
        page = await _read_with(kernel, shared)
    assert not page.is_error
    assert json.loads(page.content)["total"] == len(json.dumps({"result": "x" * 500}, separators=(",", ":")))
    _assert_refused(await _read_with(kernel, shared), shared)  # after the block, refused again

    sharing = _kernel(
        OutputBudget(max_chars=100, overflow="artifact", store=STORES[kind](tmp_path / "s"), share_artifacts=True)
    )
    handle = await _kept_handle(sharing)
    assert not (await _read_with(sharing, handle)).is_error  # share_artifacts=True: any run of the budget reads it


async def test_an_artifact_swapped_for_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    # On main: open() of a FIFO waits for a writer for ever (in a worker thread the run cannot cut).
    store = FileArtifactStore(tmp_path)
    handle = await store.put("kept")
    path = tmp_path / f"{handle.removeprefix('artifact://')}.txt"
    path.unlink()
    os.mkfifo(path)
    with anyio.fail_after(20), pytest.raises(KeyError):  # a liveness bound only: refused at once
        await store.get(handle)
    manifest = tmp_path / FileArtifactStore.MANIFEST
    manifest.unlink()
    os.mkfifo(manifest)  # the manifest another store reads, swapped too
    with anyio.fail_after(20), pytest.raises(KeyError):
        await FileArtifactStore(tmp_path).get(handle)


@pythontool
def listing() -> str:
    """File names as os.listdir gives them when they are not UTF-8: lone surrogates."""
    return "\n".join(f"report-\udcff\udcfe-{i}.txt" for i in range(100))


async def test_a_file_artifact_keeps_any_text_names_that_are_not_utf8_included(tmp_path: Path) -> None:
    # On main: UnicodeEncodeError out of Agent.run() as the store wrote the result.
    store = FileArtifactStore(tmp_path)
    kernel = FunctionKernel(output_budget=OutputBudget(max_chars=100, overflow="artifact", store=store))
    kernel.register_python_tool("listing", listing)
    llm = ScriptedLLM([tool_call("python://listing", {}), "done"])
    result = await Agent(llm, kernel=kernel).run("go")
    assert result.output == "done"
    found = re.search(r"artifact://[0-9a-f]+", _results(llm.requests[1])[0].content)
    assert found is not None
    assert json.loads(await store.get(found.group())) == {"result": listing()}
