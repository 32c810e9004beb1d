"""OpenTelemetry: an execute_tool span and a duration per call of every kind, trace context passed to servers.

The OpenTelemetry SDK's in-memory exporter and metric reader record what the kernel emits.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from kavalai import FunctionKernel, McpServer, RestServer, ToolExecutionError, pythontool
from kavalai.tracing import instrument
from tests.servers.rest_app import create_app
from tests.servers.uvicorn_server import serve

ROOT = Path(__file__).resolve().parents[1]


@pythontool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pythontool
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@pythontool
def echo(text: str) -> str:
    """Returns its text."""
    return text


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(spans: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return provider


@pytest.fixture
def metrics() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def traced(tracer_provider: TracerProvider, metrics: InMemoryMetricReader) -> FunctionKernel:
    kernel = FunctionKernel()
    instrument(kernel, tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[metrics]))
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("fail", fail)
    return kernel


@pytest.fixture(scope="module")
def rest_url() -> Iterator[str]:
    with serve(create_app()) as url:
        yield url


def _durations(metrics: InMemoryMetricReader) -> list[Any]:
    data = metrics.get_metrics_data()
    assert data is not None
    found = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "gen_ai.execute_tool.duration":
                    found.extend(metric.data.data_points)
    return found


async def test_a_python_call_is_one_execute_tool_span_with_genai_attributes(
    traced: FunctionKernel, spans: InMemorySpanExporter, metrics: InMemoryMetricReader
) -> None:
    assert (await traced.call_tool("python://math.add", {"a": 1, "b": 2})).result == 3  # type: ignore[attr-defined]
    [span] = spans.get_finished_spans()
    assert span.name == "execute_tool python://math.add"
    assert span.kind is SpanKind.INTERNAL
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "python://math.add"
    assert attributes["gen_ai.tool.type"] == "function"
    assert str(attributes["gen_ai.tool.call.id"]).startswith("call-")
    assert attributes["gen_ai.tool.description"] == "Add two integers."
    assert "gen_ai.tool.call.arguments" not in attributes  # content only when asked for
    assert span.status.status_code is StatusCode.UNSET
    [point] = _durations(metrics)
    assert point.count == 1
    assert dict(point.attributes)["gen_ai.tool.name"] == "python://math.add"


async def test_a_failing_call_records_its_error_type(
    traced: FunctionKernel, spans: InMemorySpanExporter, metrics: InMemoryMetricReader
) -> None:
    with pytest.raises(ToolExecutionError):
        await traced.call_tool("python://fail", {"reason": "no"})
    [span] = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "ValueError"
    assert [event.name for event in span.events] == ["exception"]
    [point] = _durations(metrics)
    assert dict(point.attributes)["error.type"] == "ValueError"


async def test_a_secret_at_the_cut_of_an_attribute_or_status_shows_no_prefix(
    tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    """Hostile round 8, case 15 (its second half): a span's text was cut to 8,192 characters and then masked, so a
    secret straddling the cut was no longer found and its first characters were sent. Masked first, then cut."""
    from kavalai.secrets import register_secret

    secret = "cut-secret-93c0aa71e5"
    register_secret(secret)
    kernel = FunctionKernel()
    instrument(kernel, tracer_provider=tracer_provider, capture_content=True)
    kernel.register_python_tool("fail", fail)
    kernel.register_python_tool("echo", echo)
    reason = "r" * (8_192 - 25) + secret  # "Tool python://fail failed: ..." puts the secret across the cut
    with pytest.raises(ToolExecutionError):
        await kernel.call_tool("python://fail", {"reason": reason})
    await kernel.call_tool("python://echo", {"text": "e" * (8_192 - 10) + secret})
    prefix = secret[:8]
    for span in spans.get_finished_spans():
        shown = [str(value) for value in dict(span.attributes or {}).values()] + [str(span.status.description)]
        assert not any(prefix in text for text in shown), span.name


async def test_a_call_cut_by_its_timeout_is_a_timeout(traced: FunctionKernel, spans: InMemorySpanExporter) -> None:
    @pythontool
    async def slow() -> None:
        import asyncio

        await asyncio.sleep(10)

    traced.register_python_tool("slow", slow)
    with pytest.raises(Exception, match="timed out"):
        await traced.call_tool("python://slow", timeout=0.05)
    [span] = spans.get_finished_spans()
    assert dict(span.attributes or {})["error.type"] == "timeout"


async def test_content_is_captured_only_when_asked(
    tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    kernel = FunctionKernel()
    instrument(kernel, tracer_provider=tracer_provider, capture_content=True)
    kernel.register_python_tool("math.add", add)
    await kernel.call_tool("python://math.add", {"a": 2, "b": 3})
    attributes = dict(spans.get_finished_spans()[0].attributes or {})
    assert attributes["gen_ai.tool.call.arguments"] == '{"a": 2, "b": 3}'
    assert attributes["gen_ai.tool.call.result"] == "5"


async def test_a_rest_call_sends_the_trace_context_to_the_server(
    traced: FunctionKernel, spans: InMemorySpanExporter, rest_url: str
) -> None:
    traced.register_rest_server(RestServer(name="shop", url=rest_url))
    traced.register_rest_tool("shop", "headers", "GET", path="/echo/headers")
    echoed = (await traced.call_tool("rest://shop.headers")).result  # type: ignore[attr-defined]
    [span] = spans.get_finished_spans()
    context = span.get_span_context()
    assert context is not None
    # The same trace (its parent is this span, or the HTTP client span under it when a global provider is set).
    assert echoed["traceparent"].split("-")[1] == f"{context.trace_id:032x}"
    assert dict(span.attributes or {})["gen_ai.tool.type"] == "extension"
    assert dict(span.attributes or {})["kavalai.tool.server"] == "shop"
    await traced.close()


async def test_an_untraced_rest_call_sends_a_trace_context_only_under_a_tracer_provider(rest_url: str) -> None:
    from kavalai.tracing import tracing_configured

    kernel = FunctionKernel()  # not instrumented
    kernel.register_rest_server(RestServer(name="shop", url=rest_url))
    kernel.register_rest_tool("shop", "headers", "GET", path="/echo/headers")
    echoed = (await kernel.call_tool("rest://shop.headers")).result  # type: ignore[attr-defined]
    # No provider: nothing is sent. A global provider (set by an earlier test here): the HTTP client span's context.
    assert ("traceparent" in echoed) == tracing_configured()
    await kernel.close()


async def test_an_mcp_server_receives_the_trace_context_in_meta(
    traced: FunctionKernel, spans: InMemorySpanExporter
) -> None:
    traced.register_mcp_server(
        McpServer(name="feat", command=sys.executable, args=["-m", "tests.servers.mcp_features"], cwd=ROOT)
    )
    received = (await traced.call_tool("mcp://feat.trace_context")).result  # type: ignore[attr-defined]
    await traced.close()
    [span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool mcp://feat.trace_context"]
    context = span.get_span_context()
    assert context is not None
    assert received.startswith(f"00-{context.trace_id:032x}-")  # the same trace, continued by the server


async def test_calls_are_logged_at_debug_without_their_content(
    traced: FunctionKernel, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="kavalai.calls"):
        await traced.call_tool("python://math.add", {"a": 40, "b": 2})
        with pytest.raises(ToolExecutionError):
            await traced.call_tool("python://fail", {"reason": "s3cret"})
    messages = [r.getMessage() for r in caplog.records if r.name == "kavalai.calls"]
    assert len(messages) == 2
    assert re.fullmatch(r"python://math\.add call-\d+ ok in \d+\.\d ms", messages[0])
    assert re.fullmatch(r"python://fail call-\d+ failed after \d+\.\d ms: ValueError", messages[1])
    assert not any("s3cret" in m or "40" in m.split(" ok")[0] for m in messages)


def test_the_library_logger_has_a_null_handler() -> None:
    import kavalai

    assert kavalai is not None
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("kavalai").handlers)


_GLOBAL_SPANS = InMemorySpanExporter()


@pytest.fixture
def global_spans() -> InMemorySpanExporter:
    """The global tracer provider, set once for the process, recording into memory (cleared for each test)."""
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_GLOBAL_SPANS))
        trace.set_tracer_provider(provider)
    _GLOBAL_SPANS.clear()
    return _GLOBAL_SPANS


def _by_name(spans: Any) -> dict[str, Any]:
    return {span.name: span for span in spans}


async def test_a_workflow_run_traces_down_to_the_mcp_server(global_spans: InMemorySpanExporter) -> None:
    from kavalai.workflow import WorkflowEngine

    engine = WorkflowEngine.from_yaml(
        f"""
name: traced
input: object
output: object
mcp_servers:
  - {{name: feat, command: {sys.executable}, args: [-m, tests.servers.mcp_features], cwd: {ROOT}}}
nodes:
  - {{id: start, kind: start, next: ask}}
  - {{id: ask, kind: function, tool: "mcp://feat.trace_context", next: end}}
  - {{id: end, kind: end, outputs: {{seen: ask.result}}}}
"""
    )
    instrument(engine.kernel)
    async with engine:
        result = await engine.run({})
    spans = _by_name(global_spans.get_finished_spans())
    run, node, tool = (
        spans["workflow traced"],
        spans["workflow.node ask"],
        spans["execute_tool mcp://feat.trace_context"],
    )
    [sdk] = [s for name, s in spans.items() if name.startswith("MCP send tools/call")]
    client = spans["tools/call trace_context"]
    assert run.parent is None
    assert node.parent.span_id == run.context.span_id
    assert tool.parent.span_id == node.context.span_id
    assert client.parent.span_id == tool.context.span_id  # the MCP operation (mcp.* attributes)
    assert sdk.parent.span_id == client.context.span_id  # and the MCP SDK's own, under it
    assert (client.kind, sdk.kind) == (SpanKind.INTERNAL, SpanKind.CLIENT)  # one CLIENT span a request: the SDK's
    attributes = dict(client.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert attributes["network.transport"] == "pipe"
    assert {s.context.trace_id for s in (run, node, tool, client, sdk)} == {run.context.trace_id}
    assert result.output["seen"].startswith(f"00-{run.context.trace_id:032x}-")  # the server continued the trace


async def test_an_agent_run_is_an_invoke_agent_span_with_chat_and_tool_spans(
    global_spans: InMemorySpanExporter,
) -> None:
    from kavalai.agent import Agent
    from kavalai.testing import ScriptedLLM, tool_call

    kernel = FunctionKernel()
    instrument(kernel)
    kernel.register_python_tool("math.add", add)
    llm = ScriptedLLM([tool_call("python://math.add", {"a": 1, "b": 2}), "3"])
    await Agent(llm, kernel=kernel).run("1 + 2?")
    spans = global_spans.get_finished_spans()
    [agent] = [s for s in spans if s.name == "invoke_agent scripted"]
    chats = [s for s in spans if s.name == "chat scripted"]
    [tool] = [s for s in spans if s.name == "execute_tool python://math.add"]
    assert len(chats) == 2
    assert {c.parent.span_id for c in chats} == {agent.context.span_id}
    assert tool.parent.span_id == agent.context.span_id
    assert dict(agent.attributes or {})["gen_ai.operation.name"] == "invoke_agent"
    usage = dict(chats[0].attributes or {})
    assert usage["gen_ai.provider.name"] == "scripted"
    assert usage["gen_ai.usage.input_tokens"] > 0


async def test_a_traced_rest_call_is_an_http_client_span(global_spans: InMemorySpanExporter, rest_url: str) -> None:
    kernel = FunctionKernel()
    instrument(kernel)
    kernel.register_rest_server(RestServer(name="shop", url=rest_url))
    kernel.register_rest_tool("shop", "headers", "GET", path="/echo/headers")
    echoed = (await kernel.call_tool("rest://shop.headers")).result  # type: ignore[attr-defined]
    await kernel.close()
    spans = global_spans.get_finished_spans()
    [tool] = [s for s in spans if s.name == "execute_tool rest://shop.headers"]
    [client] = [s for s in spans if s.name == "GET"]
    assert client.kind is SpanKind.CLIENT
    assert client.parent.span_id == tool.context.span_id
    attributes = dict(client.attributes or {})
    assert attributes["http.request.method"] == "GET"
    assert attributes["http.response.status_code"] == 200
    assert attributes["url.full"] == f"{rest_url}/echo/headers"
    assert echoed["traceparent"].startswith(f"00-{client.context.trace_id:032x}-{client.context.span_id:016x}-")


def test_the_environment_asks_for_traces_by_exporter_or_endpoint() -> None:
    from kavalai.tracing import tracing_requested

    assert tracing_requested({}) is False
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "otlp"}) is True
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "console,otlp"}) is True
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) is True
    assert tracing_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}) is True
    # "none" wins over an endpoint meant for other signals
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}) is False
    assert tracing_requested({"OTEL_SERVICE_NAME": "svc"}) is False  # naming a service switches nothing on


def test_off_is_off_whatever_the_environment_says() -> None:
    from kavalai.tracing import configure_tracing

    assert configure_tracing(enabled=False, env={"OTEL_TRACES_EXPORTER": "otlp"}) is None


async def test_an_mcp_tool_answering_is_error_is_an_error_on_kavalais_spans(
    global_spans: InMemorySpanExporter,
) -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="t", command=sys.executable, args=["-m", "tests.servers.mcp_tools"], cwd=str(ROOT))
    )
    instrument(kernel)
    async with kernel:
        with pytest.raises(ToolExecutionError, match="refused: no"):
            await kernel.call_tool("mcp://t.fail", {"reason": "no"})
    spans = _by_name(global_spans.get_finished_spans())
    tool, operation = spans["execute_tool mcp://t.fail"], spans["tools/call fail"]
    assert dict(tool.attributes or {})["error.type"] == "ToolExecutionError"
    assert dict(operation.attributes or {})["error.type"] == "ToolExecutionError"
    assert operation.status.status_code == StatusCode.ERROR
    assert [s.name for s in spans.values() if s.kind == SpanKind.CLIENT and "fail" in s.name] == [
        "MCP send tools/call fail"
    ]


_ECHOED_SECRET = """
import asyncio, sys
from kavalai import FunctionKernel, JsonRpcError, McpServer
from kavalai.secrets import register_secret
from kavalai.tracing import configure_tracing

setup = configure_tracing()
register_secret(sys.argv[1])


async def main() -> None:
    kernel = FunctionKernel()
    server = McpServer(name="features", command=sys.executable, args=["-m", "tests.servers.mcp_features"], timeout=60)
    kernel.register_mcp_server(server)
    try:
        await kernel.read_resource("features", "notes://" + sys.argv[1])  # the server answers naming the URI
    except JsonRpcError as exc:
        print(exc)
    finally:
        await kernel.close()
    setup.flush()


asyncio.run(main())
"""


async def test_a_secret_a_server_echoes_never_leaves_in_a_span_another_library_made(tmp_path: Path) -> None:
    """Hostile round 8, case 15: the MCP SDK's own client span (``MCP send resources/read``) takes a server's error
    message as its status; a server echoing a registered secret sent it to the collector whole (kavalai's own spans
    were masked). Every exporter ``configure_tracing`` sets up now sends each span through the secret gate."""
    import anyio

    from tests.servers.otlp_receiver import receive_traces

    secret = "otel-echoed-secret-4b7e1d"
    script = tmp_path / "echoed.py"
    script.write_text(_ECHOED_SECRET, encoding="utf-8")
    async with receive_traces() as receiver:
        clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
        env = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "PYTHONPATH": str(ROOT)}
        done = await anyio.run_process([sys.executable, str(script), secret], env=env, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert "Unknown resource: notes://***" in done.stdout.decode()  # the server did echo it
    assert receiver.named("MCP send resources/read")  # the SDK's span arrived
    sent = b"".join(receiver.bodies)
    assert b"notes://***" in sent
    assert secret.encode() not in sent
