"""The secret gate: masking secret values in everything that leaves the process.

Every value from a secret source is registered with the process's one registry (:func:`register_secret`): each
``${VAR}`` expansion of a configuration of a variable that is secret (:func:`secret_variable`: by its name, or
listed in ``KAVALAI_SECRET_VARIABLES``), the value of a secret variable passed in Python to ``McpServer`` or
``RestServer`` (:func:`register_environment_values`), ``*_env`` credentials, OAuth tokens and client
secrets, the password of URL userinfo (:func:`register_url_credentials`). Everything that leaves the process passes
:func:`redact`:

- exception messages and reprs: :class:`~kavalai.errors.FunctionKernelException` masks its message when made;
- log records: every kavalai logger is made by :func:`get_logger`, whose filter masks the message, its arguments and
  the formatted traceback; once a secret is registered the same filter runs in the process's log record factory (and
  in any factory set later, wrapped as it is set) and on every logger and handler, so the records of the
  dependencies' loggers (``mcp.client.auth.oauth2``, ``httpx2``, ``aiohttp``, ``dbos``, ``temporalio``) are masked
  whatever handler shows them and whatever factory made them;
- an uncaught exception printed by the interpreter (``sys.excepthook``, ``threading.excepthook``: chained once a
  secret is registered);
- the CLI's stderr, span attributes (:func:`kavalai.tracing.span`) and the JSON-RPC errors ``kavalai serve`` sends;
- what ``kavalai serve`` relays to a host from its backends (log messages, progress, sampling and elicitation
  requests): every message crosses :func:`redact_data` (``kavalai.serve._errors.for_host``).

Values shorter than :data:`MIN_SECRET_LENGTH` are not registered: a port or a flag (``8080``, ``1``) is not a
secret, and masking it everywhere would make messages unreadable rather than safer.

A secret is masked in the forms it is written in as well as by value (:func:`encoded_forms`): URL-percent-encoded,
base64 (standard and URL-safe, alone or inside a longer encoded text such as a Basic ``Authorization`` header's
``user:secret``) and JSON-escaped. Each form is registered with the secret, when it differs from it and has at
least :data:`MIN_FORM_LENGTH` characters (a short form could be a common word).

A :class:`Redactor` masks a fixed set (one origin's secrets); a foreign exception whose text holds one is dropped
rather than kept as a ``__cause__`` (:meth:`Redactor.holds`).

A text is cut to a bound only after it is masked (:func:`excerpt`): a cut through a secret leaves a piece the mask no
longer recognises. A window cut from a stream before it could be masked (the tail of a server's stderr) has a
secret's piece at either end masked too (:func:`mask_edges`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final, TextIO, TypeVar
from urllib.parse import quote, quote_plus, unquote, urlsplit

__all__ = [
    "MASK",
    "MIN_FORM_LENGTH",
    "MIN_SECRET_LENGTH",
    "PUBLIC_VARIABLES_ENV",
    "SECRET_VARIABLES_ENV",
    "Redactor",
    "encoded_forms",
    "excerpt",
    "get_logger",
    "holds_secret",
    "log_lines_to",
    "looks_secret",
    "mask_edges",
    "redact",
    "redact_data",
    "redacting_stderr",
    "register_environment_values",
    "register_secret",
    "register_url_credentials",
    "register_variable",
    "secret_variable",
]

T = TypeVar("T")

#: What a secret value is replaced by.
MASK: Final = "***"
#: The shortest value the registry keeps.
MIN_SECRET_LENGTH: Final = 6
#: The shortest encoded form of a secret that is masked too (:func:`encoded_forms`).
MIN_FORM_LENGTH: Final = 8
#: At most this many values are kept (the oldest go first: expired tokens of a long-lived process).
_MAX_SECRETS: Final = 16_384  # with their encoded forms (about ten a secret)


_PERCENT_ESCAPE: Final = re.compile(r"%[0-9A-F]{2}")


def encoded_forms(secret: str) -> set[str]:
    """The forms ``secret`` may be written in besides itself, each masked with it: URL-percent-encoded (as a path
    segment or a query value, with upper- or lower-case escapes), base64 of it alone (standard and URL-safe, with
    and without padding), the part of a longer base64 text that only its bytes decide, at each of the three places
    it may start in a 3-byte group (``base64("user:" + secret)``, a Basic ``Authorization`` header's value), and
    JSON-escaped (with and without ``ensure_ascii``). Only forms that differ from ``secret`` and have at least
    :data:`MIN_FORM_LENGTH` characters."""
    try:  # a value read from the environment holds the bytes it could not decode as surrogates: those bytes
        raw = secret.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate of another kind: as Python would write it
        raw = secret.encode("utf-8", "surrogatepass")
    forms = {quote(raw, safe=""), quote_plus(raw), json.dumps(secret)[1:-1]}
    forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    forms.update(_PERCENT_ESCAPE.sub(lambda escape: escape.group().lower(), form) for form in list(forms))
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        forms.update((whole, whole.rstrip("=")))
        for offset in range(3):
            # The secret starts ``offset`` bytes into a 3-byte group: the characters of the groups it fills alone,
            # and of the one it starts in from its first whole 6 bits on (2 characters of it at offset 1, 1 at 2).
            encoded = encode(b"\0" * offset + raw).decode("ascii")
            start = (0, 2, 3)[offset]
            end = (offset + len(raw)) // 3 * 4
            forms.add(encoded[start:end])
    forms.discard(secret)
    return {form for form in forms if len(form) >= MIN_FORM_LENGTH}


class Redactor:
    """Masks a fixed set of secret values.

    Args:
        secrets: the secret strings; empty ones are ignored.
        min_length: values shorter than this are not masked (an MCP server's env holds flags such as ``"1"``,
            and masking every ``1`` would make messages unreadable rather than safer).
    """

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str], *, min_length: int = 1) -> None:
        kept = {secret for secret in secrets if secret and len(secret) >= min_length}
        kept.update(form for secret in list(kept) for form in encoded_forms(secret))
        # Longest first: a secret that contains another is masked whole, not leaving its tail visible.
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def holds(self, text: object) -> bool:
        """Whether ``str(text)`` contains one of the secret values."""
        value = str(text)
        return any(secret in value for secret in self._secrets)

    def redact(self, text: object) -> str:
        """``str(text)`` with every secret value replaced by :data:`MASK`."""
        value = str(text)
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    @property
    def values(self) -> tuple[str, ...]:
        """The values it masks (with their encoded forms), longest first."""
        return self._secrets

    def __repr__(self) -> str:
        return f"<Redactor of {len(self._secrets)} secret(s)>"


class _Registry:
    """The process's secrets, longest first; read without a lock (one tuple, replaced whole on a change)."""

    __slots__ = ("_lock", "_values", "sorted")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, None] = {}
        self.sorted: tuple[str, ...] = ()

    def add(self, values: Iterable[str | None]) -> None:
        new = [value for value in values if value and len(value) >= MIN_SECRET_LENGTH and value not in self._values]
        if not new:
            return
        with self._lock:
            for value in new:
                self._values[value] = None
                for form in encoded_forms(value):  # the forms it may be written in: masked as it is
                    self._values[form] = None
            while len(self._values) > _MAX_SECRETS:
                del self._values[next(iter(self._values))]
            self.sorted = tuple(sorted(self._values, key=len, reverse=True))
        _install_record_gate()
        _install_exception_hooks()


_REGISTRY: Final = _Registry()


def register_secret(*values: str | None) -> None:
    """Register secret values with the process's one registry; ``None``, empty and short values are ignored."""
    _REGISTRY.add(values)


def register_url_credentials(url: str | None) -> None:
    """Register the password (and a token-like user name) of ``url``'s userinfo, as written and decoded."""
    if not url or "@" not in url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    for value in (parts.password, parts.username):
        if value:
            register_secret(value, unquote(value))


#: Parts of a variable's name (split at ``_``, ``-`` and ``.``) that make it look secret: a part containing one.
_SECRET_STEMS: Final = ("KEY", "TOKEN", "SECRET", "PASS", "CREDENTIAL", "COOKIE", "PRIVATE", "SIGNATURE", "AUTH")
#: Whole parts that make a name look secret (``DB_PWD``; not ``PWD`` alone, the working directory).
_SECRET_PARTS: Final = frozenset({"PWD", "DSN", "SESSION", "SID", "JWT", "BEARER", "CERT"})
#: Comma-separated variable names always treated as secret (``*``: every variable, as earlier releases did).
SECRET_VARIABLES_ENV: Final = "KAVALAI_SECRET_VARIABLES"
#: Comma-separated variable names never treated as secret, whatever their name.
PUBLIC_VARIABLES_ENV: Final = "KAVALAI_PUBLIC_VARIABLES"


def looks_secret(name: str) -> bool:
    """Whether a variable named ``name`` looks like it holds a secret (``API_KEY``, ``GITHUB_TOKEN``, ``DB_PASSWORD``,
    ``CLIENT_SECRET``, ``AUTH_HEADER``); ``SEARCH_HOST`` or ``LOG_LEVEL`` does not."""
    parts = [part for part in re.split(r"[_.\-]+", name.upper()) if part]
    if len(parts) > 1 and any(part in _SECRET_PARTS for part in parts):
        return True
    return any(stem in part for part in parts for stem in _SECRET_STEMS)


def secret_variable(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the value of the variable ``name`` is a secret: listed in ``KAVALAI_SECRET_VARIABLES`` (or that is
    ``*``), or :func:`looks_secret` and not listed in ``KAVALAI_PUBLIC_VARIABLES``. Both lists are read from ``env``,
    then from the process's environment."""

    def listed(variable: str) -> set[str]:
        text = (env or {}).get(variable) or os.environ.get(variable, "")
        return {item.strip() for item in text.split(",") if item.strip()}

    chosen = listed(SECRET_VARIABLES_ENV)
    if name in chosen or "*" in chosen:
        return True
    return looks_secret(name) and name not in listed(PUBLIC_VARIABLES_ENV)


def register_variable(name: str, value: str, env: Mapping[str, str] | None = None) -> None:
    """Register the value of the variable ``name`` when :func:`secret_variable` says it is one; the credentials of
    a URL in it are registered whatever its name (``DATABASE_URL=postgres://user:pw@host/db``)."""
    if secret_variable(name, env):
        register_secret(value)
    register_url_credentials(value)


def register_environment_values(*texts: str | None) -> None:
    """Register the value of every secret variable of the process's environment that occurs in one of ``texts``:
    ``McpServer(args=["--key", os.environ["API_KEY"]])`` made in Python, where no ``${VAR}`` said so."""
    present = [text for text in texts if text and len(text) >= MIN_SECRET_LENGTH]
    if not present:
        return
    for name, value in os.environ.items():
        if len(value) >= MIN_SECRET_LENGTH and any(value in text for text in present) and secret_variable(name):
            register_secret(value)
    for text in present:
        register_url_credentials(text)


def redact(text: object) -> str:
    """``str(text)`` with every registered secret replaced by :data:`MASK`."""
    value = str(text)
    for secret in _REGISTRY.sorted:
        if secret in value:
            value = value.replace(secret, MASK)
    return value


#: The shortest piece of a secret :func:`mask_edges` masks at a window's end (a shorter one is too likely to be an
#: ordinary word's ending to mask, and says little of the secret).
MIN_EDGE_CHARS: Final = 4


def excerpt(text: object, limit: int, *, tail: bool = False, marker: str = "", also: Redactor | None = None) -> str:
    """The secret gate's one way to cut a text to ``limit`` characters: masked whole first (the registry's secrets
    and ``also``'s), then cut (its head, or with ``tail`` its end) and ``marker`` (``"..."``) put where the cut is,
    within ``limit``; so no cut leaves a piece of a secret the mask no longer recognises."""
    masked = redact(text)
    if also is not None:
        masked = also.redact(masked)
    if len(masked) <= limit:
        return masked
    kept = max(0, limit - len(marker))
    return f"{marker}{masked[len(masked) - kept :]}" if tail else f"{masked[:kept]}{marker}"


def mask_edges(text: str, also: Redactor | None = None) -> str:
    """``text``, a window cut from a longer text before it could be masked (the tail of a stream), with what may be
    a piece of a secret at either end masked: a secret's ending at its start, a secret's beginning at its end (at
    least :data:`MIN_EDGE_CHARS` characters of it), besides every whole secret in it."""
    masked = redact(text) if also is None else also.redact(redact(text))
    secrets = _REGISTRY.sorted if also is None else (*_REGISTRY.sorted, *also.values)
    head = max((_overlap(secret[::-1], masked[::-1]) for secret in secrets), default=0)
    end = max((_overlap(secret, masked) for secret in secrets), default=0)
    if head + end >= len(masked) > 0:
        return MASK
    if head:
        masked = MASK + masked[head:]
    return masked[: len(masked) - end] + MASK if end else masked


def _overlap(secret: str, text: str) -> int:
    """The length of the longest beginning of ``secret`` (shorter than it) that ``text`` ends with, if at least
    :data:`MIN_EDGE_CHARS`; else 0."""
    for size in range(min(len(secret) - 1, len(text)), MIN_EDGE_CHARS - 1, -1):
        if text.endswith(secret[:size]):
            return size
    return 0


def redact_data(value: T) -> T:
    """``value`` (a text, or lists, tuples and dicts of texts and other values, as JSON gives) with every registered
    secret masked in every text, the keys of dicts included; ``value`` itself when it holds none (nothing copied)."""
    if not _REGISTRY.sorted:
        return value
    masked: T = _masked(value)
    return masked


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value) if holds_secret(value) else value
    if isinstance(value, list | tuple):
        items = [_masked(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(_masked(key), _masked(item)) for key, item in value.items()]
        same = all(k is key and v is item for (k, v), (key, item) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value


def holds_secret(text: object) -> bool:
    """Whether ``str(text)`` contains a registered secret."""
    value = str(text)
    return any(secret in value for secret in _REGISTRY.sorted)


class _RedactingFilter(logging.Filter):
    """Masks registered secrets in a record's message, arguments and traceback (formatted here, once); a record is
    looked at once, however many of the gate's places it passes (its factory, its logger, its handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _REGISTRY.sorted or record.__dict__.get(_MASKED) == len(_REGISTRY.sorted):
            return True
        message = record.getMessage()
        if holds_secret(message):
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and holds_secret(record.exc_text):
            record.exc_text = redact(record.exc_text)
        if record.stack_info and holds_secret(record.stack_info):
            record.stack_info = redact(record.stack_info)
        record.__dict__[_MASKED] = len(_REGISTRY.sorted)  # masked for the secrets known now (a new one: again)
        return True


_FILTER: Final = _RedactingFilter()
_GATE_MARK: Final = "_kavalai_secret_gate"
_MASKED: Final = "_kavalai_masked"


def _install_record_gate() -> None:
    """Put the filter where every log record passes, at each registration: in the process's log record factory
    (wrapping the one in place), so every record of every logger (the dependencies': ``mcp.client.auth.oauth2``,
    ``httpx2``, ``aiohttp``, ``dbos``, ``temporalio`` ...) is masked as it is made, whatever handler shows it. A
    factory the application sets later is wrapped the same way when it is set (``logging.setLogRecordFactory`` is
    gated), so one that does not call the one before it does not bypass the gate; the filter is on every logger
    and every handler the process has (and ``logging.lastResort``), for a factory put in place another way; and in
    ``logging.Handler.handle``, for a record made without any factory reaching a handler made later."""
    previous = logging.getLogRecordFactory()
    if not getattr(previous, _GATE_MARK, False):
        logging.setLogRecordFactory(_gated_factory(previous))
    setter = logging.setLogRecordFactory
    if not getattr(setter, _GATE_MARK, False):

        def set_log_record_factory(factory: Callable[..., logging.LogRecord]) -> None:
            setter(factory if getattr(factory, _GATE_MARK, False) else _gated_factory(factory))

        set_log_record_factory.__doc__ = setter.__doc__
        setattr(set_log_record_factory, _GATE_MARK, True)
        setattr(logging, "setLogRecordFactory", set_log_record_factory)  # noqa: B010 (mypy: a module's function)
    _filter_every_logger_and_handler()
    handle = logging.Handler.handle
    if not getattr(handle, _GATE_MARK, False):  # a record made without any factory (a logger class's own _log, a
        # record made by hand) reaches a handler made later: every handler's handle() is a crossing too

        def gated_handle(self: logging.Handler, record: logging.LogRecord) -> Any:
            with suppress(Exception):
                _FILTER.filter(record)
            return handle(self, record)

        setattr(gated_handle, _GATE_MARK, True)
        logging.Handler.handle = gated_handle  # type: ignore[method-assign]


def _install_exception_hooks() -> None:
    """Put the gate in front of the interpreter's printers of an uncaught exception (``sys.excepthook`` and
    ``threading.excepthook``), each chaining the hook in place, so what it writes to ``sys.stderr`` is masked:
    Python 3.11's built-in printer reads an exception's ``__cause__`` and ``__context__`` in C, past the masked
    copies :class:`~kavalai.errors.FunctionKernelException` gives, and would show a chained foreign error's secret.
    Installed at the first registration only (a process with no secret keeps the interpreter's own hooks); a hook
    the application sets later is its own."""
    if not getattr(sys.excepthook, _GATE_MARK, False):
        sys.excepthook = _gated_hook(sys.excepthook)
    if not getattr(threading.excepthook, _GATE_MARK, False):
        threading.excepthook = _gated_hook(threading.excepthook)


def _gated_hook(previous: Callable[..., Any]) -> Callable[..., Any]:
    """``previous`` (an exception hook) writing to a ``sys.stderr`` that passes the gate."""

    def hook(*args: Any) -> Any:
        with redacting_stderr():
            return previous(*args)

    setattr(hook, _GATE_MARK, True)
    return hook


def _gated_factory(factory: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    """``factory``, with every record it makes masked."""

    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        with suppress(Exception):  # a record whose arguments do not format: its handler reports that, as before
            _FILTER.filter(record)
        return record

    setattr(make_record, _GATE_MARK, True)
    return make_record


def _filter_every_logger_and_handler() -> None:
    """Add the filter to every logger and every handler that exists (each once)."""
    loggers = [logging.getLogger(), *list(logging.Logger.manager.loggerDict.values())]
    for logger in loggers:
        if not isinstance(logger, logging.Logger):
            continue  # a placeholder: a logger made under it later is swept at the next registration
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in list(logger.handlers):
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
    last = logging.lastResort
    if last is not None and _FILTER not in last.filters:
        last.addFilter(_FILTER)


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (a ``kavalai`` one) with the redacting filter: the only way kavalai makes a logger."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


class _RedactingStream:
    """A text stream writing through another with every registered secret masked (each ``write`` on its own), then
    ``also`` applied."""

    def __init__(self, inner: Any, also: Callable[[str], str] | None = None) -> None:
        self._inner = inner
        self._also = also

    def write(self, text: str) -> int:
        shown = redact(text) if _REGISTRY.sorted else text
        self._inner.write(shown if self._also is None else self._also(shown))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def redacting_stderr(also: Callable[[str], str] | None = None) -> Iterator[None]:
    """Within the block, everything written to ``sys.stderr`` (messages, warnings, tracebacks, log handlers made
    in it) passes the secret gate, then ``also`` (the CLI's: no terminal command); the CLI's commands run inside
    one."""
    original = sys.stderr
    sys.stderr = _RedactingStream(original, also)  # a TextIO in all but name
    try:
        yield
    finally:
        sys.stderr = original


@contextmanager
def log_lines_to(stream: TextIO, level: int = logging.WARNING) -> Iterator[logging.Handler]:
    """Within the block, records of the ``kavalai`` loggers at ``level`` and above are written to ``stream``, one
    line each, masked by the secret gate (the filter is the handler's too: it sees every child logger's records).
    ``kavalai serve`` shows its warnings (an ignored ``_meta`` value, say) on stderr this way."""
    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    handler.addFilter(_FILTER)
    logger = logging.getLogger("kavalai")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
