"""Adapting a tool's (or an output model's) JSON schema to what each provider accepts.

OpenAI's strict mode (``"strict": true``) guarantees arguments that fit the schema, but only for a subset of JSON
Schema: every object must list all its properties as required and forbid additional properties, and only some
keywords and string formats may appear. :func:`openai_strict_schema` returns a strict version when the schema can
be made one without changing what it accepts (adding ``additionalProperties: false`` where it is absent, dropping
keywords beside a ``$ref``), else ``None``: a schema with optional fields, free-form maps or unsupported keywords
is sent as it is, non-strict.

Anthropic takes a tool's schema as ``input_schema`` with an object at the root (:func:`anthropic_input_schema`).
Its structured outputs (``output_config.format``) accept optional properties but no numeric or string length
constraints; :func:`anthropic_output_schema` returns such a schema, or ``None`` when the schema needs more.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

__all__ = [
    "anthropic_input_schema",
    "anthropic_output_schema",
    "object_schema",
    "openai_strict_schema",
    "schema_name",
]

_EMPTY_OBJECT: Final[dict[str, Any]] = {"type": "object", "properties": {}}
_STRUCTURE: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "$defs"}
    | {"definitions", "description", "title", "format"}
)


@dataclass(frozen=True, slots=True)
class _Dialect:
    """What one provider's constrained decoding accepts."""

    keywords: frozenset[str]
    formats: frozenset[str]
    all_required: bool  # every property must be listed in ``required``
    dropped: frozenset[str] = frozenset()  # annotations removed rather than refused
    min_items: frozenset[int] | None = None  # allowed minItems values; None: any


_OPENAI: Final = _Dialect(
    keywords=_STRUCTURE
    | {"pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"},
    formats=frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}),
    all_required=True,
)
_ANTHROPIC: Final = _Dialect(
    keywords=_STRUCTURE | {"allOf", "minItems", "default", "examples"},
    formats=frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}),
    all_required=False,
    dropped=frozenset({"default", "examples"}),
    min_items=frozenset({0, 1}),
)


class _Unsupported(Exception):
    pass


def object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``schema`` with an object at the root and no ``$schema`` key, as both providers require."""
    result = copy.deepcopy(dict(schema or _EMPTY_OBJECT))
    result.pop("$schema", None)
    if result.get("type") != "object":
        result["type"] = "object"
    result.setdefault("properties", {})
    return result


def openai_strict_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The schema for OpenAI's strict mode, or ``None`` when strict mode would change what the schema accepts."""
    return _constrain(schema, _OPENAI)


def anthropic_output_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The schema for Anthropic's ``output_config.format``, or ``None`` when it uses what the API cannot enforce."""
    return _constrain(schema, _ANTHROPIC)


def anthropic_input_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The schema as Anthropic's ``input_schema``: an object at the root, ``$defs``/``$ref`` kept."""
    return object_schema(schema)


def schema_name(model: type[BaseModel]) -> str:
    """A name for ``model``'s schema that providers accept (letters, digits, ``_`` and ``-``, at most 64)."""
    name = "".join(char if char.isascii() and (char.isalnum() or char in "_-") else "_" for char in model.__name__)
    return name[:64] or "output"


def _constrain(schema: Mapping[str, Any] | None, dialect: _Dialect) -> dict[str, Any] | None:
    candidate = object_schema(schema)
    try:
        _visit(candidate, dialect)
    except _Unsupported:
        return None
    return candidate


def _visit(node: Any, dialect: _Dialect) -> None:
    if not isinstance(node, dict) or not dialect.keywords.issuperset(node):
        raise _Unsupported
    for key in dialect.dropped.intersection(node):
        del node[key]
    if "$ref" in node:
        # Keywords beside a $ref are refused; the description is lost, the referenced schema kept.
        for key in [key for key in node if key != "$ref"]:
            del node[key]
        return
    if "format" in node and node["format"] not in dialect.formats:
        raise _Unsupported
    if dialect.min_items is not None and node.get("minItems", 0) not in dialect.min_items:
        raise _Unsupported
    if node.get("type") == "object" or "properties" in node:
        _visit_object(node, dialect)
    if "items" in node:
        _visit(node["items"], dialect)
    for key in ("anyOf", "allOf"):
        for branch in node.get(key, ()):
            _visit(branch, dialect)
    for key in ("$defs", "definitions"):
        for definition in node.get(key, {}).values():
            _visit(definition, dialect)


def _visit_object(node: dict[str, Any], dialect: _Dialect) -> None:
    if "properties" not in node:  # a free-form object; constrained decoding would only accept {}
        raise _Unsupported
    properties = node["properties"]
    required = node.get("required", [])
    if not set(required) <= set(properties) or (dialect.all_required and set(required) != set(properties)):
        raise _Unsupported
    if node.get("additionalProperties", False) is not False:
        raise _Unsupported
    node["additionalProperties"] = False
    node["required"] = list(properties) if dialect.all_required else list(required)
    for child in properties.values():
        _visit(child, dialect)
