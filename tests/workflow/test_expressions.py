"""Expressions and context paths: what they evaluate to, and everything they refuse."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kavalai.workflow import ExpressionError, compile_expression
from kavalai.workflow._expressions import is_path

CONTEXT = {
    "input": {"folder": "docs", "limit": 3, "tags": ["a", "b"]},
    "listing": {"result": ["x.md", "y.md", "z.txt"]},
    "flags": {"on": True, "off": False},
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("input.folder", "docs"),
        ("listing.result[0]", "x.md"),
        ("listing.result[-1]", "z.txt"),
        ("listing.result[1:]", ["y.md", "z.txt"]),
        ('input["limit"] * 2 + 1', 7),
        ("len(listing.result) > input.limit", False),
        ("len(listing.result) >= input.limit and flags.on", True),
        ("flags.off or 'fallback'", "fallback"),
        ("not flags.on", False),
        ("'a' in input.tags and 'c' not in input.tags", True),
        ("1 < input.limit <= 3", True),
        ("'big' if input.limit > 2 else 'small'", "big"),
        ("upper(input.folder)", "DOCS"),
        ("sorted([3, 1, 2])", [1, 2, 3]),
        ("{'n': input.limit, 'pair': (1, 2)}", {"n": 3, "pair": (1, 2)}),
        ("get('missing.result', 0) + 1", 1),
        ("get('listing.result[5]', 'none')", "none"),
        ("get('listing.result[0]')", "x.md"),
        ("get('nothing')", None),
        ("2 ** 10 % 1000 // 3 - -1", 9),
    ],
)
def test_evaluates(source: str, expected: object) -> None:
    assert compile_expression(source).evaluate(CONTEXT) == expected


def test_reads_model_fields_but_not_python_attributes() -> None:
    class Point(BaseModel):
        x: int

    assert compile_expression("p.x + 1").evaluate({"p": Point(x=2)}) == 3
    with pytest.raises(ExpressionError, match="Point has no field 'model_fields'"):
        compile_expression("p.model_fields").evaluate({"p": Point(x=2)})


def test_names_are_collected_for_build_time_checks() -> None:
    expression = compile_expression("len(listing.result) > input.limit and get('counter.result', 0) < 3")
    assert expression.names == {"listing", "input", "counter"}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("__import__('os').system('true')", "only these functions may be called"),
        ("input.__class__", "names starting with '_' are not allowed"),
        ("input.folder.upper()", "calls 'input.folder.upper'"),
        ("[x for x in listing.result]", "ListComp, which is not allowed"),
        ("lambda: 1", "Lambda, which is not allowed"),
        ("(x := 1)", "NamedExpr, which is not allowed"),
        ("f'{input}'", "JoinedStr, which is not allowed"),
        ("len(obj=1)", "keyword arguments are not allowed"),
        ("get(input.folder)", "get() takes a path string"),
        ("get('a + b')", "get() needs a context path"),
        ("input.folder +", "does not parse"),
    ],
)
def test_refuses_at_compile_time(source: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason.replace("(", r"\(").replace(")", r"\)")) as caught:
        compile_expression(source, node="check")
    assert caught.value.node == "check"
    assert str(caught.value).startswith("Node 'check': ")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("2 ** 1000", "exponent 1000 is above the limit"),
        ("'ab' * 100000", "repetition of 200000 items is above the limit"),
        ("missing.value", "'missing' is not defined"),
        ("input.nope", "no key 'nope' \\(keys: 'folder', 'limit', 'tags'\\)"),
        ("listing.result[7]", "index 7 is out of range \\(length 3\\)"),
        ("listing.result.first", "cannot read 'first' of a list"),
        ("input.limit / 0", "ZeroDivisionError"),
        ("'%999999999d' % 1", "'%' formatting of text is not allowed"),
        ("b'%999999999d' % 1", "'%' formatting of text is not allowed"),
        ("b'ab' * 100000", "repetition of 200000 items is above the limit"),
    ],
)
def test_fails_at_evaluation_naming_node_field_and_expression(source: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason) as caught:
        compile_expression(source).evaluate(CONTEXT, node="calc", field="inputs.n")
    assert (caught.value.node, caught.value.field, caught.value.expression) == ("calc", "inputs.n", source)
    assert str(caught.value).startswith(f"Node 'calc': field 'inputs.n': expression {source!r}")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("input.folder", True),
        ("listing.result[0]", True),
        ("a['k'].b", True),
        ("docs", True),
        ("a + b", False),
        ("a[i]", False),
        ("hello world", False),
        ("len(x)", False),
        ("3", False),
    ],
)
def test_is_path(source: str, expected: bool) -> None:
    assert is_path(source) is expected


class _Point(BaseModel):
    x: int
    tags: dict[str, int]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("input", {"folder": "docs", "n": {1: "one", "k": "v"}, "p": _Point(x=1, tags={"t": 2})}),
        ("input.folder", "docs"),
        ("input['folder']", "docs"),
        ("input.n[1]", "one"),
        ("input.n[True]", "one"),  # True == 1, read the way Python reads it
        ("input.p.x", 1),  # through a model: the general reading
        ("input.p.tags.t", 2),
        ("rows[1].id", 7),  # through a list
    ],
)
def test_plain_paths_read_as_the_general_evaluator_does(source: str, expected: object) -> None:
    context = {
        "input": {"folder": "docs", "n": {1: "one", "k": "v"}, "p": _Point(x=1, tags={"t": 2})},
        "rows": [{"id": 6}, {"id": 7}],
    }
    expression = compile_expression(source)
    assert expression.evaluate(context) == expected
    assert expression.evaluate(_ReadOnly(context)) == expected  # any mapping, not only dicts


class _ReadOnly(dict[str, object]):
    """A mapping that is not exactly a dict (the quick path takes only dicts)."""


def test_a_plain_path_that_misses_fails_as_any_expression_does() -> None:
    with pytest.raises(ExpressionError, match=r"no key 'nope' \(keys: 'folder'\)"):
        compile_expression("input.nope.deeper").evaluate({"input": {"folder": 1}}, node="n", field="inputs.a")
    with pytest.raises(ExpressionError, match="'input' is not defined"):
        compile_expression("input.folder").evaluate({}, node="n", field="inputs.a")
