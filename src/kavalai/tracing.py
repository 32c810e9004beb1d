"""OpenTelemetry for tool calls, by the GenAI semantic conventions: a span and a duration per call, of every kind.

``instrument(kernel)`` adds :func:`tool_tracing` to a kernel's middleware. Each call then runs in an
``execute_tool {uri}`` span (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.type``, ``error.type`` on failure; the arguments and the result only when ``capture_content=True``),
and its duration is recorded on the ``gen_ai.execute_tool.duration`` histogram. Because the span is current while the
tool runs, what the tool does nests under it: the MCP SDK's own client span for ``tools/call`` (which also puts the
W3C trace context into the request's ``_meta``), and the ``traceparent`` header the REST adapter sends.

Only ``opentelemetry-api`` is needed: without an SDK configured, spans and metrics are no-ops. A kernel that is not
instrumented has no tracing middleware at all, so its calls cost nothing extra.

:func:`configure_tracing` sets the SDK up from the standard ``OTEL_*`` environment (the ``otel`` extra), or takes the
provider ``opentelemetry-instrument`` already set; ``kavalai serve``, ``run`` and ``worker`` call it, then
``instrument`` their kernel.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode

from kavalai._tracing_setup import TracingSetup, configure_tracing, tracing_requested
from kavalai.kernel import CallNext, Kernel, Middleware, ToolCall
from kavalai.secrets import get_logger, redact

__all__ = [
    "TracingSetup",
    "annotate",
    "call_logging",
    "configure_tracing",
    "instrument",
    "mark_failed",
    "mcp_client_span",
    "safe_attributes",
    "server_span",
    "settle_ok",
    "span",
    "tool_tracing",
    "tracing_configured",
    "tracing_requested",
]

logger = get_logger("kavalai.calls")

#: ``gen_ai.tool.type`` by scheme: a Python function is a "function"; a REST endpoint or an MCP server's tool is
#: an "extension" (a tool run by an external service), in the conventions' terms.
_TOOL_TYPES: Final[Mapping[str, str]] = {"python": "function", "rest": "extension", "mcp": "extension"}
_MAX_CONTENT_CHARS: Final = 8192  # captured arguments and results are cut here: an attribute is not a payload store
_SCOPE: Final = "kavalai"


def tool_tracing(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    capture_content: bool = False,
) -> Middleware:
    """A middleware that traces every call (see the module docstring).

    Args:
        tracer_provider: the provider to take the tracer from; the global one by default.
        meter_provider: the provider to take the meter from; the global one by default.
        capture_content: also record the validated arguments and the raw result as span attributes
            (``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``, JSON, at most 8,192 characters each).
            Off by default: they may hold personal data.
    """
    tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
    meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
    duration = meter.create_histogram(
        "gen_ai.execute_tool.duration", unit="s", description="The duration of tool calls, by tool and outcome."
    )

    async def tracing(call: ToolCall, call_next: CallNext) -> Any:
        definition = call.definition
        attributes = _attributes(call)
        if capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments.model_dump(mode="json", by_alias=True))
        started = time.perf_counter()
        with tracer.start_as_current_span(
            f"execute_tool {definition.name}",
            kind=SpanKind.INTERNAL,
            attributes=safe_attributes(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                raw = await call_next(call)
            except BaseException as exc:
                error = _error_type(call, exc)
                span.set_attribute("error.type", error)
                span.set_status(Status(StatusCode.ERROR, _cut(redact(str(exc))) or error))
                if isinstance(exc, Exception):
                    _record_exception(span, exc)
                duration.record(time.perf_counter() - started, _metric_attributes(attributes, error))
                raise
            if capture_content:
                span.set_attribute("gen_ai.tool.call.result", _json(raw))
        duration.record(time.perf_counter() - started, _metric_attributes(attributes, None))
        return raw

    return tracing


def call_logging() -> Middleware:
    """A middleware that logs every call at DEBUG on ``kavalai.calls``: its URI, call id, duration and outcome
    (the error's type and message on failure; never the arguments or the result, which may hold secrets)."""

    async def logging_middleware(call: ToolCall, call_next: CallNext) -> Any:
        if not logger.isEnabledFor(logging.DEBUG):
            return await call_next(call)
        started = time.perf_counter()
        try:
            raw = await call_next(call)
        except BaseException as exc:
            took = (time.perf_counter() - started) * 1000
            logger.debug("%s %s failed after %.1f ms: %s", call.uri, call.call_id, took, _error_type(call, exc))
            raise
        logger.debug("%s %s ok in %.1f ms", call.uri, call.call_id, (time.perf_counter() - started) * 1000)
        return raw

    return logging_middleware


def instrument(kernel: Kernel, *, log_calls: bool = True, **options: Any) -> None:
    """Trace every call of ``kernel`` from now on: adds :func:`tool_tracing` (``options`` are its arguments) and,
    unless ``log_calls=False``, :func:`call_logging` to its middleware. Middleware run in the order added, so
    instrument first to have the others inside the span."""
    kernel.add_middleware(tool_tracing(**options))
    if log_calls:
        kernel.add_middleware(call_logging())


_tracer = trace.get_tracer(_SCOPE)  # a proxy: it follows the global provider once one is set


_configured: list[bool] = [False]  # a set provider is never unset: once seen, known for good
_NOT_KNOWN: Final = object()


def tracing_configured() -> bool:
    """Whether a tracer provider has been set (spans then record); cheap enough to ask on every REST call.

    While no provider is set, OpenTelemetry's public ``trace.get_tracer_provider()`` looks
    ``OTEL_PYTHON_TRACER_PROVIDER`` up in the environment on every call (a missed key raises and catches a
    ``KeyError``: 2.4 µs, measured; on every REST and MCP call and workflow run that was a third of the gap to a raw
    aiohttp session at 32 in flight). So the API's global is read first, the one read of another package's private
    name in kavalai (allowed by name in ``tests/test_foreign_tracer_provider.py``); the environment variable is
    honoured all the same (the ``get_tracer`` call above, at import, loaded the provider it names), and should
    OpenTelemetry rename its global, the public call is made instead. Once a provider is seen, the answer is kept
    (the API sets the global once and for all), and the provider is handed to the secret gate of spans
    (:func:`kavalai._span_masking.mask_provider`): an OpenTelemetry SDK provider set by the program or
    ``opentelemetry-instrument`` masks what every span records from then on.
    """
    if _configured[0]:
        return True
    global_provider = getattr(trace, "_TRACER_PROVIDER", _NOT_KNOWN)
    if global_provider is None:
        return False
    provider = trace.get_tracer_provider() if global_provider is _NOT_KNOWN else global_provider
    if not isinstance(provider, trace.TracerProvider) or isinstance(provider, trace.ProxyTracerProvider):
        return False
    _configured[0] = True
    _mask(provider)
    return True


def _mask(provider: trace.TracerProvider) -> None:
    """Hand ``provider`` to the span gate (which needs the SDK: a provider of another kind is left as it is)."""
    try:
        from kavalai._span_masking import mask_provider
    except ImportError:  # pragma: no cover - a provider set without the SDK installed is not the SDK's
        return
    mask_provider(provider)


@contextmanager
def span(
    name: str, attributes: Mapping[str, Any], *, enabled: bool = True, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[trace.Span | None]:
    """A span of the global tracer for agents and workflows (``None`` when ``enabled`` is false): on an exception
    it records ``error.type`` and an error status, then lets the exception go on."""
    if not enabled:
        yield None
        return
    with _tracer.start_as_current_span(
        name, kind=kind, attributes=safe_attributes(attributes), record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(Status(StatusCode.ERROR, _cut(redact(str(exc)))))
            raise


@contextmanager
def server_span(name: str, attributes: Mapping[str, Any], parent: Context | None) -> Iterator[trace.Span]:
    """A SERVER span of the global tracer, child of ``parent`` (the current context when ``None``), its attributes
    through the secret gate; an exception is neither recorded nor made its status here (see :func:`mark_failed`)."""
    with _tracer.start_as_current_span(
        name,
        kind=SpanKind.SERVER,
        attributes=safe_attributes(attributes),
        context=parent,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        yield current


def mark_failed(
    current: trace.Span, attributes: Mapping[str, Any], description: str | None, exc: Exception | None = None
) -> None:
    """Make ``current`` an error: ``attributes``, ``description`` and ``exc`` (recorded when given) through the
    secret gate."""
    annotate(current, attributes)
    if exc is not None:
        _record_exception(current, exc)
    current.set_status(Status(StatusCode.ERROR, redact(description) if description is not None else None))


def safe_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with every registered secret masked in their text (the secret gate for span attributes)."""
    return {key: _safe(value) for key, value in attributes.items()}


def annotate(current: trace.Span | None, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` on ``current`` (nothing when ``None``) through the secret gate: the one way kavalai sets
    an attribute on a span it did not just start with :func:`span`."""
    if current is not None:
        current.set_attributes(safe_attributes(attributes))


def settle_ok(current: trace.Span, attributes: Mapping[str, Any]) -> None:
    """Mark ``current`` (a span another library started) OK, which OpenTelemetry keeps as final, with
    ``attributes`` through the secret gate: for an answer that library records as an error but that is expected."""
    annotate(current, attributes)
    current.set_status(trace.Status(trace.StatusCode.OK))


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [redact(item) if isinstance(item, str) else item for item in value]
    return value


def _record_exception(current: trace.Span, exc: Exception) -> None:
    """Record ``exc`` on ``current`` with its message and stack trace through the secret gate."""
    trace_text = "".join(traceback.format_exception(exc))
    current.record_exception(
        exc, attributes={"exception.message": redact(str(exc)), "exception.stacktrace": redact(trace_text)}
    )


_mcp_duration: metrics.Histogram | None = None


@contextmanager
def mcp_client_span(method: str, target: str, attributes: Mapping[str, Any]) -> Iterator[None]:
    """A span ``{mcp.method.name} {target}`` with the MCP semantic conventions' attributes, and the
    ``mcp.client.operation.duration`` histogram; nothing at all when no tracer provider is set.

    The span is INTERNAL: it covers the whole operation (a 2026-07-28 input round, a task followed to its end), and
    the MCP SDK makes the one CLIENT span of each request sent under it. A tool that answers ``isError`` is an error
    here too (raise inside the block)."""
    global _mcp_duration
    if not tracing_configured():
        yield
        return
    if _mcp_duration is None:
        _mcp_duration = metrics.get_meter(_SCOPE).create_histogram(
            "mcp.client.operation.duration", unit="s", description="The duration of MCP requests."
        )
    shown = {"mcp.method.name": method, **attributes}
    started = time.perf_counter()
    error: str | None = None
    try:
        with span(f"{method} {target}", shown):
            yield
    except BaseException as exc:
        error = type(exc).__qualname__
        raise
    finally:
        measured = {k: v for k, v in shown.items() if k in ("mcp.method.name", "gen_ai.tool.name", "network.transport")}
        if error is not None:
            measured["error.type"] = error
        _mcp_duration.record(time.perf_counter() - started, measured)


def _attributes(call: ToolCall) -> dict[str, Any]:
    definition = call.definition
    scheme = definition.uri.scheme
    call_id = call.metadata.get("tool_call_id") or call.call_id  # an agent's tool-call id when it gave one
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": definition.name,
        "gen_ai.tool.call.id": str(call_id),
        "gen_ai.tool.type": _TOOL_TYPES.get(scheme, "extension"),
    }
    if definition.description:
        attributes["gen_ai.tool.description"] = _cut(redact(definition.description))
    server = definition.metadata.get("server")
    if isinstance(server, str):
        attributes["kavalai.tool.server"] = server
    return attributes


def _metric_attributes(attributes: Mapping[str, Any], error: str | None) -> dict[str, Any]:
    shown = {key: attributes[key] for key in ("gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.type")}
    if error is not None:
        shown["error.type"] = error
    return shown


def _error_type(call: ToolCall, exc: BaseException) -> str:
    """``error.type``: the exception's class name; a call cut short by its deadline is a ``timeout``."""
    if not isinstance(exc, Exception) and call.remaining() == 0.0:
        return "timeout"
    return type(exc).__qualname__


def _json(value: Any) -> str:
    try:
        text = json.dumps(value, default=_fallback, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return _cut(redact(text))


def _cut(text: str) -> str:
    """``text`` cut to :data:`_MAX_CONTENT_CHARS`: after masking, so no secret is cut into a prefix that shows."""
    return text if len(text) <= _MAX_CONTENT_CHARS else f"{text[:_MAX_CONTENT_CHARS]}..."


def _fallback(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else repr(value)
