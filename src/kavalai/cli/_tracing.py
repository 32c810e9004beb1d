"""Tracing for ``kavalai serve``, ``run`` and ``worker``: on when the ``OTEL_*`` environment asks for it, a
``tracing:`` key of the file says so, or ``--tracing`` does (``--no-tracing`` and ``tracing: false`` keep it off).

The command line wins over the file, the file over the environment. Under ``opentelemetry-instrument`` the provider
it set is used. The command says on stderr, at start, where spans go.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from kavalai._tracing_setup import TracingSetup
    from kavalai.kernel import Kernel

__all__ = ["add_tracing_arguments", "file_tracing", "flush_on_close", "start_tracing", "stop_tracing"]


def add_tracing_arguments(parser: argparse.ArgumentParser, *, short: bool) -> None:
    """Add ``--tracing`` / ``--no-tracing`` (and ``--trace`` / ``--no-trace`` when ``short``: ``kavalai run``
    already has a ``--trace`` of its own, printing the run's trace)."""
    names = ["--tracing", "--trace"] if short else ["--tracing"]
    parser.add_argument(
        *names,
        dest="tracing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send OpenTelemetry traces (the otel extra; exporters from the OTEL_* environment, OTLP/HTTP by "
        "default); by default on when OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT is set",
    )


def file_tracing(path: str | Path) -> bool | None:
    """The ``tracing:`` key of a workflow file (``None`` when absent or unreadable: the loader reports those)."""
    from kavalai.documents import load_json_or_yaml
    from kavalai.errors import ConfigurationError

    try:
        document = load_json_or_yaml(Path(path).read_text(encoding="utf-8"), source=str(path))
    except (OSError, ConfigurationError):
        return None
    value = document.get("tracing") if isinstance(document, dict) else None
    return value if isinstance(value, bool) else None


def start_tracing(
    kernel: Kernel, switch: bool | None, configured: bool | None, *, command: str, err: TextIO, quiet: bool = False
) -> TracingSetup | None:
    """Switch tracing on as the command line (``switch``), then the file (``configured``), then the environment
    say; instrument ``kernel``; say so on ``err``.

    When only the environment asks for tracing and the SDK or the OTLP exporter is not installed, the command
    goes on untraced and says so on ``err``.

    Raises:
        ConfigurationError: tracing is asked for but cannot be set up (the command line or the file asked and the
            SDK or an exporter is missing, or ``OTEL_TRACES_EXPORTER`` names an exporter nobody provides).
    """
    from kavalai._tracing_setup import TracingNotInstalled
    from kavalai.tracing import configure_tracing, instrument

    enabled = switch if switch is not None else configured
    try:
        setup = configure_tracing(enabled=enabled)
    except TracingNotInstalled as exc:
        if enabled is not None:  # asked for on the command line or in the file: that cannot be ignored
            raise
        print(f"{command}: not tracing: {exc}", file=err, flush=True)  # the environment alone asked: go on
        return None
    if setup is None:
        return None
    instrument(kernel)
    if not quiet:
        print(f"{command}: {setup.describe()}", file=err, flush=True)
    return setup


def flush_on_close(kernel: Kernel, setup: TracingSetup | None) -> None:
    """Send the spans still buffered when ``kernel`` closes (before a process that exits at once is gone)."""
    if setup is None:
        return

    async def flush() -> None:
        import asyncio

        await asyncio.to_thread(setup.flush)

    kernel.on_close(flush)


def stop_tracing(setup: Any) -> None:
    """Flush and stop what :func:`start_tracing` set up (nothing when it set nothing up)."""
    if setup is not None:
        setup.shutdown()
