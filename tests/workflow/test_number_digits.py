"""A number with more digits than Python writes as text (``{{ 10 ** 5000 }}``) or reads from it
(``int('9' * 5000)``) is an evaluation error in a workflow author's terms (issue 34): the message named
``sys.set_int_max_str_digits``, an interpreter setting a workflow file cannot change. Every evaluation failure is
worded by one function, ``failure_text``; a new ``{type(exc).__name__}: {exc}`` in the workflow package fails the
enumeration below."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kavalai import FunctionKernel
from kavalai.workflow import WorkflowEngine
from kavalai.workflow._expressions import compile_expression
from kavalai.workflow._templates import render_template
from kavalai.workflow.errors import ExpressionError, NodeError

LIMIT = f"{sys.get_int_max_str_digits():,}"


@pytest.mark.parametrize(
    ("template", "variables"),
    [
        ("{{ 10 ** 5000 }}", {}),
        ("{{ n }}", {"n": 10**5000}),
        ("{{ n | string }}", {"n": 10**5000}),
        ("{{ ('9' * 5000) | int }}{{ n * 10 }}", {"n": 10**5000}),
    ],
)
def test_a_template_printing_a_number_of_too_many_digits_says_so(template: str, variables: dict[str, int]) -> None:
    with pytest.raises(NodeError) as caught:
        render_template(template, variables, node="n", field="f")
    message = str(caught.value)
    assert "set_int_max_str_digits" not in message
    assert f"the number has more than {LIMIT} digits, too many to write as text" in message


@pytest.mark.parametrize(
    ("source", "context", "said"),
    [
        ("int(s)", {"s": "9" * 5000}, f"the text has 5,000 digits, too many to read as a number (the limit is {LIMIT}"),
        ("str(n)", {"n": 10**5000}, f"the number has more than {LIMIT} digits"),
        ("'x' + str(n * 1)", {"n": 10**5000}, f"the number has more than {LIMIT} digits"),
    ],
)
def test_an_expression_converting_a_number_of_too_many_digits_says_so(
    source: str, context: dict[str, object], said: str
) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source).evaluate(context)
    assert "set_int_max_str_digits" not in str(caught.value)
    assert said in str(caught.value)


async def test_a_run_reading_a_number_of_too_many_digits_fails_in_the_authors_terms(tmp_path: Path) -> None:
    path = tmp_path / "digits.yaml"
    path.write_text(
        "name: digits\ninput: object\noutput: any\nnodes:\n"
        "  - {id: start, kind: start, next: end}\n"
        "  - {id: end, kind: end, outputs: {n: {expr: 'int(input.s)'}}}\n"
    )
    result = await WorkflowEngine.from_yaml(path, kernel=FunctionKernel()).run({"s": "9" * 5000})
    assert result.error is not None
    assert "set_int_max_str_digits" not in str(result.error)
    assert "too many to read as a number" in str(result.error)


def test_every_evaluation_failure_is_worded_by_the_one_function() -> None:
    """The enumeration: a foreign error's type and text are put into a workflow message only by ``failure_text``."""
    package = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "workflow"
    worded = {
        f"{path.relative_to(package)}: {match.group(0)}"
        for path in sorted(package.rglob("*.py"))
        for match in re.finditer(r"\{type\(\w+\)\.__name__\}: \{\w+\}", path.read_text(encoding="utf-8"))
    }
    assert worded == {"errors.py: {type(exc).__name__}: {text}"}
