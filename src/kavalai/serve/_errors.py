"""The one way ``kavalai serve`` words an error: a JSON-RPC error for its host (:func:`protocol_error`), a tool's
failed result (:func:`tool_error_result`), a refusal of a backend's request (:func:`refusal`), and the JSON-RPC error
of any exception escaping a handler given to the SDK's server (:func:`redacting`), each message through the secret
gate (:func:`kavalai.secrets.redact`), so a URI, a server's message or an exception's text carrying a configured
secret reaches neither side. ``tests/serve/test_errors.py`` finds every error the package builds and fails when one
is built elsewhere; ``tests/test_secret_gate.py`` every failed tool result.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from kavalai.errors import FunctionKernelException
from kavalai.secrets import get_logger, holds_secret, redact

__all__ = ["protocol_error", "redacting", "refusal", "tool_error_result"]

logger = get_logger("kavalai.serve")


def protocol_error(code: int, message: str, data: Any = None) -> MCPError:
    """The JSON-RPC error ``code`` the host is answered with, its message redacted (``data`` dropped when it holds a
    secret)."""
    if data is not None and holds_secret(json.dumps(data, default=str)):
        data = None
    return MCPError(code, redact(message), data)


def tool_error_result(message: str) -> types.CallToolResult:
    """A failed result: ``isError`` and the error message as text, through the secret gate."""
    return types.CallToolResult(content=[types.TextContent(text=redact(message))], is_error=True)


def redacting(handlers: dict[str, Any]) -> dict[str, Any]:
    """Every handler given to the SDK's server, wrapped so that an exception escaping it passes the secret gate
    before the SDK turns it into the JSON-RPC error a host reads (the one crossing for handler failures): a protocol
    error and kavalai's own errors keep their words, masked; any other exception is a fixed message naming its type
    (its text, which may be private to the handler, is logged, masked)."""
    return {name: _redacted(handler) if callable(handler) else handler for name, handler in handlers.items()}


def _redacted(handler: Any) -> Any:
    @functools.wraps(handler)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(*args, **kwargs)
        except MCPError as exc:
            raise protocol_error(exc.code, exc.message, exc.data) from None
        except ValidationError:
            raise  # the SDK answers it with a fixed message
        except FunctionKernelException as exc:  # worded for users (a backend's own message in it, masked)
            raise protocol_error(types.INTERNAL_ERROR, str(exc) or type(exc).__name__) from None
        except Exception as exc:  # a handler's own failure: its text stays in the log, the host reads a fixed one
            logger.warning("%s failed: %s: %s", getattr(handler, "__name__", "a handler"), type(exc).__name__, exc)
            fixed = f"kavalai serve failed internally ({type(exc).__name__})"
            raise protocol_error(types.INTERNAL_ERROR, fixed) from None

    return guarded


def refusal(message: str) -> types.ErrorData:
    """A backend's request refused (sampling, elicitation, roots), the reason redacted."""
    return types.ErrorData(code=types.INVALID_REQUEST, message=redact(message))
