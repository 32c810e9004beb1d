"""Validation at the kernel's two boundaries: arguments into the input model, the return value into the output model.

The output rules: a tool whose output model is its own Pydantic model returns an instance of it, or anything that
validates into it (a dict, or an object with the same attributes, such as an instance of another model class or a
dataclass); any other return value is wrapped as ``{"result": value}`` and coerced by the generated model, so a
tool annotated ``-> int`` that returns ``"50"`` gives ``result.result == 50``.

Every failure is raised as :class:`ToolInputError` or :class:`ToolOutputError` naming the tool, including an
exception other than ``ValidationError`` escaping a model's own validator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from kavalai.errors import ToolInputError, ToolOutputError, format_validation_errors, value_excerpt
from kavalai.kernel._definition import ToolDefinition

__all__ = [
    "PLAIN",
    "coerce_output",
    "convert_output",
    "format_validation_errors",
    "input_failed",
    "output_failed",
    "validate_input",
]


def validate_input(definition: ToolDefinition, arguments: Mapping[str, Any] | BaseModel | None) -> BaseModel:
    """Validate and coerce ``arguments`` into the tool's input model, or raise :class:`ToolInputError`."""
    try:
        if type(arguments) is not dict:  # a plain dict, the common case, skips the (ABC) instance checks
            if arguments is None:
                arguments = {}
            elif isinstance(arguments, BaseModel) and not isinstance(arguments, definition.input_model):
                arguments = arguments.model_dump(exclude_unset=True, by_alias=True)
        # What model_validate does, without its Python wrapper: a third of the cost of validating a small model.
        return definition._validate_in(arguments)
    except Exception as exc:
        return input_failed(definition, arguments, exc)


def input_failed(definition: ToolDefinition, arguments: Any, exc: Exception) -> BaseModel:
    """After validating ``arguments`` raised ``exc``: the arguments without metadata keys validated again when
    those were what the model refused, else :class:`ToolInputError` naming the tool, ``exc`` as its cause."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        stripped = _without_metadata_keys(arguments, errors)
        if stripped is not None:
            return validate_input(definition, stripped)
        raise ToolInputError(
            f"Invalid arguments for {definition.name}: {format_validation_errors(errors)} {_FAILED}",
            uri=definition.name,
            errors=errors,
        ) from exc
    # A validator of the input model raised something other than ValueError.
    raise ToolInputError(
        f"Invalid arguments for {definition.name}: validating them raised {type(exc).__name__}: {exc} {_FAILED}",
        uri=definition.name,
    ) from exc


# Kaval.AI 1.0's wording, which its users' tests match on.
_FAILED = "(argument validation failed)"


def _without_metadata_keys(arguments: Any, errors: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The arguments without the ``__dunder__`` keys that YAML loaders and other tools add as metadata
    (``__line__``), when those are what the model refused; else ``None``. Checked only after a failure, so the
    hot path pays nothing, and a misspelt real name stays an error."""
    if not isinstance(arguments, Mapping):
        return None
    metadata = {key for key in arguments if isinstance(key, str) and _is_dunder(key)}
    if not metadata:
        return None
    refused = {e["loc"][0] for e in errors if e.get("type") == "extra_forbidden" and len(e.get("loc", ())) == 1}
    if not refused & metadata:
        return None
    return {key: value for key, value in arguments.items() if key not in metadata}


def _is_dunder(key: str) -> bool:
    return len(key) > 4 and key.startswith("__") and key.endswith("__")


def coerce_output(definition: ToolDefinition, raw: Any) -> BaseModel:
    """Coerce a tool's raw return value into its output model; raise :class:`ToolOutputError` if it cannot."""
    try:
        if not definition.wrapped:
            return definition._validate_out(raw, from_attributes=True)
        if type(raw) in PLAIN:  # nothing in it to read by attributes: the call without keyword arguments
            return definition._validate_out({"result": raw})
        return definition._validate_out({"result": raw}, from_attributes=True)
    except Exception as exc:
        raise output_failed(definition, raw, exc) from exc


def output_failed(definition: ToolDefinition, raw: Any, exc: Exception) -> ToolOutputError:
    """The error to raise (from ``exc``) when coercing the raw return value ``raw`` raised ``exc``."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        problems = format_validation_errors(errors, root="(return value)")
        reason = f"which does not fit its output model {definition.output_model.__name__}: {problems}"
        return _output_error(definition, raw, reason, errors)
    # A validator of the output model raised something other than ValueError.
    return _output_error(definition, raw, f"and validating it raised {type(exc).__name__}: {exc}", [])


#: Types of return values with nothing in them to read by attributes (validated without ``from_attributes``).
PLAIN: frozenset[type] = frozenset({int, float, str, bool, bytes, type(None)})


def _output_error(definition: ToolDefinition, raw: Any, reason: str, errors: list[Any]) -> ToolOutputError:
    message = f"{definition.name} returned {value_excerpt(raw)}, {reason}"
    return ToolOutputError(message, uri=definition.name, errors=errors)


_adapters: dict[Any, TypeAdapter[Any]] = {}


def convert_output(definition: ToolDefinition, output: BaseModel, output_type: Any) -> Any:
    """Validate a call's output into the caller's ``output_type`` (``call_tool(..., output_type=T)``).

    A wrapped output gives its ``.result``; a model output is validated as the model itself (by attributes) or, for
    a non-model type such as ``dict``, as its data. Raises :class:`ToolOutputError` naming the tool and the type.
    """
    if isinstance(output_type, type) and isinstance(output, output_type):
        return output  # the output model itself (or a base of it)
    value: Any = getattr(output, "result", None) if definition.wrapped else output
    if isinstance(output_type, type) and isinstance(value, output_type) and not isinstance(value, bool | int | float):
        return value  # numbers are validated: `int` must not pass a bool, nor `float` an int unconverted
    adapter: TypeAdapter[Any] | None = None
    try:
        adapter = _adapters.get(output_type)
        if adapter is None:
            adapter = _adapters[output_type] = TypeAdapter(output_type)
        if isinstance(value, BaseModel) and not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
            value = value.model_dump(by_alias=True)
        return adapter.validate_python(value, from_attributes=True)
    except ValidationError as exc:
        single = _one_field(output_type, value)
        if single is not None and adapter is not None:  # a bare value, a model of one field: {field: value}
            try:
                return adapter.validate_python({single: value})
            except ValidationError:
                pass  # the error about the value as given says more
        errors = exc.errors(include_url=False)
        problems = format_validation_errors(errors, root="(output)")
        reason = f"which does not fit the output_type {_type_name(output_type)}: {problems}"
        raise _output_error(definition, value, reason, errors) from exc
    except Exception as exc:  # not a type pydantic can validate into, or a validator raised
        problem = f"{type(exc).__name__}: {exc}"
        reason = f"and it cannot be validated into the output_type {_type_name(output_type)}: {problem}"
        raise _output_error(definition, value, reason, []) from exc


def _one_field(output_type: Any, value: Any) -> str | None:
    """The name (alias) of the one field of ``output_type`` when it is a model of exactly one field and ``value`` is
    a bare value (neither a mapping nor a model), else ``None``."""
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        return None
    if isinstance(value, Mapping | BaseModel) or len(output_type.model_fields) != 1:
        return None
    [(name, field)] = output_type.model_fields.items()
    return field.alias or name


def _type_name(expected: Any) -> str:
    return expected.__name__ if isinstance(expected, type) else repr(expected)
