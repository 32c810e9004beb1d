"""Against npm's reference server, @modelcontextprotocol/server-everything (installed by this test's set-up with the
machine's npm): sampling, elicitation, roots, progress, resources, templates, prompts, completion, structured
content and images, through the kernel."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.adapters.mcp.conftest import wait_until
from tests.servers.npm import npm_installed

from kavalai import FunctionKernel, McpServer
from kavalai.adapters.mcp import McpChange, McpElicitation, McpImageContent, McpSamplingRequest

VERSION = "2026.8.31"


@pytest.fixture(scope="session")
def everything_js() -> Path:
    """The server's entry point, installed once into a folder of the system's temp dir (reused across runs)."""
    folder = npm_installed(f"server-everything-{VERSION}", [f"@modelcontextprotocol/server-everything@{VERSION}"])
    return folder / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


class Handlers:
    """Records what the server asked of the client."""

    def __init__(self) -> None:
        self.sampled: list[McpSamplingRequest] = []
        self.elicited: list[McpElicitation] = []

    async def sample(self, request: McpSamplingRequest) -> str:
        self.sampled.append(request)
        return "The answer is 42."

    async def elicit(self, request: McpElicitation) -> dict[str, Any]:
        self.elicited.append(request)
        return {"name": "Ada", "check": True}


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


@pytest.fixture
async def kernel(everything_js: Path, handlers: Handlers, tmp_path: Path) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(
            name="ev",
            command="node",
            args=[str(everything_js), "stdio"],
            sampling=handlers.sample,
            elicitation=handlers.elicit,
            roots=[str(tmp_path)],
            timeout=60,
        )
    )
    yield kernel
    await kernel.close()


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


def _text(result: Any) -> str:
    value = result.result
    return value if isinstance(value, str) else json.dumps(value)


async def test_a_handshake_era_server_is_reached_by_the_default_negotiation(kernel: FunctionKernel) -> None:
    # This release of the reference server predates server/discover: "auto" falls back to the handshake.
    await kernel.connect_mcp_servers()
    assert kernel.get_mcp_server_state("ev").protocol_version == "2025-11-25"


async def test_sampling_reaches_our_handler(kernel: FunctionKernel, handlers: Handlers) -> None:
    result = await kernel.call_tool("mcp://ev.trigger-sampling-request", {"prompt": "What is six times seven?"})
    [request] = handlers.sampled
    assert request.server == "ev"
    role, text = request.messages[0]
    assert role == "user"
    assert text.endswith("What is six times seven?")
    assert "The answer is 42." in _text(result)


async def test_elicitation_and_roots_reach_our_handlers(
    kernel: FunctionKernel, handlers: Handlers, tmp_path: Path
) -> None:
    await kernel.call_tool("mcp://ev.trigger-elicitation-request")
    [request] = handlers.elicited
    assert request.mode == "form"
    assert request.message
    assert request.schema["type"] == "object"
    roots = await kernel.call_tool("mcp://ev.get-roots-list")
    assert _uri(tmp_path) in _text(roots)


async def test_progress_of_a_long_running_operation(kernel: FunctionKernel) -> None:
    seen: list[tuple[float, float | None]] = []
    await kernel.call_tool(
        "mcp://ev.trigger-long-running-operation",
        {"duration": 0.3, "steps": 3},
        progress=lambda progress, total, message: seen.append((progress, total)),
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]


async def test_structured_content_images_and_numbers(kernel: FunctionKernel) -> None:
    weather = await kernel.call_tool("mcp://ev.get-structured-content", {"location": "Chicago"})
    assert isinstance(weather.model_dump()["temperature"], int | float)
    image = await kernel.call_tool("mcp://ev.get-tiny-image")
    images = [item for item in image.result if isinstance(item, McpImageContent)]  # type: ignore[attr-defined]
    assert images[0].mime_type == "image/png"
    assert images[0].decode().startswith(b"\x89PNG")
    total = await kernel.call_tool("mcp://ev.get-sum", {"a": 2, "b": 40})
    assert "42" in _text(total)


async def test_resources_templates_prompts_and_completion(kernel: FunctionKernel) -> None:
    resources = await kernel.list_resources("ev")
    static = [r for r in resources if r.uri.startswith("demo://resource/static/document/")]
    assert static
    [document] = await kernel.read_resource("ev", static[0].uri)
    assert document.text
    templates = {t.uri_template for t in await kernel.list_resource_templates("ev")}
    assert "demo://resource/dynamic/blob/{resourceId}" in templates
    [blob] = await kernel.read_resource("ev", "demo://resource/dynamic/blob/7")
    assert blob.blob is not None
    assert blob.decode()
    prompts = {p.name: p for p in await kernel.list_prompts("ev")}
    assert [a.name for a in prompts["args-prompt"].arguments] == ["city", "state"]
    rendered = await kernel.get_prompt("ev", "args-prompt", {"city": "Oslo", "state": "Oslo"})
    assert "Oslo" in rendered.messages[0].content.text  # type: ignore[union-attr]
    completion = await kernel.complete("ev", prompts["completable-prompt"], "department", "E")
    assert completion.values
    assert all(value.startswith("E") for value in completion.values)


async def test_a_subscribed_resource_change_reaches_on_change(everything_js: Path) -> None:
    changes: list[McpChange] = []
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="ev", command="node", args=[str(everything_js), "stdio"], on_change=changes.append)
    )
    uri = "demo://resource/static/document/features.md"
    try:
        await kernel.subscribe_resource("ev", uri)
        await kernel.call_tool("mcp://ev.toggle-subscriber-updates")  # it then sends an update every 5 s
        with anyio.fail_after(15):
            while not any(c.kind == "resource" for c in changes):  # noqa: ASYNC110 - the server's own timer
                await anyio.sleep(0.1)
        assert McpChange(server="ev", kind="resource", uri=uri) in changes
        await kernel.unsubscribe_resource("ev", uri)
    finally:
        await kernel.close()


async def test_a_tool_that_runs_only_as_a_2025_task_is_run_as_one(
    kernel: FunctionKernel, caplog: pytest.LogCaptureFixture
) -> None:
    # simulate-research-query is listed with taskSupport "required" (2025-11-25 core tasks): it is called with a
    # task, tasks/get is polled while it works and tasks/result gives its report.
    with caplog.at_level(logging.DEBUG, logger="kavalai.mcp"), anyio.fail_after(60):
        result = await kernel.call_tool("mcp://ev.simulate-research-query", {"topic": "tide pools"})
    report = _text(result)
    assert report.startswith("# Research Report: tide pools")
    assert "Stage 4: Generating report" in report
    assert any("runs as 2025-11-25 task" in r.getMessage() for r in caplog.records)
    assert (await kernel.call_tool("mcp://ev.echo", {"message": "still here"})).result  # type: ignore[attr-defined]


async def test_a_2025_task_that_asks_for_input_gets_it_from_the_elicitation_handler(everything_js: Path) -> None:
    asked: list[McpElicitation] = []

    async def clarify(request: McpElicitation) -> dict[str, Any]:
        asked.append(request)
        return {"interpretation": "snake"}

    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="ev", command="node", args=[str(everything_js), "stdio"], elicitation=clarify)
    )
    try:
        with anyio.fail_after(60):
            result = await kernel.call_tool("mcp://ev.simulate-research-query", {"topic": "python", "ambiguous": True})
        [request] = asked  # asked while the task was input_required, answered through tasks/result's stream
        assert "multiple interpretations" in request.message
        assert "- **Clarification**: snake" in _text(result)
    finally:
        await kernel.close()


async def test_a_2025_task_tool_runs_in_the_background_and_is_cancelled_there_too(
    kernel: FunctionKernel, caplog: pytest.LogCaptureFixture
) -> None:
    task = kernel.start_tool("mcp://ev.simulate-research-query", {"topic": "coral"})
    assert task.status == "running"
    with anyio.fail_after(60):
        result = await task.result()
    assert task.status == "completed"
    assert _text(result).startswith("# Research Report: coral")
    slow = kernel.start_tool("mcp://ev.simulate-research-query", {"topic": "kelp"})
    with caplog.at_level(logging.DEBUG, logger="kavalai.mcp"), anyio.fail_after(20):
        await wait_until(lambda: any("runs as 2025-11-25 task" in r.getMessage() for r in caplog.records))
        await slow.cancel()
    assert slow.status == "cancelled"
    assert any("cancelling it on the server (tasks/cancel)" in r.getMessage() for r in caplog.records)
    assert (await kernel.call_tool("mcp://ev.echo", {"message": "after"})).result  # type: ignore[attr-defined]
