"""Tracing switched on the standard OpenTelemetry way: from the ``OTEL_*`` environment, or an explicit switch.

:func:`configure_tracing` makes the OpenTelemetry SDK's tracer provider the global one, with the exporters
``OTEL_TRACES_EXPORTER`` names (``otlp`` by default, sent over OTLP/HTTP unless ``OTEL_EXPORTER_OTLP_PROTOCOL`` says
``grpc``; ``console``, written to stderr; any exporter installed under the ``opentelemetry_traces_exporter`` entry
points). The exporters, the batch processor and the sampler read the rest of the standard variables themselves
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_BSP_*``, ``OTEL_TRACES_SAMPLER``, ...);
the resource reads ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``.

When a global tracer provider is already set (the program runs under ``opentelemetry-instrument``, or its own code
set one), that provider is used as it is: nothing is configured twice.

This module needs only ``opentelemetry-api`` to import; the SDK and the OTLP exporter (``pip install
'kavalai[otel]'``) are imported when tracing is switched on.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace

from kavalai.errors import ConfigurationError
from kavalai.kernel import required_seconds
from kavalai.secrets import redact, register_url_credentials

__all__ = ["TracingNotInstalled", "TracingSetup", "configure_tracing", "tracing_requested"]

_INSTALL: Final = "pip install 'kavalai[otel]'"
_ENTRY_POINTS: Final = "opentelemetry_traces_exporter"
#: The exporter (entry point name) of ``otlp`` by protocol; OTLP/HTTP with protobuf is the specification's default.
_OTLP_BY_PROTOCOL: Final = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
#: The variable naming a credential provider whose ``requests`` session the OTLP/HTTP exporter uses instead.
_CREDENTIAL_PROVIDER: Final = "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"
_OTLP_PACKAGES: Final = {
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
}


class TracingNotInstalled(ConfigurationError):
    """Tracing is asked for, but the OpenTelemetry SDK or the exporter it needs is not installed. A command traced
    only because the environment carries ``OTEL_*`` variables (hosts often set them for other programs) goes on
    untraced and says so once; an explicit ``--tracing`` or ``tracing: true`` fails."""


@dataclass(frozen=True)
class TracingSetup:
    """How spans are recorded, once :func:`configure_tracing` switched tracing on.

    Attributes:
        source: ``"global"`` (a provider was already set, by ``opentelemetry-instrument`` say), ``"environment"``
            (``OTEL_*`` variables asked for it) or ``"switch"`` (the caller asked for it).
        exporters: where spans go, one line each (``"otlp http://127.0.0.1:4318/v1/traces"``); empty for a
            global provider, whose exporters are its owner's.
        service_name: the resource's ``service.name`` (``None`` for a global provider).
        masked: whether every span the provider records passes the secret gate (always for a provider kavalai set
            up; for a global one, when it is the OpenTelemetry SDK's, from the moment kavalai saw it).
    """

    source: Literal["global", "environment", "switch"]
    exporters: tuple[str, ...] = ()
    service_name: str | None = None
    masked: bool = True
    _provider: Any = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        """One line saying how spans are recorded, for a command's start-up message."""
        if self.source == "global":
            masking = "" if self.masked else "; not the OpenTelemetry SDK's, so other libraries' spans are not masked"
            return (
                f"tracing with the tracer provider already set (opentelemetry-instrument or the program's own){masking}"
            )
        where = ", ".join(self.exporters) or "no exporter (OTEL_TRACES_EXPORTER=none)"
        return f"tracing as service {self.service_name!r} to {where}"

    def flush(self, timeout: float = 5.0) -> None:
        """Send the spans still buffered (blocking, at most ``timeout`` seconds), a global provider's too: its
        exporter may write to stdout, which must not happen once ``kavalai serve`` hands stdout back.

        Raises:
            ValueError: ``timeout`` is not positive seconds (the one rule, ``kavalai.kernel.limit_seconds``).
        """
        seconds = required_seconds(timeout, what="timeout")
        provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        force_flush = getattr(provider, "force_flush", None)
        if callable(force_flush):
            force_flush(timeout_millis=int(seconds * 1000))

    def shutdown(self) -> None:
        """Flush and stop the provider this setup made (a global provider set by others is theirs to stop)."""
        if self._provider is not None:
            self._provider.shutdown()


def tracing_requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces: ``OTEL_TRACES_EXPORTER`` is set (and not ``none``), or an OTLP
    endpoint is (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)."""
    env = os.environ if env is None else env
    exporters = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure_tracing(
    *, enabled: bool | None = None, service_name: str = "kavalai", env: Mapping[str, str] | None = None
) -> TracingSetup | None:
    """Make spans record: the global tracer provider when one is set, else a new SDK provider set as the global
    one, with the exporters the standard environment names.

    Args:
        enabled: ``True`` to trace (exporting over OTLP to the standard endpoint when no variable says otherwise);
            ``False`` never to (``None`` is returned); ``None`` to trace when :func:`tracing_requested` or a global
            provider is set.
        service_name: the ``service.name`` when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES``
            gives one.
        env: the environment to read (``os.environ`` by default; the exporters read ``os.environ`` themselves).

    Returns:
        How spans are recorded, or ``None`` when tracing stays off.

    Raises:
        ConfigurationError: tracing is asked for but the SDK or a named exporter is not installed, or
            ``OTEL_TRACES_EXPORTER`` names an exporter nobody provides.
    """
    if enabled is False:
        return None
    env = os.environ if env is None else env
    provider = trace.get_tracer_provider()
    if not isinstance(provider, trace.ProxyTracerProvider):
        return TracingSetup(source="global", masked=_mask_global(provider))
    if enabled is None and not tracing_requested(env):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TracingNotInstalled(f"Tracing needs the OpenTelemetry SDK: {_INSTALL}") from None
    exporters = [(name, _exporter(name, env)) for name in _exporter_names(env)]
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service_name}))
    provider = TracerProvider(resource=resource)
    from kavalai import _span_masking as _masking
    from kavalai._span_masking import MaskingExporter

    for _, exporter in exporters:  # every span masked as it leaves, whichever library made it
        provider.add_span_processor(BatchSpanProcessor(MaskingExporter(exporter)))
    _masking.provider_masked(provider)
    trace.set_tracer_provider(provider)
    return TracingSetup(
        source="switch" if enabled else "environment",
        exporters=tuple(_shown(name, env) for name, _ in exporters),
        service_name=str(resource.attributes["service.name"]),
        _provider=provider,
    )


def _mask_global(provider: trace.TracerProvider) -> bool:
    """Hand a provider set by others to the span gate: whether its spans are masked (an SDK provider's are)."""
    try:
        from kavalai._span_masking import mask_provider
    except ImportError:  # no SDK installed: the provider is another implementation's
        return False
    return mask_provider(provider)


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    names = [name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if name.strip()]
    if names == ["none"]:
        return []
    resolved = []
    for name in names or ["otlp"]:
        if name == "otlp":
            protocol = _protocol(env)
            name = _OTLP_BY_PROTOCOL.get(protocol, "")
            if not name:
                raise ConfigurationError(
                    f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not one of {', '.join(_OTLP_BY_PROTOCOL)}"
                )
        resolved.append(name)
    return resolved


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    """An exporter by its entry point name, as the SDK's own configuration finds them."""
    found = entry_points(group=_ENTRY_POINTS, name=name)
    if not found:
        package = _OTLP_PACKAGES.get(name)
        if package:  # a known exporter whose package is missing, not a name nobody provides
            fix = f"install {package} ({_INSTALL} has the OTLP/HTTP one)"
            raise TracingNotInstalled(f"OTEL_TRACES_EXPORTER: no trace exporter {name!r} is installed; {fix}")
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER: no trace exporter {name!r} is installed; install the package giving it"
        )
    exporter_class = next(iter(found)).load()
    if name in _OTLP_PACKAGES:
        session = _checked_endpoint(name, env)
        if session is not None:
            return exporter_class(session=session)
    if name == "console":  # stdout is a command's output, or the MCP protocol stream of `kavalai serve`
        import sys

        return exporter_class(out=sys.stderr)
    return exporter_class()


def _checked_endpoint(name: str, env: Mapping[str, str]) -> Any:
    """Judge an OTLP exporter's endpoint at the outbound gate (no link-local, metadata, multicast or reserved
    address; loopback and private ranges allowed); for OTLP/HTTP, the gate's ``requests`` session, which judges
    every request and redirect again (``None``: keep the exporter's own, or one a credential provider gives)."""
    from yarl import URL

    from kavalai.errors import OutboundRefusedError
    from kavalai.http import LOCAL_NETWORKS, Outbound, check_endpoint, requests_session

    variable = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    if not env.get(variable):
        variable = "OTEL_EXPORTER_OTLP_ENDPOINT"
    outbound = Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing")
    url = _endpoint(name, env).rpartition(" ")[2]
    try:
        register_url_credentials(url)  # before any message can name the URL
        parsed = URL(url)
        outbound.learn(url, variable)
        check_endpoint(outbound, parsed)
    except (ValueError, OutboundRefusedError) as exc:
        raise ConfigurationError(f"{variable}: {redact(str(exc))}") from None
    if name == "otlp_proto_grpc":
        _grpc_host(variable, parsed)
    if name != "otlp_proto_http" or os.environ.get(_CREDENTIAL_PROVIDER):
        return None
    return requests_session(outbound)


def _grpc_host(variable: str, url: Any) -> None:
    """OTLP over gRPC: the collector's host must be an IP address (judged above) or ``localhost``; the gRPC channel
    resolves a name itself, where the outbound gate cannot judge the addresses it connects to."""
    host = (url.raw_host or "").strip("[]").lower().rstrip(".")
    if host == "localhost":
        return
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        raise ConfigurationError(
            f"{variable}: OTLP over gRPC needs the collector's IP address or localhost, not the host name {host!r}: "
            "the gRPC channel resolves a name itself, past the outbound gate's check of the addresses; give the "
            "address, or send OTLP/HTTP (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf), whose connections the gate judges"
        ) from None


def _protocol(env: Mapping[str, str]) -> str:
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    ).strip()


def _shown(name: str, env: Mapping[str, str]) -> str:
    """Where an exporter sends spans, as the OTLP specification derives the endpoint from the variables; the
    endpoints' userinfo is registered with the secret gate and never shown."""
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        register_url_credentials(env.get(variable))
    return redact(_without_userinfo(_endpoint(name, env)))


def _without_userinfo(shown: str) -> str:
    kind, _, url = shown.rpartition(" ")
    try:
        parts = urlsplit(url)
    except ValueError:
        return shown
    if "@" not in parts.netloc:
        return shown
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return f"{kind} {bare}".strip()


def _endpoint(name: str, env: Mapping[str, str]) -> str:
    if name == "otlp_proto_http":
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if not endpoint:
            endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318").rstrip("/") + "/v1/traces"
        return f"OTLP/HTTP {endpoint}"
    if name == "otlp_proto_grpc":
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return f"OTLP/gRPC {endpoint or 'http://localhost:4317'}"
    return name
