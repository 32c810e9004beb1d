"""The gateway's SERVER span of each request: kavalai's own, in place of the SDK's default middleware.

The SDK's tracing middleware lives in a private module of the SDK; ``serve/_traced.py`` replaces the middleware the
SDK builds a server with by its own span. These tests pin what is replaced (a new default middleware in an SDK release
fails here first) and check the span with the SDK's client over an in-memory session, under the process's one
recording tracer provider.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mcp.client import Client
from mcp.server import Server
from opentelemetry import context, propagate
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tests.test_tracing import global_spans

from kavalai import FunctionKernel, pythontool
from kavalai.secrets import register_secret
from kavalai.serve import build_mcp_server

__all__ = ["global_spans"]  # the fixture, shared with tests/test_tracing.py (one global tracer provider a process)

SRC = Path(__file__).parents[2] / "src" / "kavalai"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
SECRET = "tr4ced-Secr3t-value-0091"


def test_the_sdk_builds_a_server_with_one_middleware_its_tracing() -> None:
    built = Server("probe").middleware
    assert [type(item).__name__ for item in built] == ["OpenTelemetryMiddleware"]


def test_no_module_of_kavalai_imports_a_private_module_of_the_mcp_sdk() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [
                f"{path.name}: {name}"
                for name in names
                if name.split(".")[0] in ("mcp", "mcp_types") and any(part.startswith("_") for part in name.split("."))
            ]
    assert found == []


def _kernel() -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", _add)
    kernel.register_python_tool("math.fail", _fail)
    return kernel


@pythontool
def _add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pythontool
def _fail() -> int:
    """Fail with a secret in the message."""
    raise RuntimeError(f"token {SECRET} refused")


async def test_a_served_call_is_one_server_span_continuing_the_clients_trace(
    global_spans: InMemorySpanExporter,
) -> None:
    kernel = _kernel()
    try:
        server = build_mcp_server(kernel)
        async with Client(server) as client:
            names = {tool.title: tool.name for tool in (await client.list_tools()).tools}
            global_spans.clear()
            token = context.attach(propagate.extract({"traceparent": TRACEPARENT}))
            try:
                result = await client.call_tool(names["python://math.add"], {"a": 2, "b": 3})
            finally:
                context.detach(token)
    finally:
        await kernel.close()
    assert result.structured_content == {"result": 5}
    served = [span for span in global_spans.get_finished_spans() if span.kind == SpanKind.SERVER]
    assert [span.name for span in served] == [f"tools/call {names['python://math.add']}"]
    span = served[0]
    assert span.context.trace_id == int(TRACE_ID, 16)
    assert span.attributes is not None
    assert span.attributes["mcp.method.name"] == "tools/call"
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == names["python://math.add"]
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "kavalai"


async def test_a_failing_call_is_an_error_span_with_no_secret(global_spans: InMemorySpanExporter) -> None:
    register_secret(SECRET)
    kernel = _kernel()
    try:
        async with Client(build_mcp_server(kernel)) as client:
            names = {tool.title: tool.name for tool in (await client.list_tools()).tools}
            global_spans.clear()
            result = await client.call_tool(names["python://math.fail"], {})
    finally:
        await kernel.close()
    assert result.is_error
    served = [span for span in global_spans.get_finished_spans() if span.kind == SpanKind.SERVER]
    assert len(served) == 1
    assert served[0].status.status_code == StatusCode.ERROR
    assert served[0].attributes is not None
    assert served[0].attributes["error.type"] == "tool_error"
    every = global_spans.get_finished_spans()
    every_text = repr([(s.name, s.attributes, s.status.description, s.events) for s in every])
    assert SECRET not in every_text


async def test_a_request_with_a_hostile_traceparent_is_served_as_a_new_trace(
    global_spans: InMemorySpanExporter,
) -> None:
    kernel = _kernel()
    try:
        async with Client(build_mcp_server(kernel)) as client:
            names = {tool.title: tool.name for tool in (await client.list_tools()).tools}
            global_spans.clear()
            for hostile in (5, ["x", 1], {"a": 1}, "00-zz-zz-01", None):
                result = await client.call_tool(
                    names["python://math.add"], {"a": 1, "b": 1}, meta={"traceparent": hostile}
                )
                assert result.structured_content == {"result": 2}
    finally:
        await kernel.close()
    served = [span for span in global_spans.get_finished_spans() if span.kind == SpanKind.SERVER]
    assert len(served) == 5
    assert int(TRACE_ID, 16) not in {span.context.trace_id for span in served}
