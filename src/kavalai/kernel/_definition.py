"""What the kernel knows about one tool: its URI, models, schemas, description and how to run it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, SchemaValidator

from kavalai.kernel._seconds import limit_seconds
from kavalai.kernel._uri import ToolURI

__all__ = ["FIELDS_CALL", "Invoker", "OpenForPythonTypes", "ToolDefinition"]

#: Runs a tool: receives the validated input model instance, returns the raw value that the output model coerces.
Invoker = Callable[[BaseModel], Awaitable[Any]]

#: The attribute an :data:`Invoker` may carry when all it does is call a function with the input model's fields as
#: keyword arguments (``func(**args.__dict__)``): that function. The kernel then calls it itself when no middleware
#: wraps the call, a Python frame less per call. Read from ``invoke`` when the definition is made, so a definition
#: given another ``invoke`` (``dataclasses.replace``) never keeps the old one's.
FIELDS_CALL = "kavalai_fields_call"


@dataclass(frozen=True, slots=True, eq=False)
class ToolDefinition:
    """One registered tool.

    Adapters build these; the kernel validates arguments with ``input_model``, awaits ``invoke`` and coerces the
    raw value with ``output_model``. Frozen: to change a tool, publish a new definition (``dataclasses.replace``)
    with ``registry.add_tool(..., replace=True)``.

    Attributes:
        uri: the tool's parsed URI.
        description: what the tool does, for people and models.
        input_model: the Pydantic model the arguments are validated into.
        output_model: the Pydantic model the return value is coerced into.
        invoke: the adapter's coroutine function that runs the tool on a validated input model instance.
        wrapped: ``True`` when the output model is a wrapper with a single ``result`` field, so the raw value is
            validated as ``{"result": value}``; ``False`` when the raw value is validated as the output model
            itself. Left out (``None``), it is worked out from the output model: ``True`` when ``result`` is its
            only field, else ``False`` (a model of its own with a ``result`` field among others is the output
            itself, not a wrapper).
        timeout: the default timeout in seconds for a call, or ``None`` for no limit.
        input_schema: the JSON schema shown to models; defaults to ``input_model``'s. MCP tools keep the schema the
            server sent, as it was sent.
        output_schema: the JSON schema of the output; defaults to ``output_model``'s.
        metadata: adapter-specific facts (HTTP method, server name, ...), JSON-serialisable.
    """

    uri: ToolURI
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    invoke: Invoker
    wrapped: bool | None = None
    timeout: float | None = None
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    _uri_str: str = field(init=False, repr=False)
    _schemas: dict[str, dict[str, Any]] = field(init=False, repr=False, compare=False)
    # The models' validate_python, looked up once (every call's arguments and return value go through them).
    _validate_in: Callable[..., BaseModel] = field(init=False, repr=False, compare=False)
    _validate_out: Callable[..., BaseModel] = field(init=False, repr=False, compare=False)
    # invoke's FIELDS_CALL, or None: what the kernel calls with the input model's fields when nothing wraps the call.
    _fields_call: Callable[..., Awaitable[Any]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived once; object.__setattr__ because the dataclass is frozen.
        object.__setattr__(self, "_uri_str", str(self.uri))
        if self.wrapped is None:
            object.__setattr__(self, "wrapped", set(self.output_model.model_fields) == {"result"})
        object.__setattr__(self, "timeout", limit_seconds(self.timeout, what=f"timeout of {self._uri_str}"))
        object.__setattr__(self, "_schemas", {})
        object.__setattr__(self, "_validate_in", _validator(self.input_model))
        object.__setattr__(self, "_validate_out", _validator(self.output_model))
        object.__setattr__(self, "_fields_call", getattr(self.invoke, FIELDS_CALL, None))

    @property
    def name(self) -> str:
        """The tool's URI as a string, e.g. ``"python://fs.ls"``."""
        return self._uri_str

    @property
    def kind(self) -> str:
        """The tool kind: the URI scheme (``"python"``, ``"rest"`` or ``"mcp"``)."""
        return self.uri.scheme

    def get_input_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments (a field of a type JSON cannot describe is left open: ``{}``)."""
        if self.input_schema is not None:
            return self.input_schema
        schema = self._schemas.get("input")
        if schema is None:  # built on first use: most tools of a large catalog are never described
            schema = self._schemas["input"] = self.input_model.model_json_schema(schema_generator=OpenForPythonTypes)
        return schema

    def get_output_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's output model (a type JSON cannot describe is left open: ``{}``)."""
        if self.output_schema is not None:
            return self.output_schema
        schema = self._schemas.get("output")
        if schema is None:
            schema = self._schemas["output"] = self.output_model.model_json_schema(schema_generator=OpenForPythonTypes)
        return schema

    def describe(self) -> dict[str, Any]:
        """The JSON-serialisable description agents see: name, description, inputSchema, outputSchema."""
        return {
            "name": self._uri_str,
            "description": self.description,
            "inputSchema": self.get_input_schema(),
            "outputSchema": self.get_output_schema(),
        }


def _validator(model: type[BaseModel]) -> Callable[..., BaseModel]:
    """``model``'s ``validate_python``; looked up on every use while the model is not complete yet (pydantic
    builds its validator when the types it refers to are defined)."""
    validator = model.__pydantic_validator__
    if isinstance(validator, SchemaValidator):
        return validator.validate_python

    def validate(value: Any, **options: Any) -> BaseModel:
        return model.__pydantic_validator__.validate_python(value, **options)  # type: ignore[no-any-return]

    return validate


class OpenForPythonTypes(GenerateJsonSchema):
    """Pydantic's schema generator, except that a type JSON Schema cannot express (an arbitrary class accepted as
    an instance, a callable) becomes the open schema ``{}`` instead of failing every tool listing."""

    def handle_invalid_for_json_schema(self, schema: CoreSchema | Any, error_info: str) -> JsonSchemaValue:
        return {}
