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

from pydantic import BaseModel, ValidationError

from kavalai.errors import ToolInputError, ToolOutputError
from kavalai.kernel._definition import ToolDefinition

__all__ = ["coerce_output", "format_validation_errors", "validate_input"]

_MAX_SHOWN = 5


def validate_input(definition: ToolDefinition, arguments: Mapping[str, Any] | BaseModel | None) -> BaseModel:
    """Validate and coerce ``arguments`` into the tool's input model, or raise :class:`ToolInputError`."""
    model = definition.input_model
    try:
        if arguments is None:
            arguments = {}
        elif isinstance(arguments, BaseModel) and not isinstance(arguments, model):
            arguments = arguments.model_dump(exclude_unset=True, by_alias=True)
        # What model_validate does, without its Python wrapper: a third of the cost of validating a small model.
        return model.__pydantic_validator__.validate_python(arguments)  # type: ignore[no-any-return]
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise ToolInputError(
            f"Invalid arguments for {definition.name}: {format_validation_errors(errors)}",
            uri=definition.name,
            errors=errors,
        ) from exc
    except Exception as exc:  # a validator of the input model raised something other than ValueError
        raise ToolInputError(
            f"Invalid arguments for {definition.name}: validating them raised {type(exc).__name__}: {exc}",
            uri=definition.name,
        ) from exc


def coerce_output(definition: ToolDefinition, raw: Any) -> BaseModel:
    """Coerce a tool's raw return value into its output model; raise :class:`ToolOutputError` if it cannot."""
    try:
        validator = definition.output_model.__pydantic_validator__
        return validator.validate_python({"result": raw} if definition.wrapped else raw, from_attributes=True)  # type: ignore[no-any-return]
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problems = format_validation_errors(errors, root="(return value)")
        reason = f"which does not fit its output model {definition.output_model.__name__}: {problems}"
        raise _output_error(definition, raw, reason, errors) from exc
    except Exception as exc:  # a validator of the output model raised something other than ValueError
        raise _output_error(definition, raw, f"and validating it raised {type(exc).__name__}: {exc}", []) from exc


def _output_error(definition: ToolDefinition, raw: Any, reason: str, errors: list[Any]) -> ToolOutputError:
    return ToolOutputError(f"{definition.name} returned {_excerpt(raw)}, {reason}", uri=definition.name, errors=errors)


def format_validation_errors(errors: Sequence[Mapping[str, Any]], *, root: str = "(arguments)") -> str:
    """One line per pydantic error, as ``field.path: message (got value)``, at most five shown.

    Args:
        errors: pydantic's error list.
        root: the label of an error about the whole value rather than one field.
    """
    parts = []
    for error in errors[:_MAX_SHOWN]:
        loc = ".".join(str(part) for part in error.get("loc", ())) or root
        message = str(error.get("msg", "invalid"))
        if error.get("type") == "extra_forbidden":
            message = "unexpected argument, not accepted here"
        elif error.get("type") != "missing" and "input" in error:
            message = f"{message} (got {_excerpt(error['input'])})"
        parts.append(f"{loc}: {message}")
    if len(errors) > _MAX_SHOWN:
        parts.append(f"... and {len(errors) - _MAX_SHOWN} more")
    return "; ".join(parts)


def _excerpt(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # a value whose __repr__ fails must not hide the validation error
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
