"""The exceptions kavalai raises.

Every error the kernel raises is a :class:`FunctionKernelException`; foreign errors (a tool's own exception,
aiohttp, the MCP SDK, pydantic) are translated into one of these at the adapter boundary and chained with
``raise ... from exc`` so the original is never lost::

    FunctionKernelException             .uri (the tool URI, when one is involved)
    ├── InvalidToolURIError             a URI that does not parse (also a ValueError)
    ├── ToolNotFoundError               no tool at that URI; .suggestions holds close matches
    ├── ToolRegistrationError           a tool or server that cannot be registered (bad function, duplicate, ...)
    │   └── ConfigurationError          a configuration that is invalid or incomplete (McpServer(...) and
    │                                   RestServer(...) themselves raise pydantic's ValidationError, as models do)
    ├── ToolAccessDeniedError           a tool outside an allow-list, or refused by an approval hook
    ├── ToolInputError                  arguments that do not fit the input model; .errors is pydantic's list
    ├── ToolOutputError                 a return value that does not fit the output model; .errors likewise
    ├── ToolExecutionError              the tool itself failed (raised, or reported an error)
    │   ├── HTTPStatusError             a REST tool answered 4xx/5xx; .status_code, .method, .body
    │   ├── JsonRpcError                an MCP server answered a JSON-RPC error; .code, .data
    │   └── ResponseTooLargeError       a response or message over a size limit; .limit
    ├── ToolTimeoutError                the call took longer than its timeout; .timeout
    │   └── DeadlineExceededError       a block run under a deadline (kavalai.kernel.deadline, Agent.run(timeout=),
    │                                   a code-mode snippet) ran out of time
    ├── ServerConnectionError           a REST or MCP server could not be reached or died; .server, .exit_code,
    │   │                               .stderr_tail
    │   ├── AuthenticationError         the server refused the credentials, or OAuth could not get a token; .identity
    │   ├── OutboundRefusedError        a URL learned from a server that the outbound gate refused; .url, .field
    │   └── KernelClosedError           the kernel was closed while the call was running
    ├── DurableRunError                 a durable run cannot go on here; .run_id
    │   ├── RunInterruptedError         its journal stayed unreachable past the run's deadline: it stays resumable
    │   ├── RunCancelledError           it was cancelled: no step runs after, an answer to it is refused
    │   ├── DefinitionChangedError      resumed under another definition than it began with; .step
    │   ├── AlreadyAnsweredError        another answer to the same question won; .key, .answer (the winner)
    │   └── OutcomeUnknownError         a step was sent and nobody knows whether it took effect; .step
    ├── LLMError                        an LLM client or agent failed (kavalai.llm.errors: configuration,
    │                                   connection, provider status, structured output, max steps)
    └── WorkflowError                   a workflow failed to build or run (kavalai.workflow.errors)

Every message names the tool URI (or the server) and says what was wrong, and passes the secret gate
(:func:`kavalai.secrets.redact`) when the error is made.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from kavalai.secrets import excerpt, holds_secret, redact

__all__ = [
    "AlreadyAnsweredError",
    "AuthenticationError",
    "ConfigurationError",
    "DeadlineExceededError",
    "DefinitionChangedError",
    "DurableRunError",
    "FunctionKernelException",
    "HTTPStatusError",
    "InvalidToolURIError",
    "JsonRpcError",
    "KernelClosedError",
    "OutboundRefusedError",
    "OutcomeUnknownError",
    "ResponseTooLargeError",
    "RunCancelledError",
    "RunInterruptedError",
    "ServerConnectionError",
    "ToolAccessDeniedError",
    "ToolExecutionError",
    "ToolInputError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolRegistrationError",
    "ToolTimeoutError",
]


def _gated(name: str) -> Any:
    """A property over ``BaseException``'s link ``name``: set as given, read through :func:`_gated_link`."""
    slot = BaseException.__dict__[name]
    return property(lambda self: _gated_link(slot.__get__(self)), slot.__set__, doc=f"{name}, secrets masked")


class FunctionKernelException(Exception):
    """Base class of every error raised by kavalai's tool kernel.

    Attributes:
        uri: the URI of the tool the error concerns, or ``None`` when no single tool is involved.
    """

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        message = redact(message)  # the secret gate: no registered secret in any message, str or repr
        super().__init__(message)
        self.message = message
        self.uri = uri

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle (multiprocessing, task queues) the message and every field, whatever the subclass's __init__ takes.
        return _restore, (type(self), self.message), self.__dict__

    # The secret gate over the chain: ``raise ... from error`` (and an error raised while another is handled) links
    # a foreign exception whose text kavalai did not make. What reads the link (``traceback.format_exception``,
    # ``logging``, a report tool) gets a masked copy of it when any exception down the chain holds a secret.
    __cause__ = _gated("__cause__")
    __context__ = _gated("__context__")


_CAUSE: Any = BaseException.__dict__["__cause__"]
_CONTEXT: Any = BaseException.__dict__["__context__"]
#: How many exceptions of a foreign chain a secret is looked for in (a chain is rarely more than a few links; an
#: exception group's members, and theirs, count too: a group of one error per host tried can be long).
_CHAIN_DEPTH = 1_024
_GROUP_SHOWN = 15  # the members of a group shown, as the traceback module's max_group_width


def _chain_holds_secret(error: BaseException | None) -> bool:
    """Whether ``error`` or any exception it links to (cause or context) holds a registered secret."""
    pending: list[BaseException | None] = [error]
    seen: set[int] = set()
    while pending and len(seen) < _CHAIN_DEPTH:
        link = pending.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        if holds_secret(_text(link)) or any(holds_secret(note) for note in _notes(link)):
            return True
        pending += [_CAUSE.__get__(link), _CONTEXT.__get__(link)]
        if isinstance(link, BaseExceptionGroup):  # the traceback module shows a group's members, and their chains
            pending += link.exceptions
    return False


def _text(error: BaseException) -> str:
    """``str(error)``, or what the traceback module shows when that fails."""
    try:
        return str(error)
    except Exception:  # a foreign __str__ may raise anything; the traceback module says the same
        return "<exception str() failed>"


def _notes(error: BaseException) -> list[str]:
    """The notes of ``error`` (``add_note``) the traceback module shows: its ``__notes__`` that are text."""
    notes = getattr(error, "__notes__", None)
    return [note for note in notes if isinstance(note, str)] if isinstance(notes, list) else []


def _gated_link(error: BaseException | None) -> BaseException | None:
    """``error`` itself, or a masked copy of it (its type named, its text masked, its own links gated in turn; a
    group's members, which the traceback module prints each with its chain, follow as masked notes)."""
    if error is None or isinstance(error, FunctionKernelException) or not _chain_holds_secret(error):
        return error
    masked = _MaskedError(f"{type(error).__module__}.{type(error).__qualname__}: {_text(error)}")
    masked.__cause__ = _CAUSE.__get__(error)
    masked.__context__ = _CONTEXT.__get__(error)
    masked.__suppress_context__ = error.__suppress_context__
    for note in _notes(error):
        masked.add_note(redact(note))
    if isinstance(error, BaseExceptionGroup):  # its members as the traceback module prints them, masked
        for number, member in enumerate(error.exceptions[:_GROUP_SHOWN], 1):
            shown = "".join(traceback.format_exception(member)).rstrip("\n")
            masked.add_note(redact(f"+---------------- {number} ----------------\n{shown}"))
        if len(error.exceptions) > _GROUP_SHOWN:
            masked.add_note(f"+---------------- ... and {len(error.exceptions) - _GROUP_SHOWN} more exceptions")
    return masked.with_traceback(error.__traceback__)


class _MaskedError(FunctionKernelException):
    """A foreign exception of a chain, shown with its registered secrets masked (see ``__cause__``)."""


def _restore(cls: type[FunctionKernelException], message: str) -> FunctionKernelException:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error


class InvalidToolURIError(FunctionKernelException, ValueError):
    """A string that is not a valid tool URI (``python://name``, ``rest://server.tool``, ``mcp://server.tool``)."""


class ToolNotFoundError(FunctionKernelException, LookupError):
    """No tool is registered at the URI.

    Attributes:
        suggestions: registered URIs close to the one asked for, best first.
    """

    def __init__(self, message: str, *, uri: str | None = None, suggestions: Sequence[str] = ()) -> None:
        super().__init__(message, uri=uri)
        self.suggestions = list(suggestions)


class ToolRegistrationError(FunctionKernelException):
    """A tool or server could not be registered: an undecorated function, a duplicate name, a bad signature."""


class ConfigurationError(ToolRegistrationError):
    """A server or tool configuration is invalid or incomplete (for example a missing credential variable)."""


class ToolAccessDeniedError(FunctionKernelException):
    """The tool may not be called here: it is outside the allowed tools, or an approval hook refused it."""


class _ValidationFailure(FunctionKernelException):
    def __init__(self, message: str, *, uri: str | None = None, errors: Sequence[Any] = ()) -> None:
        super().__init__(message, uri=uri)
        self.errors = list(errors)


class ToolInputError(_ValidationFailure, ValueError):
    """The arguments do not fit the tool's input model.

    Attributes:
        errors: pydantic's error list (``ValidationError.errors()``), one entry per problem.
    """


class ToolOutputError(_ValidationFailure):
    """The tool returned a value that does not fit its output model; it is never handed back unvalidated.

    Attributes:
        errors: pydantic's error list (``ValidationError.errors()``), one entry per problem.
    """


class ToolExecutionError(FunctionKernelException):
    """The tool itself failed: a Python tool raised, or a server reported that the call failed.

    The original exception, when there is one, is the ``__cause__``.
    """


class HTTPStatusError(ToolExecutionError):
    """A REST tool's server answered with a 4xx or 5xx status.

    Attributes:
        method: the HTTP method sent.
        status_code: the status the server answered with.
        body: a bounded excerpt of the response body.
    """

    def __init__(self, message: str, *, uri: str | None = None, method: str, status_code: int, body: str) -> None:
        super().__init__(message, uri=uri)
        self.method = method
        self.status_code = status_code
        self.body = body


class JsonRpcError(ToolExecutionError):
    """An MCP server answered a call with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code (``-32602`` invalid params, ``-32603`` internal error, ...).
        data: the error's ``data`` member, as sent (``None`` when there was none).
    """

    def __init__(self, message: str, *, uri: str | None = None, code: int, data: Any = None) -> None:
        super().__init__(message, uri=uri)
        self.code = code
        self.data = data


class ResponseTooLargeError(ToolExecutionError):
    """A server's response (or one protocol message) exceeded its size limit; it was refused while it arrived,
    never buffered whole.

    Attributes:
        limit: the limit in bytes that was exceeded (the message names the setting that raises it).
    """

    def __init__(self, message: str, *, uri: str | None = None, limit: int) -> None:
        super().__init__(message, uri=uri)
        self.limit = limit


class ToolTimeoutError(FunctionKernelException, TimeoutError):
    """The call did not finish within its timeout.

    Attributes:
        timeout: the timeout in seconds that ran out.
    """

    def __init__(self, message: str, *, uri: str | None = None, timeout: float | None = None) -> None:
        super().__init__(message, uri=uri)
        self.timeout = timeout


class DeadlineExceededError(ToolTimeoutError):
    """A block given a deadline (``with kavalai.kernel.deadline(seconds):``, ``Agent.run(timeout=)``, a code-mode
    snippet's ``max_seconds``) ran out of time; the tool calls inside it were cut at the same moment."""


class ServerConnectionError(FunctionKernelException, ConnectionError):
    """A REST or MCP server could not be reached, failed to start, or died.

    Attributes:
        server: the server's registered name.
        exit_code: for a stdio MCP server that exited, its exit code.
        stderr_tail: for a stdio MCP server, the last lines it wrote to stderr.
    """

    def __init__(
        self,
        message: str,
        *,
        uri: str | None = None,
        server: str | None = None,
        exit_code: int | None = None,
        stderr_tail: str | None = None,
    ) -> None:
        super().__init__(message, uri=uri)
        self.server = server
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class AuthenticationError(ServerConnectionError):
    """A server refused the credentials, or OAuth could not get a token for it: the sign-in was declined or timed
    out, the authorization server could not be reached or refused, or the server refused a token it had just been
    given. The message names the server and the identity, never a credential.

    Attributes:
        server: the server's registered name.
        identity: the identity the credentials were for (see :func:`kavalai.auth.identity`).
    """

    def __init__(
        self, message: str, *, uri: str | None = None, server: str | None = None, identity: str | None = None
    ) -> None:
        super().__init__(message, uri=uri, server=server)
        self.identity = identity


class OutboundRefusedError(ServerConnectionError):
    """The outbound gate (:mod:`kavalai.http`) refused a URL a server gave (OAuth metadata, a challenge, a redirect)
    before anything was sent to it: a link-local, metadata, private or loopback address the user did not allow, or a
    scheme other than http(s).

    Attributes:
        server: the server whose requests it was (its registered name).
        url: the URL (or host) refused.
        field: where the URL came from (``"token_endpoint of the metadata at http://..."``).
    """

    def __init__(self, message: str, *, server: str | None = None, url: str = "", field: str = "") -> None:
        super().__init__(message, server=server)
        self.url = url
        self.field = field


class KernelClosedError(ServerConnectionError):
    """The kernel was closed while the call was running: every call in flight fails with this on ``close()``."""


class DurableRunError(FunctionKernelException):
    """A durable run cannot go on in this attempt (see ``docs/durable.md``, the step journal).

    Attributes:
        run_id: the run's id.
    """

    def __init__(self, message: str, *, run_id: str, uri: str | None = None) -> None:
        super().__init__(message, uri=uri)
        self.run_id = run_id


class RunInterruptedError(DurableRunError):
    """The run's journal could not be written (the database went away) for longer than the run may wait: the run
    stopped before its next step and stays resumable: run it again under the same id once the database is back."""


class RunCancelledError(DurableRunError):
    """The run was cancelled: no step begins after the cancel, a resume does not revive it, an answer is refused."""


class DefinitionChangedError(DurableRunError):
    """The run was begun under another definition (its recorded fingerprint differs): resuming it here is refused,
    so that no step is handed another step's record. It stays resumable where the old definition runs.

    Attributes:
        step: the first step (node) that differs.
    """

    def __init__(self, message: str, *, run_id: str, step: str) -> None:
        super().__init__(message, run_id=run_id)
        self.step = step


class AlreadyAnsweredError(DurableRunError):
    """The question was answered already (two answers raced, or it was answered before): this answer lost, and the
    run takes the one that won.

    Attributes:
        key: the question's key.
        answer: the answer that won.
    """

    def __init__(self, message: str, *, run_id: str, key: str, answer: Any) -> None:
        super().__init__(message, run_id=run_id)
        self.key = key
        self.answer = answer


class OutcomeUnknownError(DurableRunError):
    """A step was sent and its outcome is unknown (its worker died, or the journal went away, before the result was
    recorded), and repeating it is not known to be safe: check before retrying.

    Attributes:
        step: the step's name in the journal.
    """

    def __init__(self, message: str, *, run_id: str, step: str, uri: str | None = None) -> None:
        super().__init__(message, run_id=run_id, uri=uri)
        self.step = step


_MAX_SHOWN = 5


def format_validation_errors(errors: Sequence[Mapping[str, Any]], *, root: str = "(arguments)") -> str:
    """One line per pydantic error, as ``field.path: message (got value)``, at most five shown.

    Args:
        errors: pydantic's error list.
        root: the label of an error about the whole value rather than one field.
    """
    parts = []
    for error in errors[:_MAX_SHOWN]:
        loc = ".".join(str(part) for part in error.get("loc", ())) or root
        message = str(error.get("msg", "invalid"))
        if error.get("type") == "extra_forbidden":
            message = "unexpected argument, not accepted here"
        elif error.get("type") != "missing" and "input" in error:
            message = f"{message} (got {value_excerpt(error['input'])})"
        parts.append(f"{loc}: {message}")
    if len(errors) > _MAX_SHOWN:
        parts.append(f"... and {len(errors) - _MAX_SHOWN} more")
    return "; ".join(parts)


def value_excerpt(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, safe for values whose ``__repr__`` fails; masked before it is
    cut (the secret gate's :func:`~kavalai.secrets.excerpt`: a cut through a secret would leave its beginning)."""
    try:
        text = repr(value)
    except Exception:  # a value whose __repr__ fails must not hide the error being reported
        text = f"<{type(value).__name__} object>"
    return excerpt(text, limit, marker="...")
