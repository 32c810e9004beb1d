"""OpenAPI 3 documents -> tool specifications: one per operation, with self-contained JSON schemas.

What it relies on and does:

- Local ``$ref``s (``#/components/...``) are resolved. Parameters, request bodies and responses are inlined;
  schemas are copied into the tool schema's ``$defs`` and their ``$ref``s rewritten to point there, so recursive
  (circular) schemas stay finite. Each of the input and output schemas carries only the ``$defs`` it reaches. A
  ``$ref`` to another document is an error naming the operation, and so is an operation too malformed to read.
- The input schema merges path, query and header parameters with the JSON request body: an object body's
  properties (but its ``readOnly`` ones) become arguments beside the parameters (an optional body is only sent
  when one of them is given); any other body (an array, a composed schema, a name clash) is one ``body``
  argument. ``Accept``, ``Content-Type`` and ``Authorization`` header parameters are ignored, as the OpenAPI
  specification says; cookie parameters are not supported and are left out. A query list is sent as repeated
  keys, or comma-joined for ``explode: false``; other parameter styles are not supported.
- The output schema is the JSON schema of the first 2xx response that has one; ``None`` (any value) otherwise.
- Operations whose request body has no JSON media type are skipped, and reported back as such.
- An operation's own word on repeats is kept for durable runs (:func:`kavalai.durable.retry_allowed`): ``x-idempotent``
  (``true``: a repeat is harmless; ``false``: it is not, whatever the method), and an ``Idempotency-Key`` header
  parameter (the server says it tells repeats apart by the key, which a durable step sends in that header).
- One tool per operation: an operationId served at several paths (gRPC-gateway documents such as Temporal's bind
  each call at two or four) is one tool that knows all its paths and calls the first; the same operationId under
  another method stays a tool of its own (``name_2``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from difflib import get_close_matches
from typing import Any, Final

from kavalai.adapters.rest._request import RequestPlan, path_placeholders
from kavalai.documents import load_json_or_yaml
from kavalai.errors import ConfigurationError

__all__ = ["OpenApiOperation", "OpenApiSkip", "check_spec", "parse_spec", "read_operations"]

_HTTP_METHODS: Final = ("get", "put", "post", "delete", "options", "head", "patch")
_IGNORED_HEADERS: Final = frozenset({"accept", "content-type", "authorization"})
_NAME_JUNK: Final = re.compile(r"[^A-Za-z0-9_.-]+")
#: An operation's own mark of whether a repeat of it is harmless.
_IDEMPOTENT_MARK: Final = "x-idempotent"
#: The header in which a durable step sends its idempotency key (lowercase): documented, the server honours it.
_KEY_HEADER: Final = "idempotency-key"


@dataclass(frozen=True, slots=True)
class OpenApiOperation:
    """One operation, ready to become a ``rest://`` tool.

    Attributes:
        tool_name: the operationId (made URI-safe), or a name made of the method and path.
        operation_id: the operationId as written, or ``None``.
        tags: the operation's tags.
        description: summary and description.
        plan: where each argument goes in the request.
        input_schema: a self-contained JSON schema of the arguments.
        output_schema: the JSON schema of the 2xx JSON response, or ``None``.
        paths: every ``METHOD /path`` the document serves this operation at; the plan calls the first.
        idempotent: the operation's ``x-idempotent`` (``None`` when it has none).
        honours_key: the operation documents an ``Idempotency-Key`` header parameter.
    """

    tool_name: str
    operation_id: str | None
    tags: tuple[str, ...]
    description: str
    plan: RequestPlan
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    paths: tuple[str, ...] = ()
    idempotent: bool | None = None
    honours_key: bool = False


@dataclass(frozen=True, slots=True)
class OpenApiSkip:
    """An operation that could not become a tool, and why."""

    label: str
    reason: str


def parse_spec(text: str, *, source: str) -> dict[str, Any]:
    """Parse an OpenAPI document written as JSON or YAML; :class:`ConfigurationError` naming ``source`` if not."""
    document = load_json_or_yaml(text, source=f"The OpenAPI spec {source}")  # bounded: size, aliases, depth
    return check_spec(document, source=source)


def check_spec(document: Any, *, source: str) -> dict[str, Any]:
    """``document`` if it looks like an OpenAPI 3 document, else :class:`ConfigurationError`."""
    if not isinstance(document, Mapping):
        raise ConfigurationError(f"The OpenAPI spec {source} is not a JSON/YAML object.")
    version = str(document.get("openapi", ""))
    if not version.startswith("3."):
        found = f"swagger {document['swagger']}" if "swagger" in document else f"openapi {version or '(missing)'}"
        raise ConfigurationError(
            f"The OpenAPI spec {source} declares {found}; only OpenAPI 3.x documents can be imported."
        )
    paths = document.get("paths", {})
    if not isinstance(paths, Mapping):
        raise ConfigurationError(f"The OpenAPI spec {source} has a 'paths' entry that is not an object.")
    for path, item in paths.items():
        if not _is_server_path(path):
            # An absolute URL or `//host/...` would send the server's credentials to another origin.
            operations = sorted(
                str(op.get("operationId") or method)
                for method, op in (item.items() if isinstance(item, Mapping) else ())
                if isinstance(op, Mapping)
            )
            named = f" (operations: {', '.join(operations)})" if operations else ""
            raise ConfigurationError(
                f"The OpenAPI spec {source} has a path {path!r}{named} that is not a path on the server: paths must "
                "start with a single '/'. The server's credentials are only sent to its own origin."
            )
    return dict(document)


def _is_server_path(path: object) -> bool:
    return isinstance(path, str) and path.startswith("/") and not path.startswith("//") and "\\" not in path


def read_operations(
    spec: Mapping[str, Any],
    *,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> tuple[list[OpenApiOperation], list[OpenApiSkip]]:
    """The operations of ``spec`` kept by ``include``/``exclude`` (operationIds or tags), and those skipped."""
    wanted = set(include) if include is not None else None
    unwanted = set(exclude or ())
    _check_filters(spec, (wanted or set()) | unwanted)
    operations: list[OpenApiOperation] = []
    skipped: list[OpenApiSkip] = []
    taken: set[str] = set()
    by_id: dict[tuple[str, str], int] = {}  # (operationId, method) -> its place in `operations`
    for path, method, operation, shared_params in _walk(spec):
        keys = _filter_keys(operation)
        if (wanted is not None and not keys & wanted) or keys & unwanted:
            continue
        label = f"{method.upper()} {path}"
        operation_id = operation.get("operationId")
        known = by_id.get((operation_id, method)) if isinstance(operation_id, str) else None
        if known is not None:  # another path of an operation already read
            operations[known] = replace(operations[known], paths=(*operations[known].paths, label))
            continue
        try:
            built = _build(spec, path, method, operation, shared_params, taken)
        except _Unsupported as exc:
            skipped.append(OpenApiSkip(label, str(exc)))
            continue
        except ConfigurationError as exc:
            raise ConfigurationError(f"OpenAPI operation {label}: {exc}") from exc
        except (AttributeError, TypeError, ValueError, KeyError) as exc:  # a value of the wrong kind in the document
            raise ConfigurationError(
                f"OpenAPI operation {label} is malformed ({type(exc).__name__}: {exc}); check it against the "
                "OpenAPI 3 specification."
            ) from exc
        taken.add(built.tool_name)
        if isinstance(operation_id, str):
            by_id[operation_id, method] = len(operations)
        operations.append(replace(built, paths=(label,)))
    return operations, skipped


def _filter_keys(operation: Mapping[str, Any]) -> set[str]:
    return {str(operation.get("operationId") or ""), *_tags(operation)} - {""}


def _tags(operation: Mapping[str, Any]) -> tuple[str, ...]:
    tags = operation.get("tags")
    return tuple(str(tag) for tag in tags) if isinstance(tags, list | tuple) else ()


def _check_filters(spec: Mapping[str, Any], names: set[str]) -> None:
    """A name in ``include``/``exclude`` that is no operationId or tag of the spec is a typo: say so."""
    known: set[str] = set()
    for _, _, operation, _ in _walk(spec):
        known |= _filter_keys(operation)
    unknown = sorted(names - known)
    if unknown:
        hints = [
            f"{name!r} (did you mean {close[0]!r}?)" if (close := get_close_matches(name, known, 1)) else repr(name)
            for name in unknown
        ]
        raise ConfigurationError(
            f"include/exclude list {', '.join(hints)}, not an operationId or tag of the OpenAPI spec."
        )


class _Unsupported(Exception):
    """An operation that cannot be expressed as a JSON tool (for example a multipart-only body)."""


def _walk(spec: Mapping[str, Any]) -> Iterable[tuple[str, str, Mapping[str, Any], list[Any]]]:
    for path, item in (spec.get("paths") or {}).items():
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") or []
        for method in _HTTP_METHODS:
            operation = item.get(method)
            if isinstance(operation, Mapping):
                yield str(path), method, operation, shared


def _build(
    spec: Mapping[str, Any],
    path: str,
    method: str,
    operation: Mapping[str, Any],
    shared_params: list[Any],
    taken: set[str],
) -> OpenApiOperation:
    refs = _Refs(spec)
    schema = _InputSchema(refs)
    for param in _merged_params(refs, shared_params, operation.get("parameters") or ()):
        schema.add_parameter(param)
    body = operation.get("requestBody")
    if body is not None:
        schema.add_body(refs.follow(body))
    unfilled = [name for name in path_placeholders(path) if name not in schema.path_params]
    if unfilled:
        raise _Unsupported(f"the path placeholders {', '.join(unfilled)} have no path parameter")
    output = _output_schema(refs, operation.get("responses") or {})
    operation_id = operation.get("operationId")
    marked = operation.get(_IDEMPOTENT_MARK)
    if marked is not None and not isinstance(marked, bool):
        raise ConfigurationError(f"{_IDEMPOTENT_MARK} must be true or false, not {marked!r}")
    return OpenApiOperation(
        tool_name=_tool_name(operation_id, method, path, taken),
        operation_id=str(operation_id) if operation_id is not None else None,
        tags=_tags(operation),
        description=_description(operation, method, path),
        plan=schema.plan(method.upper(), path),
        input_schema=refs.attach(schema.json_schema()),
        output_schema=refs.attach(output) if output is not None else None,
        idempotent=marked,
        honours_key=any(header.lower() == _KEY_HEADER for _, header in schema.header_params),
    )


def _merged_params(refs: _Refs, shared: Iterable[Any], own: Iterable[Any]) -> list[Mapping[str, Any]]:
    merged: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in [*shared, *own]:  # an operation's parameter overrides a path-level one of the same name and place
        param = refs.follow(raw)
        merged[(str(param.get("name")), str(param.get("in")))] = param
    return list(merged.values())


class _InputSchema:
    """Collects the properties of a tool's input schema and where each one goes."""

    def __init__(self, refs: _Refs) -> None:
        self._refs = refs
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.path_params: list[str] = []
        self.query_params: set[str] = set()
        self.joined_params: set[str] = set()
        self.header_params: list[tuple[str, str]] = []
        self.body_field: str | None = None
        self.body_object = False
        self.body_optional = False
        self.body_form = False

    def add_parameter(self, param: Mapping[str, Any]) -> None:
        name, place = str(param.get("name", "")), param.get("in")
        if not name or place == "cookie" or (place == "header" and name.lower() in _IGNORED_HEADERS):
            return
        arg = name
        if arg in self.properties:
            if place != "header":
                raise _Unsupported(f"the {place} parameter {name!r} clashes with another argument")
            arg = f"header_{name}"
        prop = self._refs.schema(param.get("schema", {}))
        if param.get("description") and "description" not in prop:
            prop = {**prop, "description": str(param["description"])}
        self.properties[arg] = prop
        if param.get("required") or place == "path":
            self.required.append(arg)
        if place == "path":
            self.path_params.append(arg)
        elif place == "query":
            self.query_params.add(arg)
            if param.get("style", "form") == "form" and param.get("explode", True) is False:
                self.joined_params.add(arg)  # a list as one value: ?tags=a,b rather than ?tags=a&tags=b
        elif place == "header":
            self.header_params.append((arg, name))

    def add_body(self, body: Mapping[str, Any]) -> None:
        content = body.get("content", {})
        media = _json_media(content)
        form = media is None and (media := _form_media(content)) is not None
        if media is None:
            kinds = ", ".join(content) or "no content"
            raise _Unsupported(f"the request body is neither JSON nor a form ({kinds})")
        schema = self._refs.schema(media.get("schema", {}))
        target = self._refs.target(schema)
        props = target.get("properties")
        mergeable = (
            target.get("type", "object") == "object"
            and isinstance(props, Mapping)
            and not any(key in target for key in ("allOf", "anyOf", "oneOf", "not"))
            and not set(props) & set(self.properties)
        )
        if mergeable and isinstance(props, Mapping):
            # readOnly properties (an id the server assigns) are not sent in a request, so they are not arguments
            sent = {name: prop for name, prop in props.items() if not _read_only(prop)}
            self.properties.update(sent)
            if body.get("required"):
                self.required.extend(str(name) for name in target.get("required", ()) if name in sent)
            self.body_object = True
            self.body_optional = not body.get("required")
            self.body_form = form
            return
        if form:
            raise _Unsupported("the form body is not an object of named fields")
        if "body" in self.properties:
            raise _Unsupported("the request body and a parameter are both named 'body'")
        self.properties["body"] = schema
        if body.get("required"):
            self.required.append("body")
        self.body_field = "body"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": self.properties}
        if self.required:
            schema["required"] = list(dict.fromkeys(self.required))
        return schema

    def plan(self, method: str, path: str) -> RequestPlan:
        return RequestPlan(
            method=method,
            path=path,
            path_params=tuple(self.path_params),
            query_params=frozenset(self.query_params),
            joined_params=frozenset(self.joined_params),
            header_params=tuple(self.header_params),
            body_field=self.body_field,
            body_object=self.body_object,
            body_optional=self.body_optional,
            body_form=self.body_form,
        )


def _read_only(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("readOnly") is True


def _form_media(content: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for media_type, media in content.items():
        if str(media_type).split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded":
            return media if isinstance(media, Mapping) else {}
    return None


def _json_media(content: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for media_type, media in content.items():
        base = str(media_type).split(";", 1)[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return media if isinstance(media, Mapping) else {}
    return None


def _output_schema(refs: _Refs, responses: Mapping[str, Any]) -> dict[str, Any] | None:
    codes = sorted(str(code) for code in responses if str(code).startswith("2"))
    for code in codes:
        media = _json_media(refs.follow(responses[code]).get("content", {}) or {})
        if media is not None and isinstance(media.get("schema"), Mapping):
            schema: dict[str, Any] = refs.schema(media["schema"])
            return schema
    return None


def _description(operation: Mapping[str, Any], method: str, path: str) -> str:
    parts = [str(operation[key]).strip() for key in ("summary", "description") if operation.get(key)]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    return "\n\n".join(parts) or f"{method.upper()} {path}"


def _tool_name(operation_id: Any, method: str, path: str, taken: set[str]) -> str:
    if operation_id:
        name = _NAME_JUNK.sub("_", str(operation_id))
    else:
        name = re.sub(r"_+", "_", _NAME_JUNK.sub("_", f"{method}_{path}".replace("{", "").replace("}", "")))
    name = re.sub(r"\.{2,}", ".", name).strip("._-") or method
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


@dataclass
class _Refs:
    """Resolves local ``$ref``s of one document and collects the schemas a tool refers to as ``$defs``."""

    document: Mapping[str, Any]
    defs: dict[str, Any] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)
    _copies: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # id(node) -> (node, its copy)

    def follow(self, node: Any) -> Mapping[str, Any]:
        """``node`` with ``$ref`` chains followed (for parameters, bodies, responses)."""
        seen: set[str] = set()
        while isinstance(node, Mapping) and "$ref" in node:
            ref = str(node["$ref"])
            if ref in seen:
                raise ConfigurationError(f"the $ref {ref!r} refers to itself")
            seen.add(ref)
            node = self._lookup(ref)
        if not isinstance(node, Mapping):
            raise ConfigurationError(f"expected an object, found {type(node).__name__}")
        return node

    def schema(self, node: Any) -> Any:
        """A copy of the schema ``node`` whose local ``$ref``s point into ``$defs`` (collected on the way).

        An object the document shares (a YAML alias repeats one object) is copied once and stays shared in the
        copy: copied per path, ``n`` nested aliases would take ``2**n`` steps, and the models built from it as many.
        """
        if not isinstance(node, list | Mapping):
            return node
        known = self._copies.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        if isinstance(node, list):
            items: list[Any] = []
            self._copies[id(node)] = (node, items)
            items.extend(self.schema(item) for item in node)
            return items
        copy: dict[str, Any] = {}
        self._copies[id(node)] = (node, copy)  # before the children: a self-containing node meets its own copy
        if isinstance(node.get("$ref"), str):
            copy["$ref"] = f"#/$defs/{self._define(node['$ref'])}"
        copy.update((key, self.schema(value)) for key, value in node.items() if key != "$ref")
        return copy

    def target(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """The definition a rewritten ``{"$ref": "#/$defs/X"}`` schema points to (or the schema itself)."""
        seen: set[str] = set()
        while isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/$defs/"):
            name = schema["$ref"].removeprefix("#/$defs/")
            if name in seen or not isinstance(self.defs.get(name), Mapping):
                break
            seen.add(name)
            schema = self.defs[name]
        return schema

    def attach(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` with the collected ``$defs`` it reaches (directly or through other definitions)."""
        needed: dict[str, Any] = {}
        pending = list(_local_refs(schema))
        while pending:
            name = pending.pop()
            if name not in needed and name in self.defs:
                needed[name] = self.defs[name]
                pending.extend(_local_refs(self.defs[name]))
        if not needed:
            return schema
        return {**schema, "$defs": {**schema.get("$defs", {}), **dict(sorted(needed.items()))}}

    def _define(self, ref: str) -> str:
        name = self._names.get(ref)
        if name is not None:
            return name
        base = _NAME_JUNK.sub("_", ref.rsplit("/", 1)[-1]) or "Schema"
        name, n = base, 2
        while name in self.defs:
            name, n = f"{base}{n}", n + 1
        self._names[ref] = name
        self.defs[name] = {}  # reserve first: a circular schema meets its own name while being copied
        self.defs[name] = self.schema(self._lookup(ref))
        return name

    def _lookup(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ConfigurationError(f"the $ref {ref!r} points outside the document; only local refs are supported")
        node: Any = self.document
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise ConfigurationError(f"the $ref {ref!r} does not resolve")
        return node


def _local_refs(node: Any, seen: set[int] | None = None) -> Iterable[str]:
    """The names of the ``#/$defs/<name>`` definitions that ``node`` refers to, at any depth (each shared object
    looked at once)."""
    if not isinstance(node, Mapping | list):
        return
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, list):
        for item in node:
            yield from _local_refs(item, seen)
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        yield ref.removeprefix("#/$defs/")
    for value in node.values():
        yield from _local_refs(value, seen)
