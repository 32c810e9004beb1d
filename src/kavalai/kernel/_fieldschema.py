"""JSON schemas of a signature's models, assembled from per-type pieces without building the models.

Building a Pydantic model class costs about 0.3 ms and its JSON schema another 0.2 ms; a catalog of 10,000 Python
tools would spend seconds on classes most of which are never called. A field's JSON schema is, for most types,
the schema of its type plus the field's ``title``, ``default`` and ``description``; the schema of a type depends
on the type alone, so it is worked out by pydantic once per type (:func:`type_fragment`) and reused by every tool
whose parameters have that type. :func:`field_schema` and :func:`object_schema` then put together exactly what
``model_json_schema()`` of the generated model gives (``tests/kernel/test_fieldschema.py`` checks that on
generated signatures), so the tool is listed at once and its models are built when it is first called.

What it relies on (pydantic's JSON schema generation, ``pydantic/json_schema.py``):

- a model field's schema is its type's schema; a ``title`` made from the field's name (or alias) by
  ``GenerateJsonSchema.get_title_from_name`` unless the type's schema has one; ``default`` as the default
  encoded to JSON; ``description``; keys sorted;
- a model's schema is ``additionalProperties`` (``false`` for ``extra="forbid"``), ``properties`` in field order,
  ``required`` (left out when empty), ``title`` (the class name) and ``type: object``.

Types whose field schema is *not* their type's schema stay out (``type_fragment`` returns ``None``): anything
with a reference (models, dataclasses, enums, typed dicts: the field holds a ``$ref`` into ``$defs``),
``Annotated[..., Field(...)]`` (a field's own title, alias, examples, ...), and defaults other than ``None``, a
bool, an int, a str or a finite float. Their tools build their models at registration, as before.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.fields import FieldInfo

from kavalai.kernel._definition import OpenForPythonTypes

__all__ = ["REQUIRED", "field_schema", "model_schema", "object_schema", "type_fragment", "type_key", "wrapped_schema"]

#: The default of a required field.
REQUIRED: Final = object()

_ARBITRARY: Final = ConfigDict(arbitrary_types_allowed=True)
_PLAIN_DEFAULTS: Final = frozenset({type(None), bool, int, str})
_LIMIT: Final = 4096  # distinct types remembered; past that the memory starts over
_fragments: dict[Any, dict[str, Any] | None] = {}
_wrapped: dict[Any, tuple[dict[str, Any], list[str]] | None] = {}
_model_schemas: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


def type_key(annotation: Any) -> Any:
    """A hashable key telling types apart as their schemas and validators do.

    ``Union`` and ``Literal`` compare as sets (``int | str == str | int``), but their schemas list the members in
    order and validation breaks ties by order, so the key keeps the order. Raises ``TypeError`` when a part of the
    annotation cannot be hashed.
    """
    if isinstance(annotation, type):
        return annotation
    args = get_args(annotation)
    if not args:
        hash(annotation)
        return annotation
    origin = get_origin(annotation)
    if origin is Literal:
        return (Literal, tuple((type(value), value) for value in args))
    if origin is Annotated:
        return (Annotated, type_key(args[0]), args[1:])
    return (origin, tuple(type_key(arg) for arg in args))


def type_fragment(annotation: Any) -> dict[str, Any] | None:
    """The JSON schema of ``annotation`` as a field type, or ``None`` when a field of it needs a built model.

    Worked out once per type. The dict is shared: callers copy it before adding to it.
    """
    try:
        key = type_key(annotation)
        return _fragments[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable part (a list in Annotated metadata, ...): never shared
        return None
    fragment = _fragment(annotation)
    if len(_fragments) >= _LIMIT:
        _fragments.clear()
        _wrapped.clear()
    _fragments[key] = fragment
    return fragment


def _fragment(annotation: Any) -> dict[str, Any] | None:
    if get_origin(annotation) is Annotated and any(isinstance(m, FieldInfo) for m in get_args(annotation)[1:]):
        return None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            adapter: TypeAdapter[Any] = TypeAdapter(annotation, config=_ARBITRARY)
            if _has_reference(adapter.core_schema):
                return None
            schema = adapter.json_schema(schema_generator=OpenForPythonTypes)
    except Exception:  # a model type (no config allowed), a type pydantic refuses: the model path says why
        return None
    if caught or "$defs" in schema or "$ref" in schema:
        return None  # whatever warned warns again, where the model is built
    return schema


def _has_reference(core: Any) -> bool:
    # Models, dataclasses, enums and typed dicts carry a `ref`: as a field they become `$ref` into `$defs`.
    if isinstance(core, Mapping):
        if "ref" in core or core.get("type") in ("definitions", "definition-ref"):
            return True
        return any(_has_reference(value) for value in core.values())
    if isinstance(core, list | tuple):
        return any(_has_reference(value) for value in core)
    return False


def field_schema(
    fragment: Mapping[str, Any], name: str, default: Any = REQUIRED, description: str | None = None
) -> dict[str, Any] | None:
    """The schema of a field of a type whose schema is ``fragment``, named ``name`` (its alias, if it has one);
    ``None`` when its default is not one that encodes to JSON as it is."""
    schema = dict(fragment)
    if default is not REQUIRED:
        if type(default) not in _PLAIN_DEFAULTS and not (type(default) is float and math.isfinite(default)):
            return None
        schema["default"] = default
    if description:
        schema["description"] = description
    if "title" not in schema:
        schema["title"] = name.title().replace("_", " ").strip()  # GenerateJsonSchema.get_title_from_name
    return dict(sorted(schema.items()))


def object_schema(
    title: str, properties: dict[str, dict[str, Any]], required: list[str], *, forbid_extra: bool
) -> dict[str, Any]:
    """A model's schema, from its fields' schemas."""
    schema: dict[str, Any] = {"additionalProperties": False} if forbid_extra else {}
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["title"] = title
    schema["type"] = "object"
    return schema


def model_schema(model: type[BaseModel]) -> dict[str, Any] | None:
    """The JSON schema of ``model``, worked out once per class (shared: read it, do not change it); ``None`` if
    pydantic cannot give one (the definition then asks again when listed, and says why)."""
    found = _model_schemas.get(model)
    if found is None:
        try:
            found = _model_schemas[model] = model.model_json_schema(schema_generator=OpenForPythonTypes)
        except Exception:
            return None
    return found


def wrapped_schema(annotation: Any, title: str) -> dict[str, Any] | None:
    """The schema of a ``{result: annotation}`` wrapper titled ``title``, or ``None`` as for :func:`type_fragment`.

    Its ``properties`` and ``required`` are shared by every tool returning that type (each has its own title).
    """
    try:
        key = type_key(annotation)
        parts = _wrapped[key]
    except TypeError:
        return None
    except KeyError:
        fragment = type_fragment(annotation)
        result = None if fragment is None else field_schema(fragment, "result")
        parts = _wrapped[key] = None if result is None else ({"result": result}, ["result"])
    if parts is None:
        return None
    return {"properties": parts[0], "required": parts[1], "title": title, "type": "object"}
