"""Connecting to a Temporal server: the runtime every client of this package uses (Core's log lines to a Python
logger, never stdout), the one-line error of a server that cannot be reached, and the run's patience with a server
that went away (:func:`patiently`)."""

from __future__ import annotations

import asyncio
import gc
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, RPCStatusCode

from kavalai.durable._journal_io import interrupted_error
from kavalai.errors import ServerConnectionError
from kavalai.secrets import get_logger

__all__ = ["NO_WORKER", "check_namespace", "core_runtime", "patiently", "unreachable"]

T = TypeVar("T")

logger = get_logger("kavalai.durable")

_FIRST_PAUSE: Final = 0.1
_LONGEST_PAUSE: Final = 2.0

_runtime: Runtime | None = None


def core_runtime() -> Runtime:
    """The Temporal runtime of the clients this module connects: Temporal's own defaults (Core warnings and up),
    except that Core's log lines go to the Python logger ``kavalai.durable.temporal_core`` instead of the console.
    Core writes its console lines to stdout, where they would mix with a command's output (``kavalai run`` prints
    its JSON result there); a logger goes where the application sends its logs (stderr for the CLI). One per
    process, made on first use, like Temporal's default runtime."""
    global _runtime
    if _runtime is None:
        forwarding = LogForwardingConfig(logger=get_logger("kavalai.durable.temporal_core"))
        core_logs = LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding)
        _runtime = Runtime(telemetry=TelemetryConfig(logging=core_logs))
    return _runtime


def unreachable(address: str, exc: Exception) -> ServerConnectionError:
    """The error of a failed connect, with what the failure held let go now: the frames of a failed
    ``Client.connect`` hold objects of Temporal's Rust bridge, and collected only as the interpreter finalizes they
    call into it from their threads (``Fatal Python error: PyGILState_Release``, or a segfault, in 1 run in 3)."""
    reason = str(exc).split("\n")[0]
    traceback.clear_frames(exc.__traceback__)
    exc.__traceback__ = None
    del exc
    gc.collect()
    return ServerConnectionError(
        f"cannot reach the Temporal server at {address} ({reason}): start it, or give its --address",
        server=f"temporal {address}",
    )


#: The statuses of a call that failed because the server is away for now (stopped, restarting), not because of it.
_AWAY: Final = frozenset({RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED})

#: The statuses of a call that a run's worker must answer (a query, an update) and that no worker did: the server
#: is away, or no worker polls the task queue (``FAILED_PRECONDITION``: "no poller seen for task queue recently"),
#: or the worker it was handed to died with it (``CANCELLED``: "context canceled").
NO_WORKER: Final = _AWAY | frozenset({RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.CANCELLED})


async def patiently(
    run_id: str,
    what: str,
    address: str,
    outage: float,
    call: Callable[[], Awaitable[T]],
    *,
    statuses: frozenset[RPCStatusCode] = _AWAY,
    also: tuple[type[Exception], ...] = (),
    gone: Callable[[int, str], Exception] | None = None,
) -> T:
    """``await call()``, made again with a growing pause while the Temporal server at ``address`` is away (a
    failure of one of ``statuses``), for at most ``outage`` seconds from the first failure (the client's own
    retries come first): the run's patience, as :func:`~kavalai.durable._journal_io.journal_io` is a DBOS run's.
    A failure of one of the types ``also`` counts as one of ``statuses``. Only a call that may be made twice is
    given (a read, or a write the server takes once by its id).

    Raises:
        RunInterruptedError: the server did not come back in time; the run stays in the server, resumable.
        Exception: what ``gone(attempts, the last failure's message)`` makes, instead, when given.
    """
    give_up: float | None = None
    pause, attempts = _FIRST_PAUSE, 0
    retried: tuple[type[Exception], ...] = (RPCError, *also)
    while True:
        attempts += 1
        try:
            return await call()
        except retried as exc:
            if isinstance(exc, RPCError) and exc.status not in statuses:
                raise
            failure = f"RPCError: {exc.message}" if isinstance(exc, RPCError) else f"{type(exc).__name__}: {exc}"
            now = time.monotonic()
            give_up = now + outage if give_up is None else give_up
            if now >= give_up and gone is not None:
                raise gone(attempts, failure) from None
            if now >= give_up:
                why = f"(the Temporal server at {address}) after {attempts} attempts ({failure})"
                raise interrupted_error(run_id, what, why) from None
            logger.warning("Run %s: could not %s (%s); trying again in %.2f s", run_id, what, failure, pause)
            await asyncio.sleep(min(pause, give_up - now))
            pause = min(pause * 2, _LONGEST_PAUSE)


async def check_namespace(client: Client, address: str) -> None:
    """Refuse a namespace the server does not have, once, when connecting: every later call would fail ``NOT_FOUND``,
    which reads as "no such run".

    Raises:
        ServerConnectionError: the server has no namespace ``client.namespace`` (one line: create it, or name another).
    """
    try:
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        raise ServerConnectionError(
            f"the Temporal server at {address} has no namespace {client.namespace!r}: create it (temporal operator "
            f"namespace create --namespace {client.namespace}), or give another --namespace",
            server=f"temporal {address}",
        ) from None
