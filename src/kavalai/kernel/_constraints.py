"""JSON Schema keywords -> Pydantic constraints, for :mod:`kavalai.kernel._jsonschema`'s converter.

- ``minLength``/``maxLength`` (and ``minItems``/``maxItems``) -> ``min_length``/``max_length`` when a whole number
  of at least 0; ``pattern`` -> ``pattern`` when pydantic's linear-time engine compiles it (else a warning on the
  ``kavalai`` logger says it is not enforced: Python's backtracking ``re`` is never used);
- ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` (draft 4's boolean form too) -> ``ge``/``le``/
  ``gt``/``lt`` when finite, rounded inwards for integers; ``multipleOf`` above 0 -> ``multiple_of``;
- ``format`` is kept in the model's own JSON schema (``Annotated`` metadata), not enforced.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeGuard

from pydantic import Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, SchemaValidator, core_schema

from kavalai.secrets import get_logger

__all__ = ["constrained", "is_number", "length_constraints", "number_constraints", "string_constraints"]

logger = get_logger("kavalai")

_NUMBER_BOUNDS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}


@dataclass(frozen=True, slots=True)
class _Keywords:
    """``Annotated`` metadata adding keywords the type does not express (such as ``format``) to its JSON schema."""

    items: tuple[tuple[str, Any], ...]

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(core_schema)
        json_schema.update(self.items)
        return json_schema


def constrained(base: Any, constraints: dict[str, Any], schema: Mapping[str, Any]) -> Any:
    """``base`` annotated with ``constraints`` (pydantic ``Field`` keywords) and the schema's ``format``."""
    metadata: list[Any] = [Field(**constraints)] if constraints else []
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt:
        metadata.append(_Keywords((("format", fmt),)))
    return Annotated[(base, *metadata)] if metadata else base


def string_constraints(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A string schema's length bounds and (when the linear-time engine compiles it) its pattern."""
    constraints = length_constraints(schema, "minLength", "maxLength")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and _linear_time_pattern(pattern):
        constraints["pattern"] = pattern
    return constraints


@functools.lru_cache(maxsize=1024)
def _linear_time_pattern(pattern: str) -> bool:
    """Whether pydantic's linear-time engine compiles ``pattern`` (Python's backtracking ``re`` is never used)."""
    try:
        SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))
    except Exception:  # pydantic reports an uncompilable pattern as a SchemaError
        message = "JSON Schema pattern %r is not enforced: the linear-time regex engine cannot compile it"
        logger.warning(message, pattern)
        return False
    return True


def length_constraints(schema: Mapping[str, Any], low: str, high: str) -> dict[str, Any]:
    """The whole-number bounds at ``low`` and ``high`` as ``min_length``/``max_length``."""
    constraints: dict[str, Any] = {}
    for key, target in ((low, "min_length"), (high, "max_length")):
        value = schema.get(key)
        if is_number(value) and value >= 0 and float(value).is_integer():
            constraints[target] = int(value)
    return constraints


def number_constraints(schema: Mapping[str, Any], *, integer: bool) -> dict[str, Any]:
    """A number schema's finite bounds and step, rounded inwards for an ``integer`` schema."""
    constraints: dict[str, Any] = {}
    for key, target in _NUMBER_BOUNDS.items():
        value = schema.get(key)
        if value is True and key.startswith("exclusive"):
            # Draft 4: a boolean that makes minimum/maximum exclusive.
            bound = schema.get("minimum" if key == "exclusiveMinimum" else "maximum")
            if is_number(bound):
                constraints.pop("ge" if target == "gt" else "le", None)
                constraints[target] = _integral(bound, target) if integer else bound
        elif is_number(value) and math.isfinite(value):
            constraints[target] = _integral(value, target) if integer else value
    step = schema.get("multipleOf")
    if is_number(step) and step > 0 and (not integer or float(step).is_integer()):
        constraints["multiple_of"] = int(step) if integer else step
    return constraints


def _integral(value: float, target: str) -> int:
    """An integer bound equivalent to ``value`` for integers (``ge=1.5`` -> ``ge=2``, ``lt=1.5`` -> ``lt=2``)."""
    return math.ceil(value) if target in ("ge", "lt") else math.floor(value)


def is_number(value: Any) -> TypeGuard[int | float]:
    """Whether ``value`` is a JSON number (``bool`` is not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)
