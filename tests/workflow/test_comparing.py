"""The meter counts comparisons, membership and sorting by the size of what they compare (issue 34): ``==``, ``<``,
``in`` and their Jinja tests, ``|sort``, ``|unique``, ``|dictsort``, ``max``/``min`` and ``sorted()`` on multi-MB or
deeply nested values reach the meter's checks (the deadline, the slice of the event loop) as a loop step does.

On main each of these counted one operation (or the top-level length of a list only), so a loop of them ran
thousands of times between two checks of the deadline, each step as long as the values are big."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from markupsafe import Markup

from kavalai.kernel import deadline
from kavalai.workflow._expressions import compile_expression
from kavalai.workflow._meter import HEAVY, Meter
from kavalai.workflow._templates import render_template
from kavalai.workflow.errors import ExpressionError, NodeError

N = 100_000
BIG = list(range(N))
TWIN = list(range(N))  # equal to BIG, not the same list: == goes over every item
NESTED = [[BIG]]  # one item at the top: its length says nothing of what == goes over
WIDE = [list(range(i, i + 1_000)) for i in range(100)]  # 100 lists of 1,000: under the per-value threshold at the top
TEXTS = [f"{i:08}" * 1_250 for i in range(100)]  # 100 texts of 10,000 characters
VALUES: dict[str, Any] = {
    "big": BIG,
    "twin": TWIN,
    "nested": NESTED,
    "nested_twin": [[TWIN]],
    "wide": WIDE,
    "texts": TEXTS,
    "table": {f"k{i}": row for i, row in enumerate(WIDE)},
    "text": "ab" * N,
    "missing": -1,
    "markup": Markup("ab" * N),  # a text Jinja marked safe: a str of its own type
    "markup_twin": Markup("ab" * N),
}

TEMPLATES = {
    "==": "{{ big == twin }}",
    "!=": "{{ big != twin }}",
    "<": "{{ big < twin }}",
    "<=": "{{ big <= twin }}",
    ">=": "{{ nested >= nested_twin }}",
    "nested ==": "{{ nested == nested_twin }}",
    "in": "{{ missing in big }}",
    "not in": "{{ missing not in big }}",
    "in text": "{{ 'zz' in text }}",
    "chained": "{{ 0 < 1 < big|length and big == twin }}",
    "is eq": "{{ big is eq twin }}",
    "is equalto": "{{ nested is equalto nested_twin }}",
    "is lt": "{{ big is lt twin }}",
    "is in": "{{ [big] is in [nested_twin] }}",
    "select eq": "{{ [big, big] | select('eq', twin) | list | length }}",
    "sort nested": "{{ wide | sort | first | first }}",
    "unique": "{{ texts | unique | list | length }}",
    "dictsort": "{{ table | dictsort(by='value') | first | first }}",
    "max": "{{ wide | max | first }}",
    "min": "{{ wide | min | first }}",
    "groupby": "{{ wide | groupby(0) | list | length }}",
    "sort range": "{{ range(100000) | sort | first }}",
    "markup <": "{{ markup < markup_twin }}",
    "markup in": "{{ 'zz' in markup }}",
}


def _spent(work: Callable[[], object]) -> int:
    meter = Meter(deadline=None)
    meter.run(work)
    return meter.spent


@pytest.mark.parametrize("source", TEMPLATES.values(), ids=TEMPLATES.keys())
def test_a_comparison_in_a_template_counts_what_it_goes_over(source: str) -> None:
    spent = _spent(lambda: render_template(source, VALUES, node="n", field="f"))
    assert spent >= N, (source, spent)  # on main: a handful of operations


@pytest.mark.parametrize("source", ["{{ big == twin }}", "{{ missing in big }}", "{{ wide | sort | length }}"])
def test_a_comparison_past_the_deadline_ends_the_rendering(source: str) -> None:
    """One step of the loop is enough: its comparison reaches a check, which finds the deadline past."""
    meter = Meter(deadline=time.monotonic() - 1)
    with pytest.raises(NodeError, match="the template was stopped"):
        meter.run(lambda: render_template(source, VALUES, node="n", field="f"))


def test_a_comparison_of_small_values_costs_a_step() -> None:
    source = "{% for i in range(10) %}{{ i == 3 }}{{ i in [1, 2] }}{{ 'a' < 'b' }}{% endfor %}"
    spent = _spent(lambda: render_template(source, {}, node="n", field="f"))
    assert spent < 200
    source = "{{ 1 < 2 < 3 }}{{ 3 < 2 < 1 }}{{ 'b' in 'abc' }}{{ 2 not in [2] }}"
    assert render_template(source, {}, node="n", field="f") == "TrueFalseTrueFalse"


def test_a_comparison_with_a_literal_is_left_as_python_has_it() -> None:
    """``x == 3``, ``s < 'm'`` and ``x in [1, 2]`` go over no more than the template's own text: not charged (the
    loop step is), so the common comparisons of a template cost what they did; ``3 in big`` is charged."""
    from kavalai.workflow._templates import _environment

    source = "{{ (big == 3, 'zz' < text, big in [1, 2], missing not in (1, 2)) }}"
    names = _environment().from_string(source).root_render_func.__code__.co_names
    assert not [name for name in names if name.startswith("kavalai_") and name != "kavalai_str_join"], names
    assert _spent(lambda: render_template("{{ 3 in big }}", VALUES, node="n", field="f")) >= N


EXPRESSIONS = {
    "==": "input.big == input.twin",
    "<": "input.big < input.twin",
    "nested": "input.nested == input.nested_twin",
    "in": "input.missing in input.big",
    "not in": "input.missing not in input.big",
    "sorted": "sorted(input.wide)[0][0]",
    "max": "max(input.wide)[0]",
    "min": "min(input.texts)",
}


@pytest.mark.parametrize("source", EXPRESSIONS.values(), ids=EXPRESSIONS.keys())
def test_a_comparison_in_an_expression_reaches_a_check_of_the_deadline(source: str) -> None:
    """One comparison of big values counts enough operations for a check: a deadline already past ends it."""
    expression = compile_expression(source)
    expression.evaluate({"input": VALUES})  # no deadline: it is evaluated
    with deadline(0.0), pytest.raises(ExpressionError, match="ran past the deadline"):
        expression.evaluate({"input": VALUES})


def test_a_comparison_of_small_values_in_an_expression_is_evaluated_under_a_deadline_past() -> None:
    expression = compile_expression("input.a == [1, 2] and 2 in input.a and max(input.a) < 3 and input.a != 'x'")
    with deadline(0.0):
        assert expression.evaluate({"input": {"a": [1, 2]}}) is True  # a few operations: no check is due


async def test_comparing_huge_lists_is_not_done_on_the_event_loop() -> None:
    left, right = list(range(HEAVY * 4)), list(range(HEAVY * 4))
    expression = compile_expression("[input.left] == [input.right]")
    turns = 0

    async def heartbeat() -> None:
        nonlocal turns
        while True:
            turns += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        await anyio.lowlevel.checkpoint()
        before = turns
        assert await expression.evaluate_async({"input": {"left": left, "right": right}}) is True
        during = turns - before
        group.cancel_scope.cancel()
    assert during > 0  # the loop turned while the comparison ran: it ran in a worker thread
