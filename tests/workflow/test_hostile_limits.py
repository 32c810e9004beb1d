"""Hostile expressions and templates are bounded by what they produce: refused at once, never computed."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kavalai.workflow._expressions import compile_expression, is_path
from kavalai.workflow._templates import render_template
from kavalai.workflow.errors import ExpressionError, NodeError


def peak_mib(work: Callable[[], Any]) -> float:
    """The peak of the memory Python allocated while ``work()`` ran (it may raise), in MiB."""
    tracemalloc.start()
    try:
        work()
    except Exception:  # the caller checks the error separately; here only the memory counts
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / 2**20


@pytest.mark.parametrize(
    ("source", "context", "message"),
    [
        ("(9 ** 64) ** 64 ** 2", {}, "exponent 4096 is above the limit"),
        ("((9 ** 60) ** 60) ** 60", {}, "the power would have more than 100,000 bits"),
        ("n * n * n * n * n * n * n * n", {"n": 10**14000}, "the product would have more than 100,000 bits"),
        ("str(s * 100000)", {"s": ["x" * 100_000]}, "the text of the value would be longer"),
        ("upper(t + t)", {"t": "y" * 600_000}, "the result would be longer than 1,000,000"),
        ("(s * 10) * 100000", {"s": "ab"}, "repetition of"),
    ],
)
def test_expressions_are_bounded_by_what_they_produce(source: str, context: dict[str, object], message: str) -> None:
    expression = compile_expression(source)
    with pytest.raises(ExpressionError, match=message):
        expression.evaluate(context)
    assert peak_mib(lambda: expression.evaluate(context)) < 4  # refused before anything large was built


@pytest.mark.parametrize(
    "source",
    [
        "-" * 100_000 + "1",
        "not " * 50_000 + "True",
        "x" + "+x" * 50_000,
        "a" + ".b" * 30_000,
        "get('" + "-" * 100_000 + "1')",
    ],
)
def test_an_expression_nested_too_deeply_to_parse_is_an_expression_error(source: str) -> None:
    """``ast.parse`` raised ``MemoryError`` or ``RecursionError`` out of ``compile_expression`` (and ``is_path``):
    a workflow file with such an expression failed to load with a bare traceback."""
    with pytest.raises(ExpressionError, match="nested too deeply to parse|get\\(\\) needs a context path") as caught:
        compile_expression(source, node="n")
    if "nested too deeply" in str(caught.value):
        assert len(str(caught.value)) < 600  # the source is shortened, not repeated whole
    assert not is_path(source)


def test_an_ordinary_expression_still_works() -> None:
    assert compile_expression("str(n * 2) + upper(s)").evaluate({"n": 21, "s": "ok"}) == "42OK"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "more than 1,000,000 steps",
        ),
        ("{% for i in range(1000) %}{{ text }}{% endfor %}", "longer than 1,000,000 characters"),
        # Loops over the run's data, not range(): 3,000 items nested three deep are 27 billion steps.
        ("{% for a in items %}{% for b in items %}{% for c in items %}{% endfor %}{% endfor %}{% endfor %}", "steps"),
        (
            "{% for k, v in table.items() %}{% for x in items %}{% for y in items %}"
            "{% endfor %}{% endfor %}{% endfor %}",
            "steps",
        ),
        ("{% for c in text %}{% for d in text %}{% endfor %}{% endfor %}", "steps"),
    ],
)
def test_templates_are_bounded_by_their_loops_and_their_output(source: str, message: str) -> None:
    variables = {"text": "z" * 10_000, "items": list(range(3000)), "table": dict.fromkeys(range(3000))}
    with pytest.raises(NodeError, match=message):  # the count of steps, or of characters, ran out
        render_template(source, variables, node="n", field="prompt")


def test_an_ordinary_template_still_renders() -> None:
    assert render_template("{% for i in range(3) %}{{ i }}{% endfor %} {{ a }}", {"a": "x"}, node="n", field="f") == (
        "012 x"
    )
    source = "{% for k, v in d.items() %}{{ loop.index }}:{{ k }}={{ v }};{% endfor %}"
    assert render_template(source, {"d": {"a": 1, "b": 2}}, node="n", field="f") == "1:a=1;2:b=2;"
    many = "{% for i in items %}{% if i % 250000 == 0 %}{{ i }},{% endif %}{% endfor %}"
    assert render_template(many, {"items": range(1_000_000)}, node="n", field="f") == "0,250000,500000,750000,"


def test_a_workflow_file_that_is_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine

    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    text = "\n".join(lines) + "\nnodes: *a9\n"
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    for source in (path, text):
        with pytest.raises(WorkflowDefinitionError, match="billion laughs"):  # before its 10**10 nodes are walked
            WorkflowEngine.from_yaml(source)


def test_aliased_types_are_built_once_each_not_once_per_path(tmp_path: Path) -> None:
    """15 nested aliases under the node limit (2**15 paths): walked as a tree, building the types took 98 s."""
    from kavalai.workflow import WorkflowEngine

    depth = 15
    lines = ["name: aliased", f"input: T{depth}", "output: object", "types:"]
    lines.append("  T0: &t0 {type: object, properties: {v: {type: string}}}")
    lines += [
        f"  T{i}: &t{i} {{type: object, properties: {{a: *t{i - 1}, b: *t{i - 1}}}}}" for i in range(1, depth + 1)
    ]
    lines += ["nodes:", "  - {id: start, kind: start, next: end}", "  - {id: end, kind: end}"]
    path = tmp_path / "aliased.yaml"
    path.write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        engine = WorkflowEngine.from_yaml(path)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    print(f"peak while loading 2**15 aliased paths: {peak:.1f} MiB")
    assert peak < 10  # each aliased type built once; built per path (2**15 of them), it is far more
    top = engine.workflow.types.get(f"T{depth}")
    assert top is not None
    fields = top.annotation.model_fields
    assert fields["a"].annotation is fields["b"].annotation  # one model for the one aliased schema
    leaf: dict[str, object] = {"v": "x"}
    for _ in range(3):
        leaf = {"a": leaf, "b": leaf}
    assert top.validate(_nest(leaf, depth - 3))  # values of the type still validate


def _nest(value: dict[str, object], levels: int) -> dict[str, object]:
    for _ in range(levels):
        value = {"a": value, "b": value}
    return value


BIG = "y" * 900_000  # under the limit of 1,000,000 characters: every attack below builds from values this size
ATTACKS = [
    "{{ input.s * input.n }}",  # the reported one: n = 5 x 10**8 built 1 GB before refusing it
    "{{ input.n * input.s }}",
    "{{ [input.s] * input.n }}",
    "{{ big + big }}",
    "{{ big ~ big }}",
    "{{ [big] * 100000 }}",
    "{{ ([big] * 100000)|string }}",
    "{{ ([big] * 100000)|join(',') }}",
    "{{ ([big] * 100)|tojson }}",
    "{{ ([big] * 100)|pprint }}",
    "{{ big|e }}",
    "{{ big|urlencode }}",
    "{{ input.s|center(input.w) }}",
    "{{ ('a\n' * 100000)|indent(1000) }}",
    "{{ big|replace('y', 'zz') }}",
    "{{ big|wordwrap(1, wrapstring='--') }}",
    "{{ '%999999999s'|format(1) }}",
    "{{ '%999999999s' % 1 }}",
    "{{ '%*s' % (input.w, 1) }}",
    "{{ ('%s' * 100000) % ((big,) * 100000) }}",
    "{{ [1]|batch(input.w, 'x')|list }}",
    "{{ [1]|slice(input.w)|list }}",
    "{{ ([[1] * 100] * 100000)|sum(start=[]) }}",
    "{{ 5|round(-input.w) }}",
    "{{ range(100000)|map('center', 999999)|list|length }}",
    "{{ input.s.center(input.w) }}",
    "{{ input.s.ljust(input.w) }}",
    "{{ input.s.rjust(input.w) }}",
    "{{ input.s.zfill(input.w) }}",
    "{{ ('\t' * 1000).expandtabs(input.w) }}",
    "{{ big.replace('y', 'yy') }}",
    "{{ ','.join([big] * 10) }}",
    "{{ big.translate({121: 'abc'}) }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ '{0:{1}}'.format(1, input.w) }}",
    "{{ '{x:>999999999}'.format_map({'x': 1}) }}",
    "{{ (1).to_bytes(input.w, 'big') }}",
    "{{ lipsum(100000) }}",
    "{{ 2 ** input.w }}",
    "{% set ns = namespace(x=big) %}{% for i in range(30) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x|length }}",
    "{% set ns = namespace(x=[big]) %}{% for i in range(30) %}{% set ns.x = ns.x + ns.x %}{% endfor %}",
    "{% set l = [1] %}{% for i in range(30) %}{{ l.extend(l) }}{% endfor %}",  # the sandbox refuses growing in place
    "{% set x %}{% for i in range(2000) %}{{ big }}{% endfor %}{% endset %}{{ x|length }}",
    "{% macro m() %}{% for i in range(2000) %}{{ big }}{% endfor %}{% endmacro %}{{ m()|length }}",
]


@pytest.mark.parametrize("source", ATTACKS)
def test_a_template_is_refused_before_it_builds_a_large_value(source: str) -> None:
    variables = {"input": {"s": "x", "n": 500_000_000, "w": 10**9}, "big": BIG}
    with pytest.raises(NodeError, match="longer than 1,000,000|not allowed|more than 100,000 bits|unsafe"):
        render_template(source, variables, node="n", field="prompt")
    # Measured, not timed: what Python allocated while refusing (the values themselves were there before).
    peak = peak_mib(lambda: render_template(source, variables, node="n", field="prompt"))
    # The limit (1,000,000 characters, or list items: 8 MB of references) and a few MB; unbounded, these build
    # hundreds of MB to many GB.
    assert peak < 12, f"{peak:.1f} MiB"


@pytest.mark.parametrize(
    ("source", "context", "message"),
    [
        ("input.s * input.n", {"input": {"s": "x", "n": 500_000_000}}, "repetition of"),
        ("sum(l, [])", {"l": [[1] * 100] * 100_000}, "would be longer than 1,000,000"),
        ("round(5, -1000000000)", {}, "round"),
        ("str(l)", {"l": [BIG] * 100_000}, "the text of the value would be longer"),
        ("t + t", {"t": BIG}, "the result would be longer than 1,000,000"),
    ],
)
def test_an_expression_is_refused_before_it_builds_a_large_value(
    source: str, context: dict[str, object], message: str
) -> None:
    expression = compile_expression(source)
    with pytest.raises(ExpressionError, match=message):
        expression.evaluate(context)
    assert peak_mib(lambda: expression.evaluate(context)) < 4


def test_sum_of_lists_is_linear_and_still_works() -> None:
    # sum() copies the growing list at every step; 100,000 one-item lists would be 5 x 10**9 copies.
    assert compile_expression("len(sum(l, []))").evaluate({"l": [[1]] * 100_000}) == 100_000
    assert compile_expression("sum(l, ())").evaluate({"l": [(1,), (2,)]}) == (1, 2)
    assert compile_expression("sum(l)").evaluate({"l": [1, 2, 3]}) == 6
    assert render_template("{{ [[1], [2]]|sum(start=[]) }}", {}, node="n", field="f") == "[1, 2]"


def test_ordinary_uses_of_the_bounded_operations_still_work() -> None:
    source = (
        "{{ s * 3 }}|{{ s ~ s }}|{{ [1, 2] + [3] }}|{{ 'x'|center(5) }}|{{ items|join(',') }}|{{ '%-4s|' % s }}"
        "{{ '{:>4}'.format(s) }}|{{ s.ljust(4, '.') }}|{{ items|map('string')|join('+') }}|{{ 7|round(-1) }}"
        "|{{ 'a b'|replace(' ', '_') }}|{{ {'k': s}|tojson }}"
    )
    rendered = render_template(source, {"s": "ab", "items": [1, 2, 3]}, node="n", field="f")
    assert rendered == 'ababab|abab|[1, 2, 3]|  x  |1,2,3|ab  |  ab|ab..|1+2+3|10|a_b|{"k": "ab"}'
    escaped = "{% autoescape true %}{{ s ~ t }}{% endautoescape %}|{{ s ~ t }}"  # '~' keeps Jinja's escaping
    assert render_template(escaped, {"s": "<a>", "t": "&"}, node="n", field="f") == "&lt;a&gt;&amp;|<a>&"


async def test_the_size_limit_is_the_workflows_own(tmp_path: Path) -> None:
    from kavalai import FunctionKernel
    from kavalai.workflow import WorkflowBuilder, WorkflowEngine

    def doubled(limit: int | None) -> WorkflowBuilder:
        builder = WorkflowBuilder("sized", input="object", output="any").start(next="end")
        builder = builder.end("end", outputs={"twice": {"expr": "input.s + input.s"}})
        return builder if limit is None else builder.limits(max_value_size=limit)

    ok = await WorkflowEngine(doubled(None).build(), FunctionKernel()).run({"s": "x" * 400_000})
    assert ok.ok, ok.error
    assert len(ok.output["twice"]) == 800_000
    small = await WorkflowEngine(doubled(1000).build(), FunctionKernel()).run({"s": "x" * 600})
    assert not small.ok
    assert "longer than 1,000 characters" in str(small.error)
    path = tmp_path / "sized.yaml"
    path.write_text(
        "name: sized\ninput: object\noutput: any\nlimits: {max_value_size: 1000}\nnodes:\n"
        "  - {id: start, kind: start, next: end}\n"
        "  - {id: end, kind: end, outputs: {twice: {expr: 'input.s + input.s'}}}\n"
    )
    failed = await WorkflowEngine.from_yaml(path, kernel=FunctionKernel()).run({"s": "x" * 600})
    assert "longer than 1,000 characters" in str(failed.error)


@pytest.mark.parametrize(
    ("template", "named"),
    [
        ("{{ 1 - 'x' }}", "TypeError"),
        ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "RecursionError"),
        ("{{ 1 // 0 }}", "ZeroDivisionError"),
    ],
)
def test_a_template_failing_outside_jinja_is_a_node_error_naming_the_cause(template: str, named: str) -> None:
    with pytest.raises(NodeError, match=rf"Node 'n': field 'f': the template could not be rendered: {named}"):
        render_template(template, {}, node="n", field="f")


@pytest.mark.parametrize("source", ["\ud800", "a.b + '\udfff'", "get('\ud83d')"])
def test_an_expression_python_cannot_encode_is_an_expression_error(source: str) -> None:
    """A lone surrogate (``"\\ud800"`` in a JSON workflow document decodes to one) made ``ast.parse`` raise
    ``UnicodeEncodeError`` out of ``compile_expression`` and ``is_path``: the one parse's promise is
    :class:`ExpressionError` for every source it cannot read."""
    with pytest.raises(ExpressionError, match="does not parse"):
        compile_expression(source, node="n")
    assert not is_path(source)
