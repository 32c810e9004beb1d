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
import re
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError
from pydantic.fields import FieldInfo

from kavalai.errors import ToolRegistrationError
from kavalai.kernel._fieldschema import (
    REQUIRED,
    field_schema,
    model_schema,
    object_schema,
    type_fragment,
    type_key,
    wrapped_schema,
)
from kavalai.kernel._names import RESERVED_FIELD_NAMES, create_model_quietly

__all__ = ["FunctionSchema", "code_of", "function_schema", "qualname", "wrap_output_model"]

_FORBID = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
_FORBID_BY_NAME = ConfigDict(extra="forbid", arbitrary_types_allowed=True, populate_by_name=True)


class FunctionSchema:
    """The models, JSON schemas and description derived from one function.

    The JSON schemas are known at once; the models are built when first used, where the schemas could be put
    together without them (``kernel/_fieldschema.py``: plain types and defaults), else at once.

    Attributes:
        description: the docstring's summary and body, or ``""``.
        input_model: one field per parameter, ``extra="forbid"``.
        output_model: the returned model type, or a model with a single ``result`` field, shared by the functions
            that return the same type (named ``Result[<type>]``).
        wrapped: whether ``output_model`` is the generated wrapper.
        renamed: ``(parameter, field)`` pairs for parameters stored under another field name; empty in the
            common case, when the validated model's ``__dict__`` can be passed as keyword arguments directly.
        is_async: whether calling the function gives a coroutine to await (an ``async def``, a method or callable
            object whose ``__call__`` is one, a partial of one, or a ``functools.wraps`` wrapper of one).
        input_schema: the JSON schema of the arguments, or ``None`` when it is the input model's to give.
        output_schema: the JSON schema of the output (titled after the tool), or ``None`` when it is the output
            model's to give.
    """

    __slots__ = ("_input", "_output", "description", "input_schema", "is_async", "output_schema", "renamed", "wrapped")

    def __init__(
        self,
        *,
        description: str,
        input_model: type[BaseModel] | Callable[[], type[BaseModel]],
        output_model: type[BaseModel] | Callable[[], type[BaseModel]],
        wrapped: bool,
        renamed: tuple[tuple[str, str], ...],
        is_async: bool,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        """``input_model`` and ``output_model``: a model, or what builds it when first used."""
        self.description = description
        self._input = input_model
        self._output = output_model
        self.wrapped = wrapped
        self.renamed = renamed
        self.is_async = is_async
        self.input_schema = input_schema
        self.output_schema = output_schema

    @property
    def input_model(self) -> type[BaseModel]:
        """The input model (built now if it was not yet)."""
        model = self._input
        if not isinstance(model, type):
            model = self._input = model()
        return model

    @property
    def output_model(self) -> type[BaseModel]:
        """The output model (built now if it was not yet)."""
        model = self._output
        if not isinstance(model, type):
            model = self._output = model()
        return model

    @property
    def deferred(self) -> bool:
        """Whether a model is still to be built."""
        return not (isinstance(self._input, type) and isinstance(self._output, type))

    def __repr__(self) -> str:
        return f"<FunctionSchema {self.input_schema and self.input_schema.get('title')!r} wrapped={self.wrapped}>"


def function_schema(
    func: Callable[..., Any],
    *,
    uri: str,
    description: str | None = None,
    local_types: Mapping[str, Any] | None = None,
) -> FunctionSchema:
    """Build the input and output models of ``func``, registered at ``uri`` (or what builds them on first use).

    ``local_types`` are names a string annotation may use besides the function's module globals and closure
    (for a function defined inside another: the types in scope where it was defined).

    Raises:
        ToolRegistrationError: for generator functions, ``*args``/``**kwargs`` or positional-only parameters,
            hints that do not resolve, ``BaseModel`` itself as a type, models that are not fully defined, or types
            pydantic cannot build a model from; each message says what to change. Always here, never when a
            model put off is built.
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
    doc_text, param_docs = parse_doc(inspect.cleandoc(code.__doc__ or "") or _fallback_doc(func))
    model_name = _model_name(uri)
    specs: list[_FieldSpec] = []  # what the input model's fields are made of, when it is built
    renamed: list[tuple[str, str]] = []
    properties: dict[str, dict[str, Any]] | None = {}  # the input schema's, while every field has a plain one
    required: list[str] = []
    for param in signature.parameters.values():
        _check_parameter(param, uri, func)
        field_name = param.name
        if param.name in RESERVED_FIELD_NAMES or param.name.startswith("_"):
            field_name = f"field_{param.name.lstrip('_')}_"
            renamed.append((param.name, field_name))
        annotation = hints.get(param.name, Any)
        _check_not_bare_basemodel(annotation, f"parameter {param.name!r}", uri, func)
        param_doc = param_docs.get(param.name)
        specs.append((field_name, param.name, annotation, param.default, param_doc))
        if properties is not None:
            fragment = type_fragment(annotation)
            empty = param.default is inspect.Parameter.empty
            prop = (
                None
                if fragment is None
                else field_schema(fragment, param.name, REQUIRED if empty else param.default, param_doc)
            )
            if prop is None:
                properties = None
            else:
                properties[param.name] = prop
                if empty:
                    required.append(param.name)
    config = _FORBID_BY_NAME if renamed else _FORBID
    return_hint = hints.get("return", Any) if signature.return_annotation is not inspect.Signature.empty else Any
    _check_not_bare_basemodel(return_hint, "the return annotation", uri, func)
    input_title = f"{model_name}Input"
    build_input = functools.partial(_build_model, uri, func, input_title, config, tuple(specs))
    input_model: type[BaseModel] | Callable[[], type[BaseModel]] = build_input
    input_schema = None
    if properties is None:
        input_model = build_input()  # now: it may be refused, and it gives the schema
    else:
        input_schema = object_schema(input_title, properties, required, forbid_extra=True)
    output_model, output_schema, wrapped = _output(return_hint, f"{model_name}Output", uri, func)
    text = description if description is not None else doc_text
    return FunctionSchema(
        description=text,
        input_model=input_model,
        output_model=output_model,
        wrapped=wrapped,
        renamed=tuple(renamed),
        is_async=inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(code),
        input_schema=input_schema,
        output_schema=output_schema,
    )


#: (field name, parameter name, annotation, default or ``Parameter.empty``, docstring text)
_FieldSpec = tuple[str, str, Any, Any, "str | None"]


def _build_model(
    uri: str, func: Callable[..., Any], name: str, config: ConfigDict, specs: tuple[_FieldSpec, ...]
) -> type[BaseModel]:
    fields = {
        field: _field(param, annotation, default, doc, alias=field != param)
        for field, param, annotation, default, doc in specs
    }
    try:
        model = create_model_quietly(name, __config__=config, **fields)
    except PydanticUserError as exc:
        raise _refused(uri, func, exc) from exc
    _check_complete(model, uri, func)
    return model


def _refused(uri: str, func: Callable[..., Any], exc: Exception) -> ToolRegistrationError:
    return ToolRegistrationError(
        f"Cannot register {uri}: pydantic cannot build a model from the signature of {qualname(func)}: "
        f"{str(exc).splitlines()[0]}",
        uri=uri,
    )


def _output(
    return_hint: Any, title: str, uri: str, func: Callable[..., Any]
) -> tuple[type[BaseModel] | Callable[[], type[BaseModel]], dict[str, Any] | None, bool]:
    """The output model (or what builds it), its schema titled ``title`` (or ``None``), and whether it wraps."""
    bare = _strip_annotated(return_hint)
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        _check_complete(bare, uri, func)
        return bare, model_schema(bare), False
    schema = wrapped_schema(return_hint, title)
    if schema is not None:
        return functools.partial(_shared_wrapper, return_hint, uri, func), schema, True
    model = _shared_wrapper(return_hint, uri, func)
    shared = model_schema(model)
    return model, None if shared is None else {**shared, "title": title}, True


_wrappers: dict[Any, type[BaseModel]] = {}


def _shared_wrapper(annotation: Any, uri: str, func: Callable[..., Any]) -> type[BaseModel]:
    # One `{result: T}` model per return type, not one per tool: 10,000 tools returning `int` share one class.
    try:
        key: Any = type_key(annotation)
        found = _wrappers.get(key)
    except TypeError:  # unhashable: a model of its own
        key, found = None, None
    if found is not None:
        return found
    try:
        model = wrap_output_model(annotation, "", name=f"Result[{_type_name(annotation)}]")
    except PydanticUserError as exc:
        raise _refused(uri, func, exc) from exc
    _check_complete(model, uri, func)
    if key is not None:
        _wrappers[key] = model
    return model


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "").replace("typing_extensions.", "")


def wrap_output_model(annotation: Any, model_name: str, *, name: str | None = None) -> type[BaseModel]:
    """A model with a single required ``result`` field of type ``annotation``, named ``<model_name>Output`` (or
    ``name``)."""
    return create_model_quietly(
        name or f"{model_name}Output",
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


# A line that could start a section in some docstring style: `:param` (Sphinx), `@param` (Epydoc), `Args:`
# (Google), a `----` underline or `.. deprecated::` (NumPy). Without one, every style reads only a description.
_SECTION_LIKE: Final = re.compile(r"^[:@]|:[ \t\r\f\v]*$|^\s*-+\s*$|^\s*\.\.", re.MULTILINE)


def parse_doc(text: str) -> tuple[str, dict[str, str]]:
    """A cleaned docstring's description (summary and body) and its parameters' descriptions, as
    ``docstring_parser`` reads them in whichever style finds the most.

    A docstring with no line that could begin a section is read here, as ``docstring_parser`` would read it (its
    first parser, reST, wins a tie of none found): a tenth of the cost of trying all four styles.
    """
    cleaned = inspect.cleandoc(text)  # as each parser cleans it again: judged as they will read it (a text whose
    # first line was blank is not cleaned twice alike: "\n    :param x: y\nz" begins a section only once cleaned)
    if not _SECTION_LIKE.search(cleaned):
        summary, _, body = cleaned.partition("\n")
        return "\n\n".join(part for part in (summary, body.strip()) if part), {}
    import docstring_parser  # imported on first need: it is not needed to import kavalai

    try:
        doc = docstring_parser.parse(text)
    except Exception:  # it fails on a few malformed docstrings (IndexError, ParseError): keep the text as it is
        return text, {}
    parts = [part for part in (doc.short_description, doc.long_description) if part]
    return "\n\n".join(parts), {p.arg_name: p.description for p in doc.params if p.description}


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


def _field(name: str, annotation: Any, default: Any, doc: str | None, *, alias: bool) -> tuple[Any, Any]:
    if default is inspect.Parameter.empty:
        default = ...
    extra: dict[str, Any] = {}
    explicit = _annotated_description(annotation) or (isinstance(default, FieldInfo) and default.description)
    if doc and not explicit:
        extra["description"] = doc
    if alias:
        extra["alias"] = name
    if extra:
        annotation = Annotated[annotation, Field(**extra)]
    return annotation, default


def _annotated_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(meta, FieldInfo) and meta.description for meta in get_args(annotation)[1:])


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
