"""The secret gate at the door spans leave by: the exporters :func:`kavalai._tracing_setup.configure_tracing` sets up
send every span masked, whoever made it.

``kavalai.tracing`` masks what kavalai puts on its own spans when it puts it there; other libraries make spans of
their own under the same provider, with text kavalai never sees: the MCP SDK's ``MCP send ...`` client span sets
its status to the error message a server answered with, so a server echoing a registered secret (a token in the
URI asked for, an API key it was started with) put it in a span that left the process whole. Every span an exporter
of ours sends is masked here first (its name, attributes, status, and its events' attributes, the recorded
exceptions' messages and stack traces among them); a span that holds no secret is sent as it is.

This module needs the OpenTelemetry SDK, which is imported only when tracing is switched on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from kavalai.secrets import redact, redact_data

__all__ = ["MaskingExporter", "masked_span"]


class MaskingExporter(SpanExporter):
    """``inner``, sent every span through :func:`masked_span`."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans``, masked."""
        return self.inner.export([masked_span(span) for span in spans])

    def shutdown(self) -> None:
        """Shut the inner exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the inner exporter."""
        return self.inner.force_flush(timeout_millis)


def masked_span(span: ReadableSpan) -> ReadableSpan:
    """``span`` with every registered secret masked in its name, attributes, status and events; ``span`` itself
    when it holds none."""
    name = redact_data(span.name)
    attributes = _masked_mapping(span.attributes)
    events = [_masked_event(event) for event in span.events]
    description = span.status.description
    status = span.status if description is None else Status(span.status.status_code, redact(description))
    unchanged = name is span.name and attributes is span.attributes and status.description == description
    if unchanged and all(a is b for a, b in zip(events, span.events, strict=True)):
        return span
    return ReadableSpan(
        name=name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _masked_mapping(attributes: Any) -> Any:
    if not attributes:
        return attributes
    plain = dict(attributes)
    masked = redact_data(plain)
    return attributes if masked is plain else masked


def _masked_event(event: Event) -> Event:
    attributes = _masked_mapping(event.attributes)
    if attributes is event.attributes:
        return event
    return Event(event.name, attributes, event.timestamp)
