"""How a tool's validated arguments become an HTTP request: path, query, headers and JSON body.

A :class:`RequestPlan` is built once per tool at registration, so a call only fills it in. Argument values are
the input model dumped in JSON mode with ``exclude_unset=True``: arguments the caller left out are not sent.

- ``{placeholders}`` in the path are filled from the arguments of that name, percent-encoded (``/`` included).
  A value that is empty, ``.`` or ``..`` is refused: the URL would name another resource (``/items/..`` is ``/``).
- Query values: ``true``/``false`` for booleans, one ``key=value`` pair per list item (or one comma-joined
  value for the ``joined_params``, OpenAPI's ``explode: false``), objects as JSON text; ``None`` is not sent.
- Header parameters (OpenAPI imports) are sent as text; ``None`` is not sent.
- The JSON body is either the remaining arguments as an object, or one argument's value (``body_field``), as
  OpenAPI imports do for a request body that is not an object. An optional object body (``body_optional``) is
  not sent at all when no argument went into it.
- A form body (``body_form``, OpenAPI's ``application/x-www-form-urlencoded``, which Slack, Stripe and Twilio
  use) holds the remaining arguments encoded as query values are.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, unquote

from kavalai.errors import ToolInputError

__all__ = ["BODY_METHODS", "METHODS", "PreparedRequest", "RequestPlan", "path_placeholders"]

METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
#: Methods whose leftover arguments go in a JSON body; the others send them as query parameters.
BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
_PLACEHOLDER: Final = re.compile(r"\{([^{}/]+)\}")
#: Path values that would make the URL point at another resource once the path is normalised.
_UNSAFE_SEGMENTS: Final = frozenset({"", ".", ".."})


def path_placeholders(path: str) -> tuple[str, ...]:
    """The names of the ``{placeholders}`` in ``path``, in order."""
    return tuple(_PLACEHOLDER.findall(path))


@dataclass(slots=True)  # not frozen: built on every call, and frozen dataclasses are slow to build
class PreparedRequest:
    """One request, ready to send: the path (relative to the base URL), query pairs, headers and body."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any
    has_body: bool
    form: bool = False  # the body is form pairs (list[tuple[str, str]]), not JSON


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """Where each argument of one tool goes.

    Attributes:
        method: the HTTP method, upper case.
        path: the path template, starting with ``/``.
        path_params: argument names filling ``{placeholders}``.
        query_params: argument names sent in the query; ``None`` means every argument not placed elsewhere
            (when the method has no body).
        header_params: argument name -> header name.
        joined_params: query arguments whose list is sent as one comma-separated value (``a,b``), not repeated.
        body_field: the argument whose value is the whole JSON body, if any.
        body_object: send the arguments not placed elsewhere as a JSON object body.
        body_optional: with ``body_object``, send no body at all when no argument is left for it (an OpenAPI
            request body that is not required); otherwise an empty object is sent.
        body_form: with ``body_object``, send that body form-encoded (``application/x-www-form-urlencoded``).
    """

    method: str
    path: str
    path_params: tuple[str, ...] = ()
    query_params: frozenset[str] | None = None
    header_params: tuple[tuple[str, str], ...] = ()
    joined_params: frozenset[str] = frozenset()
    body_field: str | None = None
    body_object: bool = False
    body_optional: bool = False
    body_form: bool = False
    #: Every argument goes in a JSON object body (a hand-registered POST, PUT or PATCH): :meth:`prepare` in short.
    _plain: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        plain = self.query_params is not None and not self.query_params and self.body_field is None
        plain = plain and self.body_object and not (self.path_params or self.header_params or self.body_form)
        object.__setattr__(self, "_plain", plain)

    @classmethod
    def simple(cls, method: str, path: str) -> RequestPlan:
        """The plan of a hand-registered tool: placeholders from the path; the rest in the query or the body."""
        method = method.upper()
        body = method in BODY_METHODS
        return cls(
            method=method,
            path=path,
            path_params=path_placeholders(path),
            query_params=frozenset() if body else None,
            body_object=body,
        )

    def prepare(self, arguments: Mapping[str, Any], *, uri: str) -> PreparedRequest:
        """Fill the plan with the dumped arguments; :class:`ToolInputError` if a path placeholder has no value."""
        remaining = dict(arguments)
        if self._plain:
            if remaining or not self.body_optional:
                return PreparedRequest(self.method, self.path, [], {}, remaining, True)
            return PreparedRequest(self.method, self.path, [], {}, None, False)
        path = self._fill_path(remaining, uri) if self.path_params else self.path
        headers: dict[str, str] = {}
        for arg, header in self.header_params:
            value = remaining.pop(arg, None)
            if value is not None:
                headers[header] = _text(value)
        query: list[tuple[str, str]] = []
        if self.query_params is None:
            _add_query(query, remaining, self.joined_params)
            remaining = {}
        elif self.query_params:
            _add_query(query, {k: remaining.pop(k) for k in self.query_params if k in remaining}, self.joined_params)
        if self.body_field is not None:
            has_body = self.body_field in remaining
            return PreparedRequest(self.method, path, query, headers, remaining.get(self.body_field), has_body)
        if self.body_object and (remaining or not self.body_optional):
            if self.body_form:
                pairs: list[tuple[str, str]] = []
                _add_query(pairs, remaining, self.joined_params)
                return PreparedRequest(self.method, path, query, headers, pairs, True, True)
            return PreparedRequest(self.method, path, query, headers, remaining, True)
        return PreparedRequest(self.method, path, query, headers, None, False)

    def _fill_path(self, remaining: dict[str, Any], uri: str) -> str:
        values: dict[str, str] = {}
        for name in self.path_params:
            value = remaining.pop(name, None)
            if value is None:
                raise ToolInputError(
                    f"Invalid arguments for {uri}: {name}: required to fill the path {self.path}",
                    uri=uri,
                    errors=[{"type": "missing", "loc": (name,), "msg": "Field required (path parameter)"}],
                )
            text = _text(value)
            if _names_another_segment(text):
                message = f"{text!r} cannot fill the path {self.path}: an empty, '.' or '..' value names another URL"
                raise ToolInputError(
                    f"Invalid arguments for {uri}: {name}: {message}",
                    uri=uri,
                    errors=[{"type": "value_error", "loc": (name,), "msg": message, "input": value}],
                )
            values[name] = quote(text, safe="")
        return _PLACEHOLDER.sub(lambda match: values[match[1]], self.path)


def _names_another_segment(text: str) -> bool:
    """Whether a path value could be read as '.' or '..' somewhere on the way: plain, percent-encoded (once or
    more), with a ';' parameter (``..;``), with backslashes, or spelled with look-alike dots."""
    decoded = text
    for _ in range(4):  # %252e%252e -> %2e%2e -> ..
        once = unquote(decoded)
        if once == decoded:
            break
        decoded = once
    decoded = unicodedata.normalize("NFKC", decoded).replace("\\", "/")
    segments = decoded.split("/")
    bare = (segment.split(";", 1)[0].strip() for segment in segments)
    return text in _UNSAFE_SEGMENTS or any(part in (".", "..") for part in bare)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _add_query(query: list[tuple[str, str]], values: Mapping[str, Any], joined: frozenset[str]) -> None:
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            items = [_text(item) for item in value if item is not None]
            if key in joined:
                query.append((key, ",".join(items)))
            else:
                query.extend((key, item) for item in items)
        else:
            query.append((key, _text(value)))
