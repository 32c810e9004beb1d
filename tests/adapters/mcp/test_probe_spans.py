"""The SDK's ``server/discover`` probe on a server of the handshake era: answered "method not found", it is no
ERROR span (nothing failed: the handshake follows), and the ``initialize`` span stays."""

from __future__ import annotations

import sys

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tests.test_tracing import ROOT, global_spans

from kavalai import FunctionKernel, McpServer

__all__ = ["global_spans"]  # the fixture, shared with tests/test_tracing.py (one global tracer provider a process)


async def test_the_discover_probe_an_older_server_does_not_know_is_no_error_span(
    global_spans: InMemorySpanExporter,
) -> None:
    kernel = FunctionKernel()
    server = McpServer(name="old", command=sys.executable, args=["-m", "tests.servers.mcp_handshake_only"], cwd=ROOT)
    kernel.register_mcp_server(server)
    async with kernel:
        assert (await kernel.call_tool("mcp://old.add", {"a": 2, "b": 3})).result == 5
    spans = global_spans.get_finished_spans()
    [probe] = [s for s in spans if s.name == "MCP send server/discover"]
    [initialize] = [s for s in spans if s.name == "MCP send initialize"]
    assert probe.kind == SpanKind.CLIENT
    assert probe.status.status_code is not StatusCode.ERROR
    assert "handshake" in str((probe.attributes or {})["kavalai.mcp.probe"])
    assert (probe.attributes or {})["error.type"] == "-32601"  # what the server answered, as the SDK records it
    assert initialize.status.status_code is not StatusCode.ERROR
    assert [s.name for s in spans if s.status.status_code is StatusCode.ERROR] == []
