"""Kaval.AI 1.0 ``data_types`` -> JSON Schema, so our one schema converter builds the models.

Upstream's dialect differs from JSON Schema in four ways, all handled here: a property is required unless it says
``required: false`` (then it may be null, with its ``default`` or ``None``); ``$ref`` names another data type
(``$ref: order_item``); a property without ``type`` is a string; ``max_length``/``min_length`` are snake case.
Every type is an object whose unknown keys are refused, as upstream's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["kaval_json_schema"]

_TYPE_KEYS = frozenset({"type", "properties", "$ref", "description", "title", "required"})
_PROPERTY_KEYS = frozenset(
    {"type", "items", "properties", "$ref", "enum", "max_length", "min_length", "required", "default", "description"}
)
_SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "array": "array"}


class _Converter:
    def __init__(self, data_types: Mapping[str, Any]) -> None:
        self.data_types = data_types
        self.defs: dict[str, Any] = {}

    def root(self, name: str) -> dict[str, Any]:
        schema = self.type_schema(name)
        if self.defs:
            schema["$defs"] = self.defs
        return schema

    def type_schema(self, name: str) -> dict[str, Any]:
        raw = self.data_types[name]
        if not isinstance(raw, Mapping):
            raise ValueError(f"type {name!r} must be a mapping, not {type(raw).__name__}")
        unknown = sorted(set(raw) - _TYPE_KEYS)
        if unknown:
            raise ValueError(f"unknown attribute {unknown[0]!r} in type {name!r} (allowed: {sorted(_TYPE_KEYS)})")
        if "$ref" in raw:
            return self.type_schema(self._known(raw["$ref"], name))
        listed = raw.get("required")
        if listed is not None and not (isinstance(listed, list) and all(isinstance(k, str) for k in listed)):
            raise ValueError(f"'required' of type {name!r} must be a list of property names")
        return self.object(raw.get("properties") or {}, name, listed)

    def object(self, properties: Mapping[str, Any], where: str, listed: list[str] | None = None) -> dict[str, Any]:
        """An object; a property is required unless it says ``required: false`` or a ``required`` list (JSON
        Schema's own form, which upstream's reference shows) leaves it out."""
        converted: dict[str, Any] = {}
        required: list[str] = []
        for key, spec in properties.items():
            optional = (isinstance(spec, Mapping) and spec.get("required") is False) or (
                listed is not None and key not in listed
            )
            converted[key] = self.property(spec, f"{where}.{key}", optional=optional)
            if not optional:
                required.append(key)
        return {"type": "object", "properties": converted, "required": required, "additionalProperties": False}

    def property(self, spec: Any, where: str, *, optional: bool = False) -> dict[str, Any]:
        if not isinstance(spec, Mapping):
            raise ValueError(f"property {where!r} must be a mapping, not {spec!r}")
        unknown = sorted(set(spec) - _PROPERTY_KEYS)
        if unknown:
            raise ValueError(f"unknown attribute {unknown[0]!r} in property {where!r}")
        schema: dict[str, Any]
        if "$ref" in spec:
            schema = self.ref(spec["$ref"], where)
        elif "enum" in spec:
            if not spec["enum"]:
                raise ValueError(f"'enum' must be a non-empty list in property {where!r}")
            schema = {"enum": list(spec["enum"])}
        else:
            kind = spec.get("type", "string")
            if kind == "object":
                props = spec.get("properties")
                listed = spec.get("required") if isinstance(spec.get("required"), list) else None
                schema = self.object(props, where, listed) if props else {"type": "object"}
            elif kind in _SCALARS:
                schema = {"type": _SCALARS[kind]}
                if kind == "array":
                    schema["items"] = self.property(spec.get("items") or {}, f"{where}.items")
            else:
                raise ValueError(f"property {where!r} has type {kind!r}; use one of {sorted([*_SCALARS, 'object'])}")
        for theirs, ours in (("max_length", "maxLength"), ("min_length", "minLength"), ("description", "description")):
            if theirs in spec:
                schema[ours] = spec[theirs]
        if optional:
            schema = {"anyOf": [schema, {"type": "null"}], "default": spec.get("default")}
        return schema

    def ref(self, target: Any, where: str) -> dict[str, Any]:
        name = self._known(target, where)
        if name not in self.defs:
            self.defs[name] = {}  # reserved first: a type may refer to itself
            self.defs[name] = self.type_schema(name)
        return {"$ref": f"#/$defs/{name}"}

    def _known(self, target: Any, where: str) -> str:
        if not isinstance(target, str) or target not in self.data_types:
            known = ", ".join(sorted(self.data_types))
            raise ValueError(f"{where!r} refers to {target!r}, which is not a declared data type ({known})")
        return target


def kaval_json_schema(name: str, data_types: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of data type ``name`` (types it refers to go under ``$defs``).

    Raises:
        ValueError: an unknown attribute or type, or a ``$ref`` to an undeclared type.
    """
    return _Converter(data_types).root(name)
