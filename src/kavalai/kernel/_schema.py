"""Python signature -> input and output models: the one place that builds models from functions.

What it relies on:

- ``inspect.signature`` for the parameters (it follows ``functools.wraps``, drops the bound ``self`` of a method
  and the arguments a ``functools.partial`` fixes) and ``typing.get_type_hints(include_extras=True)`` on the code
  that runs (the unwrapped function, the partial's function, a callable object's ``__call__``), so string
  annotations and ``from __future__ import annotations`` resolve against that code's module globals.
- ``docstring_parser`` for Google, NumPy, Sphinx and Epydoc docstrings: the short (and long) description becomes
  the tool description, each parameter's text its field description. A docstring it cannot parse becomes the
  description as it stands.
- ``Annotated[T, Field(...)]`` and ``param: T = Field(...)`` are passed through to pydantic unchanged; an explicit
  ``Field(description=...)`` wins over the docstring's text.
- Parameter names that would shadow a ``BaseModel`` attribute (``json``, ``schema``, ``copy``, ...) or start with
  an underscore get an internal field name and keep the parameter name as their alias, so the arguments dict and
  the JSON schema still use the parameter's own name.
- Types pydantic cannot validate from JSON (an arbitrary class) are accepted as instances of that class
  (``arbitrary_types_allowed``): such a tool can be called from Python, and its JSON schema leaves the field open.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError
from pydantic.fields import FieldInfo

from kavalai.errors import ToolRegistrationError
from kavalai.kernel._names import RESERVED_FIELD_NAMES, create_model_quietly

if TYPE_CHECKING:
    import docstring_parser

__all__ = ["FunctionSchema", "code_of", "function_schema", "qualname", "wrap_output_model"]

_FORBID = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
_FORBID_BY_NAME = ConfigDict(extra="forbid", arbitrary_types_allowed=True, populate_by_name=True)


@dataclass(frozen=True, slots=True)
class FunctionSchema:
    """The models and description derived from one function.

    Attributes:
        description: the docstring's summary and body, or ``""``.
        input_model: one field per parameter, ``extra="forbid"``.
        output_model: the returned model type, or a generated model with a single ``result`` field.
        wrapped: whether ``output_model`` is the generated wrapper.
        renamed: ``(parameter, field)`` pairs for parameters stored under another field name; empty in the
            common case, when the validated model's ``__dict__`` can be passed as keyword arguments directly.
        is_async: whether calling the function gives a coroutine to await (an ``async def``, a method or callable
            object whose ``__call__`` is one, a partial of one, or a ``functools.wraps`` wrapper of one).
    """

    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    wrapped: bool
    renamed: tuple[tuple[str, str], ...]
    is_async: bool


def function_schema(
    func: Callable[..., Any],
    *,
    uri: str,
    description: str | None = None,
    local_types: Mapping[str, Any] | None = None,
) -> FunctionSchema:
    """Build the input and output models of ``func``, registered at ``uri``.

    ``local_types`` are names a string annotation may use besides the function's module globals and closure
    (for a function defined inside another: the types in scope where it was defined).

    Raises:
        ToolRegistrationError: for generator functions, ``*args``/``**kwargs`` or positional-only parameters,
            hints that do not resolve, ``BaseModel`` itself as a type, models that are not fully defined, or types
            pydantic cannot build a model from; each message says what to change.
    """
    code = code_of(func)
    _check_not_generator(func, code, uri)
    try:
        signature = inspect.signature(func)
        hints = _type_hints(code, local_types)
    except (NameError, TypeError, ValueError) as exc:
        raise ToolRegistrationError(
            f"Cannot register {uri}: the signature or type hints of {qualname(func)} do not resolve ({exc}). "
            "Define or import every type the signature names at module level (or, for a function defined inside "
            "another, before it is decorated).",
            uri=uri,
        ) from exc
    doc = _parse_doc(inspect.cleandoc(code.__doc__ or "") or _fallback_doc(func))
    param_docs = {p.arg_name: p.description for p in doc.params if p.description}
    model_name = _model_name(uri)
    fields: dict[str, Any] = {}
    renamed: list[tuple[str, str]] = []
    for param in signature.parameters.values():
        _check_parameter(param, uri, func)
        field_name = param.name
        if param.name in RESERVED_FIELD_NAMES or param.name.startswith("_"):
            field_name = f"field_{param.name.lstrip('_')}_"
            renamed.append((param.name, field_name))
        annotation = hints.get(param.name, Any)
        _check_not_bare_basemodel(annotation, f"parameter {param.name!r}", uri, func)
        fields[field_name] = _field(param, annotation, param_docs.get(param.name), alias=field_name != param.name)
    config = _FORBID_BY_NAME if renamed else _FORBID
    return_hint = hints.get("return", Any) if signature.return_annotation is not inspect.Signature.empty else Any
    _check_not_bare_basemodel(return_hint, "the return annotation", uri, func)
    try:
        input_model = create_model_quietly(f"{model_name}Input", __config__=config, **fields)
        output_model, wrapped = _output_model(return_hint, model_name)
    except PydanticUserError as exc:
        raise ToolRegistrationError(
            f"Cannot register {uri}: pydantic cannot build a model from the signature of {qualname(func)}: "
            f"{str(exc).splitlines()[0]}",
            uri=uri,
        ) from exc
    for model in (input_model, output_model):
        _check_complete(model, uri, func)
    text = description if description is not None else _doc_description(doc)
    return FunctionSchema(
        description=text,
        input_model=input_model,
        output_model=output_model,
        wrapped=wrapped,
        renamed=tuple(renamed),
        is_async=inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(code),
    )


def wrap_output_model(annotation: Any, model_name: str) -> type[BaseModel]:
    """A model with a single required ``result`` field of type ``annotation``."""
    return create_model_quietly(
        f"{model_name}Output",
        __config__=ConfigDict(arbitrary_types_allowed=True),
        result=(annotation, Field(...)),
    )


def _type_hints(code: Callable[..., Any], local_types: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        return typing.get_type_hints(code, include_extras=True)
    except NameError:
        # A string annotation naming a local type: look in the closure, then where the function was defined.
        try:
            scope = dict(inspect.getclosurevars(code).nonlocals)
        except TypeError:  # not a Python function (a builtin's __call__, ...)
            scope = {}
        scope.update(local_types or {})
        if not scope:
            raise
        return typing.get_type_hints(code, localns=scope, include_extras=True)


def code_of(func: Callable[..., Any]) -> Callable[..., Any]:
    """The code that runs when ``func`` is called: its hints and docstring describe the tool."""
    code: Any = inspect.unwrap(func)
    while isinstance(code, functools.partial):
        code = inspect.unwrap(code.func)
    if inspect.isroutine(code):
        return typing.cast(Callable[..., Any], code)
    if inspect.isclass(code):
        return typing.cast(Callable[..., Any], code.__init__)
    return typing.cast(Callable[..., Any], inspect.unwrap(type(code).__call__))


def _fallback_doc(func: Callable[..., Any]) -> str:
    # A callable object documented on its class, or a method on the method it overrides; never functools.partial's.
    if isinstance(func, functools.partial):
        return ""
    return inspect.getdoc(func) or ""


def _parse_doc(text: str) -> docstring_parser.Docstring:
    import docstring_parser  # imported on first registration: it is not needed to import kavalai

    try:
        return docstring_parser.parse(text)
    except Exception:  # it fails on a few malformed docstrings (IndexError, ParseError): keep the text as it is
        doc = docstring_parser.Docstring()
        doc.short_description = text
        return doc


def _output_model(return_hint: Any, model_name: str) -> tuple[type[BaseModel], bool]:
    bare = _strip_annotated(return_hint)
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        return bare, False
    return wrap_output_model(return_hint, model_name), True


def _strip_annotated(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _check_not_generator(func: Callable[..., Any], code: Callable[..., Any], uri: str) -> None:
    if inspect.isasyncgenfunction(func) or inspect.isasyncgenfunction(code):
        kind, fix = "an async generator", "collect the items (`[x async for x in ...]`) and return the list"
    elif inspect.isgeneratorfunction(func) or inspect.isgeneratorfunction(code):
        kind, fix = "a generator", "return a list (`return list(...)`)"
    else:
        return
    raise ToolRegistrationError(
        f"Cannot register {uri}: {qualname(func)} is {kind} function, but a tool returns one value; {fix} instead.",
        uri=uri,
    )


def _check_not_bare_basemodel(hint: Any, what: str, uri: str, func: Callable[..., Any]) -> None:
    if _strip_annotated(hint) is BaseModel:
        raise ToolRegistrationError(
            f"Cannot register {uri}: {what} of {qualname(func)} is BaseModel itself, which cannot be validated. "
            "Annotate the concrete model class (or `Any`).",
            uri=uri,
        )


def _check_complete(model: type[BaseModel], uri: str, func: Callable[..., Any]) -> None:
    # A model naming a type that is not defined yet would fail on every call and every tool listing: fail here.
    if model.__pydantic_complete__:
        return
    try:
        model.model_rebuild(raise_errors=True)
    except (PydanticUserError, NameError) as exc:
        raise ToolRegistrationError(
            f"Cannot register {uri}: a model in the signature of {qualname(func)} is not fully defined "
            f"({str(exc).splitlines()[0]}). Define every type it names before registering the tool.",
            uri=uri,
        ) from exc


def _check_parameter(param: inspect.Parameter, uri: str, func: Callable[..., Any]) -> None:
    name = qualname(func)
    if param.kind is inspect.Parameter.VAR_POSITIONAL:
        raise ToolRegistrationError(
            f"Cannot register {uri}: {name} takes *{param.name}. A tool's arguments are named fields; "
            "replace it with a parameter such as `items: list[...]`.",
            uri=uri,
        )
    if param.kind is inspect.Parameter.VAR_KEYWORD:
        raise ToolRegistrationError(
            f"Cannot register {uri}: {name} takes **{param.name}. A tool's arguments are named fields; "
            "declare each one, or take a single `options: dict[str, Any]` parameter.",
            uri=uri,
        )
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise ToolRegistrationError(
            f"Cannot register {uri}: parameter {param.name!r} of {name} is positional-only. "
            "Tools are called with keyword arguments; remove the '/' from the signature.",
            uri=uri,
        )


def _field(param: inspect.Parameter, annotation: Any, doc: str | None, *, alias: bool) -> tuple[Any, Any]:
    default: Any = ... if param.default is inspect.Parameter.empty else param.default
    extra: dict[str, Any] = {}
    explicit = _annotated_description(annotation) or (isinstance(default, FieldInfo) and default.description)
    if doc and not explicit:
        extra["description"] = doc
    if alias:
        extra["alias"] = param.name
    if extra:
        annotation = Annotated[annotation, Field(**extra)]
    return annotation, default


def _annotated_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(meta, FieldInfo) and meta.description for meta in get_args(annotation)[1:])


def _doc_description(doc: docstring_parser.Docstring) -> str:
    parts = [part for part in (doc.short_description, doc.long_description) if part]
    return "\n\n".join(parts)


def _model_name(uri: str) -> str:
    tail = uri.split("://", 1)[-1]
    words = "".join(c if c.isalnum() else " " for c in tail).split()
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Tool"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"Tool{name}"
    return name


def qualname(func: Callable[..., Any]) -> str:
    """A readable name of ``func`` for messages: its qualified name, or its class's for a callable object."""
    if isinstance(func, functools.partial):
        return f"functools.partial({qualname(func.func)}, ...)"
    return getattr(func, "__qualname__", None) or type(func).__qualname__
