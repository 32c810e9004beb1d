"""Signature -> input and output models."""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import sys
import typing
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Generic, Literal, TypeVar

import pytest
import typing_extensions
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from kavalai import ToolRegistrationError
from kavalai.kernel._schema import function_schema, parse_doc

URI = "python://t"
T = TypeVar("T")


class Point(BaseModel):
    x: int
    y: int


def test_each_parameter_becomes_a_field() -> None:
    def f(a: int, b: str = "x", c=None, *, d: list[int] | None = None) -> None: ...

    schema = function_schema(f, uri=URI)
    fields = schema.input_model.model_fields
    assert list(fields) == ["a", "b", "c", "d"]
    assert fields["a"].is_required()
    assert fields["b"].default == "x"
    assert fields["c"].annotation is Any
    assert not fields["d"].is_required()
    assert schema.input_model.model_validate({"a": "3"}).a == 3


def test_unknown_arguments_are_rejected() -> None:
    def f(a: int) -> int:
        return a

    model = function_schema(f, uri=URI).input_model
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate({"a": 1, "b": 2})


def test_google_docstring_gives_descriptions() -> None:
    def f(path: str, depth: int = 1) -> list[str]:
        """List a folder.

        Lists entries below the path.

        Args:
            path: The folder to list.
            depth: How deep to go.
        """
        return []

    schema = function_schema(f, uri=URI)
    assert schema.description == "List a folder.\n\nLists entries below the path."
    props = schema.input_model.model_json_schema()["properties"]
    assert props["path"]["description"] == "The folder to list."
    assert props["depth"]["description"] == "How deep to go."


def test_numpy_docstring_gives_descriptions() -> None:
    def f(name: str) -> str:
        """Greet someone.

        Parameters
        ----------
        name : str
            Who to greet.
        """
        return name

    props = function_schema(f, uri=URI).input_model.model_json_schema()["properties"]
    assert props["name"]["description"] == "Who to greet."


def test_sphinx_docstring_gives_descriptions() -> None:
    def f(name: str) -> str:
        """Greet someone.

        :param name: Who to greet.
        """
        return name

    schema = function_schema(f, uri=URI)
    assert schema.description == "Greet someone."
    assert schema.input_model.model_json_schema()["properties"]["name"]["description"] == "Who to greet."


def test_annotated_field_description_wins_over_docstring() -> None:
    def f(q: Annotated[str, Field(description="From Field.", min_length=2)]) -> str:
        """Search.

        Args:
            q: From the docstring.
        """
        return q

    model = function_schema(f, uri=URI).input_model
    assert model.model_json_schema()["properties"]["q"]["description"] == "From Field."
    with pytest.raises(ValidationError, match="at least 2 characters"):
        model.model_validate({"q": "x"})


def test_explicit_description_overrides_docstring() -> None:
    def f() -> None:
        """Docstring text."""

    assert function_schema(f, uri=URI, description="Given.").description == "Given."


def test_model_parameters_receive_instances() -> None:
    def f(p: Point, ps: list[Point]) -> int:
        return 0

    model = function_schema(f, uri=URI).input_model
    value = model.model_validate({"p": {"x": 1, "y": 2}, "ps": [{"x": 3, "y": "4"}]})
    assert isinstance(value.p, Point)
    assert value.ps == [Point(x=3, y=4)]


def test_returned_model_is_used_as_is() -> None:
    def f() -> Point:
        return Point(x=0, y=0)

    schema = function_schema(f, uri=URI)
    assert schema.output_model is Point
    assert schema.wrapped is False


@pytest.mark.parametrize(
    ("hint", "value", "expected"),
    [(int, "50", 50), (list[str], ("a",), ["a"]), (Literal["a", "b"], "b", "b"), (None, None, None)],
)
def test_other_returns_are_wrapped_in_result(hint: Any, value: Any, expected: Any) -> None:
    def f() -> None: ...

    f.__annotations__["return"] = hint
    schema = function_schema(f, uri="python://math.percent")
    assert schema.wrapped is True
    assert schema.output_schema is not None
    assert schema.output_schema["title"] == "MathPercentOutput"  # what is listed names the tool
    assert schema.output_model.__name__.startswith("Result[")  # the model is shared by every tool returning hint
    assert schema.output_model.model_validate({"result": value}).result == expected


def test_tools_returning_the_same_type_share_one_wrapper_and_order_matters() -> None:
    def f() -> int | str: ...

    def g() -> int | str: ...

    def h() -> str | int: ...  # equal to `int | str` as a set, but validated and listed in its own order

    first, second, third = (function_schema(x, uri=URI) for x in (f, g, h))
    assert first.output_model is second.output_model
    assert first.output_model.__name__ == "Result[int | str]"
    assert third.output_model is not first.output_model
    assert third.output_model.model_validate({"result": "1"}).result == "1"
    assert [s["type"] for s in third.output_schema["properties"]["result"]["anyOf"]] == ["string", "integer"]


def test_missing_return_hint_is_any() -> None:
    def f():
        return object()

    schema = function_schema(f, uri=URI)
    marker = object()
    assert schema.output_model.model_validate({"result": marker}).result is marker


def test_parameters_shadowing_basemodel_keep_their_names() -> None:
    def f(json: str, schema: int = 1, _private: bool = False, model_dump: int = 0) -> str:
        return json

    built = function_schema(f, uri=URI)
    # Only names pydantic cannot take are renamed; `json` and `schema` shadow deprecated v1 methods and stay.
    assert dict(built.renamed) == {"_private": "field_private_", "model_dump": "field_model_dump_"}
    props = built.input_model.model_json_schema()["properties"]
    assert set(props) == {"json", "schema", "_private", "model_dump"}
    value = built.input_model.model_validate({"json": "j", "_private": True, "model_dump": 2})
    assert value.json == "j"
    assert value.schema == 1
    assert value.model_dump() == {"json": "j", "schema": 1, "field_private_": True, "field_model_dump_": 2}


def test_schema_properties_named_like_deprecated_methods_are_read_by_their_names() -> None:
    from kavalai.kernel import output_model_from_json_schema

    model, _ = output_model_from_json_schema(
        {"type": "object", "properties": {"json": {"type": "string"}, "dict": {"type": "integer"}}}, "Out"
    )
    value = model.model_validate({"json": "text", "dict": 3})
    assert (value.json, value.dict) == ("text", 3)  # type: ignore[attr-defined]


def test_async_functions_are_detected() -> None:
    async def f() -> int:
        return 1

    def g() -> int:
        return 1

    assert function_schema(f, uri=URI).is_async
    assert not function_schema(g, uri=URI).is_async


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(*items: int) -> None: ...", "takes *items"),
        ("def f(**options: int) -> None: ...", "takes **options"),
        ("def f(a: int, /) -> None: ...", "positional-only"),
        ("def f(a: 'Missing') -> None: ...", "do not resolve"),
    ],
)
def test_unsupported_signatures_say_what_to_do(source: str, fragment: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolRegistrationError) as info:
        function_schema(namespace["f"], uri=URI)
    assert fragment in str(info.value)
    assert URI in str(info.value)


# ------------------------------------------------------------------------------------ callables other than def


def _later(p: LaterDefined) -> LaterDefined:
    """A forward reference to a class defined below, resolved at registration."""
    return p


class LaterDefined(BaseModel):
    v: int


def test_forward_references_resolve_against_the_module() -> None:
    schema = function_schema(_later, uri=URI)
    assert schema.output_model is LaterDefined
    assert isinstance(schema.input_model.model_validate({"p": {"v": "1"}}).p, LaterDefined)


class Doubler:
    """Doubles numbers (the class docstring)."""

    def __call__(self, x: int) -> int:
        """Double x.

        Args:
            x: The number.
        """
        return 2 * x


class AsyncCallable:
    """Returns x (asynchronously)."""

    async def __call__(self, x: int) -> int:
        return x


def test_callable_objects_are_described_by_their_call_method() -> None:
    schema = function_schema(Doubler(), uri=URI)
    assert list(schema.input_model.model_fields) == ["x"]
    assert schema.description == "Double x."
    assert schema.input_model.model_json_schema()["properties"]["x"]["description"] == "The number."
    assert not schema.is_async
    other = function_schema(AsyncCallable(), uri=URI)
    assert other.is_async
    assert other.description == "Returns x (asynchronously)."


def _base(a: int, b: str, c: float = 1.0) -> str:
    """Join things.

    Args:
        b: The b.
    """
    return f"{a}{b}{c}"


async def _abase(a: int, b: int) -> int:
    return a - b


def test_partials_leave_out_the_fixed_arguments_and_keep_the_function_docs() -> None:
    schema = function_schema(functools.partial(_base, 1), uri=URI)
    assert list(schema.input_model.model_fields) == ["b", "c"]
    assert schema.description == "Join things."
    assert schema.input_model.model_json_schema()["properties"]["b"]["description"] == "The b."
    keyword = function_schema(functools.partial(_abase, b=1), uri=URI)
    assert keyword.input_model.model_validate({"a": 3}).model_dump() == {"a": 3, "b": 1}
    assert keyword.is_async


def test_wrappers_are_async_when_they_or_what_they_wrap_are() -> None:
    def sync_wrapper(f: Any) -> Any:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        return wrapper

    def async_wrapper(f: Any) -> Any:
        @functools.wraps(f)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        return wrapper

    assert function_schema(sync_wrapper(_abase), uri=URI).is_async
    wrapped_sync = function_schema(async_wrapper(_base), uri=URI)
    assert wrapped_sync.is_async
    assert list(wrapped_sync.input_model.model_fields) == ["a", "b", "c"]


def _numbers(n: int) -> Iterator[int]:
    yield from range(n)


async def _anumbers(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


@pytest.mark.parametrize(
    ("func", "fragment"),
    [(_numbers, "_numbers is a generator function"), (_anumbers, "_anumbers is an async generator function")],
)
def test_generator_functions_are_refused(func: Any, fragment: str) -> None:
    with pytest.raises(ToolRegistrationError) as info:
        function_schema(func, uri=URI)
    assert str(info.value).startswith(f"Cannot register {URI}: {fragment}, but a tool returns one value;")
    assert "return the list" in str(info.value) or "return a list" in str(info.value)


class StdlibTypedDict(typing.TypedDict):
    a: int


class ExtTypedDict(typing_extensions.TypedDict):
    a: int


def test_a_type_pydantic_refuses_is_a_registration_error_that_says_why() -> None:
    def f(td: StdlibTypedDict) -> None: ...

    if sys.version_info >= (3, 12):  # pydantic takes typing.TypedDict from Python 3.12 on
        assert function_schema(f, uri=URI).input_model.model_validate({"td": {"a": "2"}}).td == {"a": 2}
    else:
        with pytest.raises(ToolRegistrationError) as info:
            function_schema(f, uri=URI)
        assert str(info.value).startswith(f"Cannot register {URI}: pydantic cannot build a model from the signature")
        assert "typing_extensions.TypedDict" in str(info.value)

    def g(td: ExtTypedDict) -> int:
        return td["a"]

    assert function_schema(g, uri=URI).input_model.model_validate({"td": {"a": "2"}}).td == {"a": 2}


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(m: BaseModel) -> None: ...", "parameter 'm' of f is BaseModel itself"),
        ("def f() -> BaseModel: ...", "the return annotation of f is BaseModel itself"),
    ],
)
def test_bare_basemodel_is_refused(source: str, fragment: str) -> None:
    namespace: dict[str, Any] = {"BaseModel": BaseModel}
    exec(source, namespace)
    with pytest.raises(ToolRegistrationError) as info:
        function_schema(namespace["f"], uri=URI)
    assert fragment in str(info.value)
    assert "Annotate the concrete model class" in str(info.value)


def test_a_docstring_the_parser_cannot_read_becomes_the_description() -> None:
    def f(x: int) -> int:
        """Summary line.

        :\t:
        """
        return x

    description = function_schema(f, uri=URI).description
    assert description.startswith("Summary line.")


class Shade(enum.Enum):
    LIGHT = "light"
    DARK = "dark"


@dataclasses.dataclass
class Size:
    w: int
    h: int = 1


class Box(BaseModel, Generic[T]):
    item: T


def test_rich_parameter_types() -> None:
    def f(
        shade: Shade,
        size: Size,
        box: Box[int],
        either: int | str = 0,
        maybe: int | None = None,
        tags: list[str] = Field(default_factory=list),  # noqa: B008 - a Field default is how a tool declares one
        level: int = Field(3, ge=1, le=5, description="How much."),
    ) -> None: ...

    model = function_schema(f, uri=URI).input_model
    value = model.model_validate({"shade": "dark", "size": {"w": "2"}, "box": {"item": "4"}, "either": "x"})
    assert value.shade is Shade.DARK
    assert value.size == Size(w=2, h=1)
    assert value.box == Box[int](item=4)
    assert (value.either, value.maybe, value.tags, value.level) == ("x", None, [], 3)
    assert model.model_json_schema()["properties"]["level"]["description"] == "How much."
    with pytest.raises(ValidationError, match="less than or equal to 5"):
        model.model_validate({"shade": "dark", "size": {"w": 1}, "box": {"item": 1}, "level": 6})


class NotFullyDefined(BaseModel):
    child: Undefined  # type: ignore[name-defined]  # noqa: F821 - never defined, on purpose


@pytest.mark.parametrize(
    "source",
    [
        "def f(node: NotFullyDefined) -> None: ...",
        "def f() -> NotFullyDefined: ...",
        "def f() -> list[NotFullyDefined]: ...",
    ],
)
def test_a_model_that_is_not_fully_defined_is_refused_at_registration(source: str) -> None:
    namespace: dict[str, Any] = {"NotFullyDefined": NotFullyDefined}
    exec(source, namespace)
    with pytest.raises(ToolRegistrationError) as info:
        function_schema(namespace["f"], uri=URI)
    assert str(info.value) == (
        f"Cannot register {URI}: a model in the signature of f is not fully defined (name 'Undefined' is not "
        "defined). Define every type it names before registering the tool."
    )


_DOC_PIECES = st.sampled_from(
    [
        "Summary",
        " line",
        ".",
        ":",
        "@",
        "-",
        "--",
        "..",
        " ",
        "\n",
        "\n\n",
        "    ",
        "\t",
        "Args",
        "Returns",
        "Parameters",
        "x",
        ": y",
        ":param x:",
        "@param x:",
        "deprecated",
        "Example",
        "é",
        "Parameters\n----------\nx : int\n    The x.\n",
        "\nArgs:\n    x: The x.\n",
        ".. deprecated:: 1.0\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_DOC_PIECES, max_size=14))
@example(pieces=["\n", "    ", ":param x:", "Summary", "\n", "Summary"])  # a field only once cleaned again
def test_docstrings_read_without_the_parser_read_as_the_parser_reads_them(pieces: list[str]) -> None:
    import docstring_parser

    text = inspect.cleandoc("".join(pieces))
    description, params = parse_doc(text)
    try:
        doc = docstring_parser.parse(text)
    except Exception:
        assert (description, params) == (text, {})
        return
    expected = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
    assert description == expected
    assert params == {p.arg_name: p.description for p in doc.params if p.description}
