"""The one way ``kavalai serve`` words an error of its own: a JSON-RPC error for its host (:func:`protocol_error`)
or a refusal of a backend's request (:func:`refusal`), each message through the secret gate
(:func:`kavalai.secrets.redact`), so a URI, a server's message or an exception's text carrying a configured secret
reaches neither side. ``tests/serve/test_errors.py`` finds every error the package builds and fails when one is
built elsewhere.
"""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from kavalai.secrets import redact

__all__ = ["protocol_error", "refusal"]


def protocol_error(code: int, message: str) -> MCPError:
    """The JSON-RPC error ``code`` the host is answered with, its message redacted."""
    return MCPError(code, redact(message))


def refusal(message: str) -> types.ErrorData:
    """A backend's request refused (sampling, elicitation, roots), the reason redacted."""
    return types.ErrorData(code=types.INVALID_REQUEST, message=redact(message))
