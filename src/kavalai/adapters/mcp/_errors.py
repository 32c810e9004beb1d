"""Foreign failures of an MCP connection (OS, HTTP, the SDK) told as one :class:`ServerConnectionError`."""

from __future__ import annotations

import re
import signal
from typing import Final

import httpx2
from mcp.shared.exceptions import MCPError

from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._stdio import StdioProcess
from kavalai.errors import JsonRpcError, OutboundRefusedError, ServerConnectionError
from kavalai.secrets import Redactor, excerpt

__all__ = ["answer_unreadable", "call_error", "describe_failure", "request_error", "root_cause", "scrub"]

_MAX_DETAIL: Final = 500


def describe_failure(
    config: McpServer,
    exc: BaseException | None,
    *,
    phase: str,
    process: StdioProcess | None = None,
    timed_out: bool = False,
    expired: bool = False,
    challenge: str | None = None,
) -> ServerConnectionError:
    """The error for MCP server ``config`` failing ``phase`` ("while connecting", "during a call to ..."), naming the
    server, what it is, and why: how a stdio server exited (if it did by itself) and its stderr tail, an HTTP
    server's 401 challenge (``WWW-Authenticate``) and the fix, else the cause."""
    refused = root_cause(exc) if exc is not None else None
    if isinstance(refused, OutboundRefusedError):
        return refused  # the outbound gate's refusal names the server, the URL and the field it came from
    exit_code = process.exit_code if process is not None else None
    stderr_tail = process.stderr_tail(scrubber(config)) or None if process is not None else None
    if process is not None and process.protocol_error:
        why = f"{process.protocol_error} {phase}; it was stopped"
        exit_code = None
    elif timed_out:
        why = f"did not finish connecting within {config.connect_timeout:g} s (connect_timeout)"
    elif exit_code is not None:
        why = f"{_exit(exit_code)} {phase}"
    elif challenge is not None:
        why = f"answered {phase} with {_unauthorized(config, challenge)}"
    elif expired:
        why = f"no longer knew the session (HTTP 404) {phase}; the next use starts a new one"
    elif exc is not None:
        why = f"failed {phase}: {_reason(config, root_cause(exc))}"
    else:
        why = f"closed the connection {phase}"
    message = f"MCP server {config.name!r} ({config.kind}: {scrub(config, config.target)}) {why}."
    if stderr_tail:
        message = f"{message} Last lines on its stderr:\n{stderr_tail}"
    elif exit_code is not None:
        message = f"{message} It wrote nothing to stderr."
    if process is not None and process.stdout_noise:
        noise = "\n".join(scrub(config, line) for line in process.stdout_noise)
        message = (
            f"{message}\nIt wrote lines that are not JSON-RPC to stdout, where an MCP server may write only protocol "
            f"messages (send logs to stderr):\n{noise}"
        )
    return ServerConnectionError(message, server=config.name, exit_code=exit_code, stderr_tail=stderr_tail)


_RESOURCE_METADATA: Final = re.compile(r'resource_metadata="?([^",\s]+)')


def _unauthorized(config: McpServer, challenge: str) -> str:
    """An HTTP 401: the challenge the server sent (its resource metadata URL, RFC 9728), and what to do."""
    shown = scrub(config, challenge)[:_MAX_DETAIL] if challenge else "none"
    found = _RESOURCE_METADATA.search(challenge)
    metadata = f"; its resource metadata: {found.group(1)}" if found else ""
    said = f"HTTP 401 Unauthorized (WWW-Authenticate: {shown}{metadata})"
    if any(header.lower() == "authorization" for header in config.headers):
        return f"{said}: the Authorization header given was refused"
    return f"{said}. It is protected: give the McpServer auth=OAuth(...) (from kavalai.auth) to sign in"


def _exit(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name} (exit code {code})"


def root_cause(exc: BaseException) -> BaseException:
    """The first real failure inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(config: McpServer, exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError | PermissionError) and config.command is not None:
        if config.cwd is not None and str(exc.filename) == str(config.cwd):
            return f"cannot start it in {str(config.cwd)!r} (cwd): {exc.strerror or exc}"
        bare = isinstance(exc, FileNotFoundError) and "/" not in config.command
        hint = " (is it installed, and on the PATH?)" if bare else ""
        return f"cannot start {config.command!r}: {exc.strerror or exc}{hint}"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the server answered HTTP {exc.response.status_code} {exc.response.reason_phrase}"
    if isinstance(exc, httpx2.TransportError):
        return f"cannot reach it ({type(exc).__name__}: {scrub(config, str(exc)) or 'no detail'})"
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {scrub(config, exc.message)}"
    detail = excerpt(str(exc), _MAX_DETAIL, marker="...", also=scrubber(config))
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def scrub(config: McpServer, text: object) -> str:
    """``text`` with every secret of ``config`` (env and header values, the url's credentials) masked."""
    return scrubber(config).redact(text)


def scrubber(config: McpServer) -> Redactor:
    """The masker of every secret of ``config``: its env and header values, the url's credentials."""
    secrets = [*config.env.values(), *config.headers.values()]
    if config.url is not None and config.url != config.target:
        secrets.append(config.url)
    # Values under four characters are env flags such as "1", not secrets worth making every message unreadable.
    return Redactor(secrets, min_length=4)


# JSON-RPC error codes and what they mean for a tool call; the one place MCP errors of a call are translated.
_CALL_ERRORS: dict[int, str] = {
    -32700: "the server could not parse the request",
    # A client's well-formed tools/call is seldom invalid: a -32600 answer is most often a refusal the server passed
    # on (of its own sampling, elicitation or roots request, which clients refuse with -32600) or a policy of its own.
    -32600: "the server refused the call, or passed on a refusal of a request it made",
    -32601: "the server does not offer tools/call",
    -32602: "the server refused the arguments",
    -32603: "the server failed internally",
    -32001: "the server gave up on the request (timeout)",
}


def call_error(config: McpServer, uri: str, exc: MCPError) -> JsonRpcError:
    """The error for a JSON-RPC error answer to a call of ``uri``, keeping its ``code`` and ``data``."""
    if answer_unreadable(exc):  # made by the SDK on this side: the server's answer could not be read
        message = f"Tool {uri} failed: its answer from MCP server {config.name!r} could not be read: "
        message += scrub(config, exc.message)
        if "byte limit" in exc.message:  # the SDK's own wording for an event over max_sse_event_size
            message += " (max_message_bytes of the McpServer; raise it if such messages are expected)"
        return JsonRpcError(message, uri=uri, code=exc.code, data=exc.data)
    kind = getattr(exc, "kind", None)  # the era module's InputRefused: refused here, not by the server
    if kind is not None:
        message = f"Tool {uri} failed: it asked for input ({kind}), which was refused: {scrub(config, exc.message)}"
        return JsonRpcError(message, uri=uri, code=exc.code, data=exc.data)
    meaning = _CALL_ERRORS.get(exc.code, "the server answered an error")
    message = f"Tool {uri} failed: the server answered error {exc.code}: {scrub(config, exc.message)} ({meaning})"
    return JsonRpcError(message, uri=uri, code=exc.code, data=exc.data)


def request_error(config: McpServer, what: str, exc: MCPError) -> JsonRpcError:
    """The error for a JSON-RPC error answer to a request other than a tool call (``what`` names it)."""
    meaning = "the server does not offer it" if exc.code == -32601 else _CALL_ERRORS.get(exc.code, "an error")
    message = (
        f"MCP server {config.name!r}: {what} failed with error {exc.code}: {scrub(config, exc.message)} ({meaning})"
    )
    return JsonRpcError(message, code=exc.code, data=exc.data)


# The messages of the errors the SDK's HTTP transports make up for a request whose answer they could not read (too
# large, malformed, its event stream broken): the request failed, the session did not.
_UNREADABLE: Final = ("Failed to parse JSON response", "Failed to parse SSE message", "SSE stream failed")


def answer_unreadable(exc: MCPError) -> bool:
    """Whether ``exc`` is the SDK's stand-in for an answer that could not be read (not the server's own error)."""
    return exc.message.startswith(_UNREADABLE)
