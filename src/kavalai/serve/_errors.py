"""The one way ``kavalai serve`` words an error: a JSON-RPC error for its host (:func:`protocol_error`), a tool's
failed result (:func:`tool_error_result`), a refusal of a backend's request (:func:`refusal`), and the JSON-RPC error
of any exception escaping a request (:func:`redacting`, the server middleware :func:`gated` puts innermost on the
SDK's server, so every handler, the SDK's own included, is inside it), each message through the secret gate
(:func:`kavalai.secrets.redact`), so a URI, a server's message or an exception's text carrying a configured secret
reaches neither side. Every message the gateway sends a host of its own accord (a notification: a backend's log
message, progress, a change; a request relayed from a backend: sampling, elicitation, roots) crosses
:func:`for_host`, masked the same way. ``tests/serve/test_errors.py`` finds every error the package builds and
fails when one is built elsewhere, and every send to a host without :func:`for_host`; ``tests/test_secret_gate.py``
every failed tool result and every ``Server`` built without :func:`gated`. The same two crossings make what a host is
sent well formed (:func:`well_formed_result`, :func:`for_host`): a lone surrogate, which pydantic's JSON refuses, is
written as the text of its escape.
"""

from __future__ import annotations

import json
from typing import Any, Final, TypeVar

import mcp_types as types
import pydantic_core
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from kavalai._utf8 import utf8_safe
from kavalai.errors import FunctionKernelException, JsonRpcError
from kavalai.secrets import excerpt, get_logger, holds_secret, redact, redact_data

__all__ = [
    "for_host",
    "gated",
    "missing_capability_of",
    "protocol_error",
    "redacting",
    "refusal",
    "server_error",
    "tool_error_result",
    "well_formed",
    "well_formed_result",
]

S = TypeVar("S", bound=Server[Any])
M = TypeVar("M", bound=BaseModel)

logger = get_logger("kavalai.serve")


#: The longest message of a JSON-RPC error the gateway sends: a host's own value echoed in one (a 1 MB tool name
#: in "Unknown tool: ...") was sent back whole.
MAX_ERROR_MESSAGE: Final = 2_000


def protocol_error(code: int, message: str, data: Any = None) -> MCPError:
    """The JSON-RPC error ``code`` the host is answered with, its message masked, then cut to
    :data:`MAX_ERROR_MESSAGE` (``data`` dropped when it holds a secret)."""
    if data is not None and holds_secret(json.dumps(data, default=str)):
        data = None
    return MCPError(code, excerpt(message, MAX_ERROR_MESSAGE, marker="..."), data)


def missing_capability_of(exc: BaseException) -> MCPError | None:
    """A backend's -32021 (``MissingRequiredClientCapabilityError``: the request needs a client capability the host
    did not declare) as the same JSON-RPC error for the host, its ``data`` (``requiredCapabilities``) kept; ``None``
    for any other failure. It is the host's to act on (declare the capability and retry), so it is relayed as itself,
    not made a tool's error result or an internal error."""
    if isinstance(exc, JsonRpcError) and exc.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return protocol_error(exc.code, str(exc), exc.data)
    return None


def server_error(exc: FunctionKernelException) -> MCPError:
    """The JSON-RPC error a backend's failure of a request other than a tool call (a prompt, a read, a completion)
    reaches the host as: -32021 as itself (:func:`missing_capability_of`), anything else an internal error saying
    what failed."""
    return missing_capability_of(exc) or protocol_error(types.INTERNAL_ERROR, str(exc))


def for_host(message: M) -> M:
    """``message`` (a notification or a request the gateway sends a host) with every registered secret masked in
    every text it carries (a backend's log data and logger name, a progress message, a sampling request's messages
    and system prompt, an elicitation's message); ``message`` itself when it holds none."""
    dumped = message.model_dump(by_alias=True, exclude_unset=True)
    masked = utf8_safe(redact_data(dumped))  # and well formed: a lone surrogate written as its escape's text
    return message if masked is dumped else type(message).model_validate(masked)


def tool_error_result(message: str) -> types.CallToolResult:
    """A failed result: ``isError`` and the error message as text, through the secret gate."""
    return types.CallToolResult(content=[types.TextContent(text=redact(message))], is_error=True)


def gated(server: S) -> S:
    """``server`` with :func:`redacting` as its innermost middleware: the one crossing of every request's failure
    (the SDK composes ``Server.middleware`` around every request and notification, whatever handler serves it, so no
    handler registered now or later is outside it; innermost, so the tracing middleware (serve/_traced.py) records the
    masked error, not the raw one)."""
    server.middleware.append(redacting)
    return server


async def redacting(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Pass an exception escaping the request through the secret gate before the SDK turns it into the JSON-RPC error
    a host reads: a protocol error and kavalai's own errors keep their words, masked; a params validation error is
    left to the SDK (it answers with a fixed message); any other exception is a fixed message naming its type (its
    text, which may be private to the handler, is logged, masked)."""
    try:
        result = await call_next(ctx)
    except MCPError as exc:
        raise protocol_error(exc.code, exc.message, exc.data) from None
    except ValidationError:
        raise  # the SDK answers it with a fixed message
    except FunctionKernelException as exc:  # worded for users (a backend's own message in it, masked)
        raise protocol_error(types.INTERNAL_ERROR, str(exc) or type(exc).__name__) from None
    except Exception as exc:  # a handler's own failure: its text stays in the log, the host reads a fixed one
        logger.warning("%s failed: %s: %s", ctx.method, type(exc).__name__, exc)
        fixed = f"kavalai serve failed internally ({type(exc).__name__})"
        raise protocol_error(types.INTERNAL_ERROR, fixed) from None
    return well_formed_result(result)


def well_formed_result(result: HandlerResult) -> HandlerResult:
    """A request's ``result`` (the wire form the SDK sends as it is) with every lone surrogate of its texts (a file
    name that is not UTF-8 in a tool's result, a backend's ``"\\udcff"``), which pydantic's JSON refuses (the host
    was sent nothing over HTTP, an error of code 0 over stdio), written as the text of its escape
    (:func:`kavalai._utf8.utf8_safe`); ``result`` itself when it holds none (one serialization, in pydantic's core)."""
    if isinstance(result, BaseModel):
        return well_formed(result)
    if isinstance(result, dict):
        try:
            pydantic_core.to_json(result)
        except PydanticSerializationError:
            safe: dict[str, Any] = utf8_safe(result, scanned=json.dumps(result, ensure_ascii=False, default=str))
            return safe
    return result


def well_formed(message: M) -> M:
    """``message`` as a host can be sent it: a lone surrogate in any of its texts (a file name that is not UTF-8 in
    a tool's result, a backend's ``"\\udcff"``), which pydantic's JSON refuses (the host was sent nothing over
    HTTP, an error of code 0 over stdio), written as the text of its escape (:func:`kavalai._utf8.utf8_safe`)."""
    try:
        message.model_dump_json(by_alias=True, exclude_unset=True)  # what the transport will write
    except PydanticSerializationError:
        dumped = message.model_dump(by_alias=True, exclude_unset=True)
        safe = utf8_safe(dumped)
        if safe is dumped:  # not a lone surrogate: the transport's own error, as before
            raise
        return type(message).model_validate(safe)
    return message


def refusal(message: str) -> types.ErrorData:
    """A backend's request refused (sampling, elicitation, roots), the reason redacted."""
    return types.ErrorData(code=types.INVALID_REQUEST, message=redact(message))
