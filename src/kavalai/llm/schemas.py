"""Adapting a tool's JSON schema to what each provider accepts.

OpenAI's strict mode (``"strict": true``) guarantees arguments that fit the schema, but only for a subset of JSON
Schema: every object must list all its properties as required and forbid additional properties, and only some
keywords may appear. :func:`openai_strict_schema` returns a strict version when the schema can be made one without
changing what it accepts (adding ``additionalProperties: false`` where it is absent), else ``None``: a schema with
optional fields, free-form maps or unsupported keywords is sent as it is, non-strict. Anthropic takes the schema
as ``input_schema``, with an object at the root.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel

__all__ = ["anthropic_input_schema", "object_schema", "openai_strict_schema", "schema_name"]

_STRICT_KEYWORDS: Final = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref",
        "$defs", "definitions", "description", "title", "pattern", "format", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
_EMPTY_OBJECT: Final[dict[str, Any]] = {"type": "object", "properties": {}}


class _NotStrict(Exception):
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
    candidate = object_schema(schema)
    try:
        _strictify(candidate)
    except _NotStrict:
        return None
    return candidate


def anthropic_input_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The schema as Anthropic's ``input_schema``: an object at the root, ``$defs``/``$ref`` kept."""
    return object_schema(schema)


def schema_name(model: type[BaseModel]) -> str:
    """A name for ``model``'s schema that providers accept (letters, digits, ``_`` and ``-``, at most 64)."""
    name = "".join(char if char.isalnum() or char in "_-" else "_" for char in model.__name__)
    return name[:64] or "output"


def _strictify(node: Any) -> None:
    if not isinstance(node, dict):
        raise _NotStrict
    if not _STRICT_KEYWORDS.issuperset(node):
        raise _NotStrict
    if "$ref" in node:
        # Strict mode rejects keywords beside a $ref; the description is lost, the referenced schema kept.
        for key in [key for key in node if key != "$ref"]:
            del node[key]
        return
    if node.get("type") == "object" or "properties" in node:
        _strictify_object(node)
    if "items" in node:
        _strictify(node["items"])
    for branch in node.get("anyOf", ()):
        _strictify(branch)
    for defs_key in ("$defs", "definitions"):
        for definition in node.get(defs_key, {}).values():
            _strictify(definition)


def _strictify_object(node: dict[str, Any]) -> None:
    if "properties" not in node:  # a free-form object; strict mode would only accept {}
        raise _NotStrict
    properties = node["properties"]
    if set(node.get("required", ())) != set(properties):
        raise _NotStrict
    if node.get("additionalProperties", False) is not False:
        raise _NotStrict
    node["additionalProperties"] = False
    node["required"] = list(properties)
    for child in properties.values():
        _strictify(child)
