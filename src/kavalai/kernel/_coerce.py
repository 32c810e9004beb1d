"""Validation at the kernel's two boundaries: arguments into the input model, the return value into the output model.

The output rules: a tool whose output model is its own Pydantic model returns an instance of it (or anything
that validates into it, such as a dict); any other return value is wrapped as ``{"result": value}`` and coerced
by the generated model, so a tool annotated ``-> int`` that returns ``"50"`` gives ``result.result == 50``.
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
            return model.model_validate({})
        if isinstance(arguments, BaseModel) and not isinstance(arguments, model):
            arguments = arguments.model_dump(exclude_unset=True, by_alias=True)
        return model.model_validate(arguments)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise ToolInputError(
            f"Invalid arguments for {definition.name}: {format_validation_errors(errors)}",
            uri=definition.name,
            errors=errors,
        ) from exc


def coerce_output(definition: ToolDefinition, raw: Any) -> BaseModel:
    """Coerce a tool's raw return value into its output model; raise :class:`ToolOutputError` if it cannot."""
    try:
        if definition.wrapped:
            return definition.output_model.model_validate({"result": raw})
        return definition.output_model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise ToolOutputError(
            f"{definition.name} returned {_excerpt(raw)}, which does not fit its output model "
            f"{definition.output_model.__name__}: {format_validation_errors(errors)}",
            uri=definition.name,
            errors=errors,
        ) from exc


def format_validation_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    """One line per pydantic error, as ``field.path: message (got value)``, at most five shown."""
    parts = []
    for error in errors[:_MAX_SHOWN]:
        loc = ".".join(str(part) for part in error.get("loc", ())) or "(arguments)"
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
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
