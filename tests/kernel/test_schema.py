"""Signature -> input and output models."""

from __future__ import annotations

import inspect
import keyword
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from kavalai import ToolRegistrationError
from kavalai.kernel._schema import function_schema

URI = "python://t"


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
    assert schema.output_model.__name__ == "MathPercentOutput"
    assert schema.output_model.model_validate({"result": value}).result == expected


def test_missing_return_hint_is_any() -> None:
    def f():
        return object()

    schema = function_schema(f, uri=URI)
    marker = object()
    assert schema.output_model.model_validate({"result": marker}).result is marker


def test_parameters_shadowing_basemodel_keep_their_names() -> None:
    def f(json: str, schema: int = 1, _private: bool = False) -> str:
        return json

    built = function_schema(f, uri=URI)
    assert dict(built.renamed) == {
        "json": "field_json_",
        "schema": "field_schema_",
        "_private": "field_private_",
    }
    props = built.input_model.model_json_schema()["properties"]
    assert set(props) == {"json", "schema", "_private"}
    value = built.input_model.model_validate({"json": "j", "_private": True})
    assert value.field_json_ == "j"


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


_types = st.sampled_from([(int, 7), (str, "s"), (float, 1.5), (bool, True), (list[int], [1, 2])])
_names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))


@given(params=st.dictionaries(_names, st.tuples(_types, st.booleans()), min_size=0, max_size=6))
def test_generated_model_matches_signature(params: dict[str, tuple[tuple[type, Any], bool]]) -> None:
    parameters = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=hint,
            default=sample if has_default else inspect.Parameter.empty,
        )
        for name, ((hint, sample), has_default) in params.items()
    ]

    def f(**kwargs: Any) -> None: ...

    f.__signature__ = inspect.Signature(parameters)
    f.__annotations__ = {p.name: p.annotation for p in parameters}
    built = function_schema(f, uri=URI)
    schema = built.input_model.model_json_schema(by_alias=True)
    assert set(schema.get("properties", {})) == set(params)
    required = {name for name, (_, has_default) in params.items() if not has_default}
    assert set(schema.get("required", [])) == required
    sample_args = {name: sample for name, ((_, sample), _) in params.items()}
    assert built.input_model.model_validate(sample_args).model_dump(by_alias=True) == sample_args
