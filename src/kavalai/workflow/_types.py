"""A workflow's data types: named Pydantic models (or any type) given in code, or JSON Schema given in YAML.

Every value that crosses a node boundary is validated by one of these. Besides the declared types, the JSON
Schema scalar names are always available: ``string``, ``integer``, ``number``, ``boolean``, ``object``,
``array`` and ``any``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = ["BUILTIN_TYPES", "DataType", "TypeRegistry", "describe_errors", "type_name_of"]

#: Type names every workflow knows without declaring them.
BUILTIN_TYPES: Final[Mapping[str, Any]] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "array": list[Any],
    "any": Any,
}


class DataType:
    """One named type and its validator.

    Attributes:
        name: the name nodes refer to it by.
        annotation: the Python type (a Pydantic model class for object types).
        json_schema: the JSON Schema it was built from, when it came from YAML.
    """

    __slots__ = ("_adapter", "annotation", "json_schema", "name")

    def __init__(self, name: str, annotation: Any, json_schema: dict[str, Any] | None = None) -> None:
        self.name = name
        self.annotation = annotation
        self.json_schema = json_schema
        self._adapter: TypeAdapter[Any] = TypeAdapter(annotation)

    @property
    def is_model(self) -> bool:
        """Whether the type is a Pydantic model class."""
        return isinstance(self.annotation, type) and issubclass(self.annotation, BaseModel)

    def validate(self, value: Any) -> Any:
        """Validate and coerce ``value``; a model instance of another class is validated from its fields.

        Raises:
            pydantic.ValidationError: the value does not fit.
        """
        # a dict or a plain value by exact class first: isinstance() of BaseModel is an ABC check, once a node
        if (
            type(value) not in _NOT_MODELS
            and isinstance(value, BaseModel)
            and not isinstance(value, self.annotation if self.is_model else ())
        ):
            value = value.model_dump(by_alias=True)
        # The core validator itself: TypeAdapter.validate_python only checks its options on the way (once a node).
        return self._adapter.validator.validate_python(value)

    def __repr__(self) -> str:
        return f"DataType({self.name!r})"


class TypeRegistry:
    """The named types of one workflow, the built-in scalar names included."""

    def __init__(self) -> None:
        self._types: dict[str, DataType] = {name: DataType(name, tp) for name, tp in BUILTIN_TYPES.items()}
        self._declared: set[str] = set()

    def add(self, name: str, annotation: Any, *, json_schema: dict[str, Any] | None = None) -> DataType:
        """Declare ``name``; declaring the same Python type twice under one name is allowed."""
        existing = self._types.get(name)
        if existing is not None and existing.annotation is not annotation:
            raise ValueError(f"type {name!r} is declared twice with different definitions")
        data_type = existing or DataType(name, annotation, json_schema)
        self._types[name] = data_type
        self._declared.add(name)
        return data_type

    def add_json_schema(self, name: str, schema: Mapping[str, Any]) -> DataType:
        """Declare ``name`` from a JSON Schema (objects become Pydantic models named ``name``)."""
        from kavalai.kernel import model_from_json_schema, type_from_json_schema

        schema = dict(schema)
        _check_type_names(schema, name)
        annotation: Any
        # An object schema without properties ({"type": "object"}) is any mapping, not a model with no fields.
        if "properties" in schema:
            annotation = model_from_json_schema(schema, name)
        else:
            annotation = type_from_json_schema(schema, name)
        return self.add(name, annotation, json_schema=schema)

    def get(self, name: str) -> DataType | None:
        """The type called ``name``, or ``None``."""
        return self._types.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    @property
    def declared(self) -> list[str]:
        """The names declared by the workflow (the built-in names excluded), sorted."""
        return sorted(self._declared)


_NOT_MODELS: Final = frozenset({dict, list, str, int, float, bool, type(None)})
_JSON_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_DATA_KEYWORDS: Final = frozenset({"const", "default", "enum", "examples"})  # values, not schemas


def _check_type_names(schema: Any, where: str, seen: set[int] | None = None) -> None:
    """Refuse a ``type`` that is not a JSON Schema type name (the converter would quietly accept any value).

    Each object is looked at once: a YAML alias repeats one object, and walking it as a tree would take 2**n steps
    for n nested aliases.
    """
    if not isinstance(schema, list | Mapping):
        return
    seen = set() if seen is None else seen
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            _check_type_names(item, f"{where}[{i}]", seen)
        return
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    for type_name in names:
        if type_name not in _JSON_TYPES:
            raise ValueError(
                f"{where}.type is {type_name!r}, which is not a JSON Schema type "
                f"(one of: {', '.join(sorted(_JSON_TYPES))})"
            )
    for key, value in schema.items():
        if key not in _DATA_KEYWORDS and not (key == "type" and isinstance(value, str | list)):
            _check_type_names(value, f"{where}.{key}", seen)


def type_name_of(annotation: Any) -> str:
    """The name a Python type is registered under by the builder: its ``__name__`` or its ``repr``."""
    for name, builtin in BUILTIN_TYPES.items():
        if annotation is builtin:
            return name
    found = getattr(annotation, "__name__", None)
    return found if isinstance(found, str) else repr(annotation)


def describe_errors(exc: ValidationError) -> tuple[str, str | None]:
    """``(text, first_field)`` for a validation failure, one ``field.path: message`` part per problem."""
    from kavalai.errors import format_validation_errors

    errors = exc.errors(include_url=False)
    first = next((".".join(map(str, e["loc"])) for e in errors if e.get("loc")), None)
    return format_validation_errors(errors), first
