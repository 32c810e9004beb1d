"""A real OTLP/HTTP trace receiver on 127.0.0.1, for the tests of tracing switched on from the environment.

It accepts ``POST /v1/traces`` with the protobuf body OTLP exporters send (gzip or not), decodes it with
``opentelemetry-proto`` and keeps each span as a :class:`ReceivedSpan`. ``async with receive_traces() as receiver``
serves it on a free port in the running event loop.
"""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

_PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived: ids in lowercase hex (``parent_span_id`` is ``""`` for a root span)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str  # "SERVER", "CLIENT", "INTERNAL", ...
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


@dataclass
class Receiver:
    """What the receiver got: the spans, every request's content type, and every request's body as sent (decoded
    from gzip: what left the process, status messages and events included)."""

    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)

    def named(self, prefix: str) -> list[ReceivedSpan]:
        """The spans whose name starts with ``prefix``."""
        return [span for span in self.spans if span.name.startswith(prefix)]


@asynccontextmanager
async def receive_traces() -> AsyncIterator[Receiver]:
    """Serve the receiver on a free 127.0.0.1 port for the block; ``receiver.url`` is its base URL (the value of
    ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    app = web.Application()
    receiver = Receiver(url="")

    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        receiver.content_types.append(request.content_type)
        receiver.bodies.append(body)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        receiver.spans.extend(_spans(message))
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type=_PROTOBUF)

    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        receiver.url = f"http://{host}:{port}"
        yield receiver
    finally:
        await runner.cleanup()


def _spans(message: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found = []
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                        attributes=_attributes(span.attributes),
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return found


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return None if kind is None else getattr(value, kind)
