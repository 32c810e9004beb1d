"""The one place aiohttp's exceptions become kavalai errors for REST calls.

A table, in the manner of httpx's ``map_httpcore_exceptions``: the first row whose exception type matches decides
the kavalai error. An HTTP error status is not an exception here; :func:`status_error` turns it into an
:class:`~kavalai.errors.HTTPStatusError` that keeps the status and a bounded, redacted excerpt of the body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import aiohttp

from kavalai.adapters.rest._config import ResolvedServer
from kavalai.errors import (
    FunctionKernelException,
    HTTPStatusError,
    OutboundRefusedError,
    ServerConnectionError,
    ToolExecutionError,
    ToolTimeoutError,
)
from kavalai.http import HopRefusedError
from kavalai.secrets import excerpt, mask_edges

__all__ = ["BODY_EXCERPT_CHARS", "Failure", "map_exception", "status_error"]

#: How much of an error response's body an HTTPStatusError keeps.
BODY_EXCERPT_CHARS: Final = 1000
_EXCERPT_BYTES: Final = 4 * BODY_EXCERPT_CHARS


@dataclass(frozen=True, slots=True)
class Failure:
    """What is known of a failed request when its error is built."""

    server: ResolvedServer
    method: str
    path: str
    where: str
    uri: str | None

    def describe(self, exc: BaseException) -> str:
        """``Type: text`` of a foreign exception, with the server's secrets masked."""
        text = str(exc)
        return self.server.redact(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _timeout(f: Failure, exc: BaseException) -> FunctionKernelException:
    return ToolTimeoutError(f"{f.where}: {f.method} {f.path} timed out waiting for {f.server.name!r}.", uri=f.uri)


def _certificate(f: Failure, exc: BaseException) -> FunctionKernelException:
    return ServerConnectionError(
        f"{f.where}: the TLS certificate of REST server {f.server.name!r} at {f.server.base_url} could not be "
        f"verified ({f.describe(exc)}). For a private CA give verify='<CA bundle path>'; verify=False turns "
        "verification off.",
        uri=f.uri,
        server=f.server.name,
    )


def _unreachable(f: Failure, exc: BaseException) -> FunctionKernelException:
    return ServerConnectionError(
        f"{f.where}: cannot reach REST server {f.server.name!r} at {f.server.base_url} ({f.describe(exc)}). "
        "Is it running, and is its url right?",
        uri=f.uri,
        server=f.server.name,
    )


def _refused(f: Failure, exc: BaseException) -> FunctionKernelException:
    return OutboundRefusedError(f"{f.where}: {f.server.redact(str(exc))}", server=f.server.name, field="a redirect")


def _failed(f: Failure, exc: BaseException) -> FunctionKernelException:
    return ToolExecutionError(f"{f.where}: {f.method} {f.path} failed: {f.describe(exc)}", uri=f.uri)


# Order matters: the first matching row wins, so subclasses come before their bases.
_TABLE: Final[tuple[tuple[type[BaseException], Callable[[Failure, BaseException], FunctionKernelException]], ...]] = (
    (HopRefusedError, _refused),
    (TimeoutError, _timeout),
    (aiohttp.ClientConnectorCertificateError, _certificate),
    (aiohttp.ClientConnectionError, _unreachable),
    (aiohttp.ClientError, _failed),
    (ValueError, _failed),
)


def map_exception(failure: Failure, exc: BaseException) -> FunctionKernelException | None:
    """The kavalai error for ``exc``, or ``None`` when it is not one this table maps (let it propagate)."""
    for kind, build in _TABLE:
        if isinstance(exc, kind):
            return build(failure, exc)
    return None


async def status_error(failure: Failure, response: aiohttp.ClientResponse) -> HTTPStatusError:
    """The error for a 4xx/5xx answer: the status, the reason and a redacted excerpt of at most
    :data:`BODY_EXCERPT_CHARS` characters of the body (only that much is read)."""
    try:
        raw = await response.content.read(_EXCERPT_BYTES)
    except aiohttp.ClientError:
        raw = b""
    try:
        text = raw.decode(response.charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name in the header
        text = raw.decode("utf-8", errors="replace")
    if not response.content.at_eof():  # the read may have cut through a secret: its beginning masked too
        text = mask_edges(text, failure.server.redactor)
    body = excerpt(text, BODY_EXCERPT_CHARS + 3, marker="...", also=failure.server.redactor)
    reason = f" {response.reason}" if response.reason else ""
    shown = f": {body}" if body else ""
    return HTTPStatusError(
        f"{failure.where}: {failure.method} {failure.path} answered {response.status}{reason}{shown}",
        uri=failure.uri,
        method=failure.method,
        status_code=response.status,
        body=body,
    )
