"""The secret gate at the door spans leave by: the exporters :func:`kavalai._tracing_setup.configure_tracing` sets up
send every span masked, whoever made it.

``kavalai.tracing`` masks what kavalai puts on its own spans when it puts it there; other libraries make spans of
their own under the same provider, with text kavalai never sees: the MCP SDK's ``MCP send ...`` client span sets
its status to the error message a server answered with, so a server echoing a registered secret (a token in the
URI asked for, an API key it was started with) put it in a span that left the process whole. Every span an exporter
of ours sends is masked here first (its name, attributes, status, and its events' attributes, the recorded
exceptions' messages and stack traces among them); a span that holds no secret is sent as it is.

A provider kavalai did not set up (the program's own, or ``opentelemetry-instrument``'s) is the OpenTelemetry SDK's
in practice: :func:`mask_provider` adds :class:`MaskingProcessor` to it through the SDK's public
``add_span_processor``, the first time kavalai sees it (``configure_tracing``, or ``tracing_configured`` finding one
set). From then on every span started under it is masked as it starts (name, attributes) and what is set on it later
passes the gate as it is set (``set_attribute``, ``set_attributes``, ``set_status``, ``add_event``, and so
``record_exception``, ``update_name``), whichever library made it, before any exporter reads it. Not covered, and
said so in docs/safety.md: spans started before kavalai saw the provider, what another processor reads in its own
``on_start`` before ours runs, and the spans of a provider that is not the SDK's (another implementation of the API:
kavalai cannot reach its spans; its own spans are masked where it sets their attributes, under any provider).

This module needs the OpenTelemetry SDK, which is imported only when tracing is switched on.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from kavalai.secrets import redact, redact_data

__all__ = ["MaskingExporter", "MaskingProcessor", "mask_provider", "masked_span", "provider_masked"]

#: The SDK providers whose spans pass the gate: kavalai's own (their exporters mask) and those it added its
#: processor to.
_MASKED: Final[weakref.WeakSet[TracerProvider]] = weakref.WeakSet()
_LOCK: Final = threading.Lock()


def provider_masked(provider: object) -> None:
    """Record ``provider`` (one kavalai set up, its exporters masking) as passing the gate already."""
    if isinstance(provider, TracerProvider):
        with _LOCK:
            _MASKED.add(provider)


def mask_provider(provider: object) -> bool:
    """Make every span ``provider`` starts from now on pass the secret gate (see the module docstring): ``True``
    when it does (an OpenTelemetry SDK provider), ``False`` for a provider of another kind, left as it is."""
    if not isinstance(provider, TracerProvider):
        return False
    with _LOCK:
        if provider in _MASKED:
            return True
        _MASKED.add(provider)
    provider.add_span_processor(MaskingProcessor())
    return True


class MaskingProcessor(SpanProcessor):
    """Masks each span as it starts, and makes what is set on it later pass the secret gate as it is set."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Mask ``span``'s name and attributes, and gate its setters."""
        name = redact_data(span.name)
        if name is not span.name:
            span.update_name(name)
        attributes = span.attributes
        masked = _masked_mapping(attributes)
        if masked is not attributes:
            span.set_attributes(masked)
        for setter, gate in _SETTERS.items():
            setattr(span, setter, gate(getattr(span, setter)))

    def on_end(self, span: ReadableSpan) -> None:
        """Nothing: the span was masked as it was written."""

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing buffered."""
        return True


def _gated_attribute(original: Callable[..., Any]) -> Callable[..., Any]:
    def set_attribute(key: str, value: Any) -> None:
        original(key, redact_data(value))

    return set_attribute


def _gated_attributes(original: Callable[..., Any]) -> Callable[..., Any]:
    def set_attributes(attributes: Mapping[str, Any]) -> None:
        original(_masked_mapping(attributes))

    return set_attributes


def _gated_status(original: Callable[..., Any]) -> Callable[..., Any]:
    def set_status(status: Any, description: str | None = None) -> None:
        if isinstance(status, Status) and status.description:
            status = Status(status.status_code, redact(status.description))
        original(status, redact(description) if description else description)

    return set_status


def _gated_event(original: Callable[..., Any]) -> Callable[..., Any]:
    def add_event(name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None) -> None:
        original(redact_data(name), _masked_mapping(attributes), timestamp)

    return add_event


def _gated_name(original: Callable[..., Any]) -> Callable[..., Any]:
    def update_name(name: str) -> None:
        original(redact_data(name))

    return update_name


#: The setters of an SDK span that write text an exporter sends, and their gates (``record_exception`` writes
#: through ``add_event``).
_SETTERS: Final[Mapping[str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = {
    "set_attribute": _gated_attribute,
    "set_attributes": _gated_attributes,
    "set_status": _gated_status,
    "add_event": _gated_event,
    "update_name": _gated_name,
}


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
