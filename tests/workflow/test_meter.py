"""The meter of evaluation: templates and expressions end with the run's deadline or their budget, the event loop
keeps turning while a long template runs, a run's values and trace stay within its memory budget, and no error of
any kind escapes ``engine.run()``. Last, the enumeration test of the gate: every evaluation in the source is metered."""

from __future__ import annotations

import ast
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.kernel import deadline
from kavalai.testing import ScriptedLLM
from kavalai.workflow import RunMemoryError, RunStatus, RunTimeoutError, WorkflowBuilder, WorkflowEngine
from kavalai.workflow._expressions import compile_expression
from kavalai.workflow._ledger import TRACE_FACTOR
from kavalai.workflow._meter import (
    CHECK_EVERY,
    HEAVY,
    EvaluationDeadlineError,
    EvaluationLimitError,
    Meter,
    evaluate,
    tick,
)
from kavalai.workflow._sizes import text_size
from kavalai.workflow.errors import ExpressionError, NodeError

SRC = Path(__file__).resolve().parents[2] / "src" / "kavalai"
# A long loop that builds next to nothing: 999 x 999 small steps, just under the most one rendering may take.
LONG = "{% for i in range(input.n) %}{% for j in range(input.n) %}{% set k = i ~ j %}{% endfor %}{% endfor %}"
# The example: each step copies the list it built, so 100,000 small steps are 5 billion copied items.
QUADRATIC = (
    "{% set ns = namespace(x=[]) %}{% for i in range(input.n) %}{% set ns.x = ns.x + [i] %}{% endfor %}"
    "{{ ns.x | length }}"
)


def _llm_workflow(prompt: str, *, timeout: float | None) -> WorkflowBuilder:
    builder = WorkflowBuilder("meter", output=str).start(next="ask").llm("ask", prompt=prompt, next="end").end("end")
    return builder.limits(timeout=timeout) if timeout is not None else builder


# --------------------------------------------------------------------------------------------- the meter


def test_a_meter_checks_its_deadline_every_few_thousand_operations() -> None:
    meter = Meter(deadline=time.monotonic() - 1)
    for _ in range(CHECK_EVERY - 1):
        meter.tick()  # between checks an operation costs a subtraction: nothing is raised yet
    with pytest.raises(EvaluationDeadlineError):
        meter.tick()
    assert meter.spent == CHECK_EVERY


def test_a_meter_ends_an_evaluation_over_its_budget() -> None:
    meter = Meter(deadline=None, budget=10_000)

    def spend() -> None:
        for _ in range(20_000):
            meter.tick(3)

    with pytest.raises(EvaluationLimitError, match="more than 10,000 operations"):
        spend()
    assert 10_000 < meter.spent <= 10_000 + 3 * CHECK_EVERY


def test_an_expression_ends_with_the_deadline_around_it() -> None:
    expression = compile_expression("sum(items)")
    items = list(range(2 * CHECK_EVERY))  # one call, weighed by its items: a check is due
    assert expression.evaluate({"items": items}) == sum(items)
    with deadline(0.0), pytest.raises(ExpressionError, match="ran past the deadline"):
        expression.evaluate({"items": items})


async def test_a_cancelled_evaluation_has_ended_when_its_caller_returns() -> None:
    """The worker thread is owned: cancelled, the caller waits until the meter has stopped the work."""
    state = {"started": False, "ended": False}

    def work() -> None:
        state["started"] = True
        try:
            while True:
                tick()  # a rendering's operations, for ever
        finally:
            state["ended"] = True

    with anyio.move_on_after(0.2) as scope:
        await evaluate(work, long=True)
    assert scope.cancelled_caught
    assert state["started"]
    assert state["ended"]  # not left running in its thread after the caller went on


# --------------------------------------------------------------------------------------------- templates in a run


@pytest.mark.parametrize("source", [LONG, QUADRATIC], ids=["long", "copying"])
async def test_a_long_loop_ends_with_the_run_timeout_and_the_loop_keeps_turning(source: str) -> None:
    # each would reach a budget of its own (loop steps, memory) only after 0.2 s or more
    engine = WorkflowEngine(_llm_workflow(source, timeout=0.1).build(), FunctionKernel(), llm=ScriptedLLM(["x"]))
    beats = 0
    finished = anyio.Event()

    async def heartbeat() -> None:
        nonlocal beats
        while not finished.is_set():
            await anyio.sleep(0.01)
            beats += 1

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        # on main the copying loop succeeded after ~33 s under a 3 s timeout, the event loop held all along
        result = await engine.run({"n": 999 if source == LONG else 100_000})
        finished.set()
    assert result.status is RunStatus.TIMED_OUT, result.error
    assert isinstance(result.error, RunTimeoutError)
    assert beats >= 3  # the event loop ran other tasks while the template worked (held, at most one beat after)


async def test_a_copying_loop_ends_with_the_run_memory_budget_without_a_timeout() -> None:
    engine = WorkflowEngine(_llm_workflow(QUADRATIC, timeout=None).build(), FunctionKernel(), llm=ScriptedLLM(["x"]))
    result = await engine.run({"n": 100_000})
    assert result.status is RunStatus.FAILED
    assert isinstance(result.error, NodeError)
    assert "would build more than 64,000,000 characters or items in all" in str(result.error)


async def test_a_short_template_still_renders_in_a_run() -> None:
    llm = ScriptedLLM(["done"])
    source = "{% for i in range(input.n) %}{{ i }},{% endfor %}"
    engine = WorkflowEngine(_llm_workflow(source, timeout=5).build(), FunctionKernel(), llm=llm)
    result = await engine.run({"n": 5})
    assert result.ok, result.error
    assert llm.requests[0].messages[-1].content == "0,1,2,3,4,"


# --------------------------------------------------------------------------------------------- the run's memory


@pythontool
def grow(items: list[str], size: int) -> list[str]:
    """Append a text of ``size`` characters."""
    return [*items, "x" * size]


def _growing(visits: int, size: int, *, max_value_size: int | None = None) -> WorkflowEngine:
    kernel = FunctionKernel()
    kernel.register_python_tool("t.grow", grow)
    builder = (
        WorkflowBuilder("grow")
        .start(next="grow")
        .function(
            "grow",
            tool="python://t.grow",
            inputs={"items": {"expr": "get('grow.result', [])"}, "size": size},
            next="again",
        )
        .if_("again", condition=f"len(grow.result) < {visits}", then="grow", else_="end")
        .end("end", outputs={"count": {"expr": "len(grow.result)"}})
    )
    return WorkflowEngine(builder.limits(max_visits=2 * visits + 2, max_value_size=max_value_size).build(), kernel)


async def test_a_value_growing_over_many_visits_ends_with_the_run_memory_budget() -> None:
    # 10,000 characters a visit against a run budget of 64 x 10,000: on main the list grew until MemoryError.
    engine = _growing(1_000, 10_000, max_value_size=10_000)
    async with engine:
        result = await engine.run({})
    assert result.status is RunStatus.FAILED
    assert isinstance(result.error, RunMemoryError), result.error
    assert result.error.node == "grow"
    assert result.error.limit == 640_000
    visits = [record for record in result.trace if record.node == "grow"]
    assert 50 <= len(visits) <= 70  # it ended as the budget was reached, not at max_visits


async def test_the_trace_keeps_sizes_past_its_budget() -> None:
    # 1,000 characters a visit for 400 visits: every visit's list in the trace would be 80 million characters.
    engine = _growing(400, 1_000, max_value_size=10_000)
    async with engine:
        result = await engine.run({})
    assert result.ok, result.error
    assert result.output == {"count": 400}
    kept = sum(text_size(record.output, 10**9) for record in result.trace if record.node == "grow")
    assert kept <= TRACE_FACTOR * 10_000 + 64 * len(result.trace)
    last = [record for record in result.trace if record.node == "grow"][-1]
    assert last.output["omitted"].startswith("past the trace's budget")
    assert last.output["size"] >= 400_000  # what was left out, by its size
    assert last.inputs is not None
    assert "omitted" in last.inputs


# --------------------------------------------------------------------------------------------- nothing escapes


class PanicException(BaseException):
    """What pyo3 raises for a Rust panic (pydantic-core's at its limits): a BaseException of this name, whose class
    pyo3 makes at run time."""


@pythontool
def panic() -> int:
    """Fail the way pydantic-core does at its limits: a BaseException."""
    raise PanicException("capacity overflow")


@pythontool
def exhaust() -> int:
    """Run out of memory."""
    raise MemoryError


@pytest.mark.parametrize("tool", ["panic", "exhaust"])
async def test_no_error_of_any_kind_escapes_run(tool: str) -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("t.panic", panic)
    kernel.register_python_tool("t.exhaust", exhaust)
    workflow = WorkflowBuilder("w").start(next="n").function("n", tool=f"python://t.{tool}", next="end").end("end")
    async with WorkflowEngine(workflow.build(), kernel) as engine:
        result = await engine.run({})
    assert result.status is RunStatus.FAILED
    assert result.error is not None


# --------------------------------------------------------------------------------------------- the gate


def _calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            found.append((node, name))
    return found


def _enclosing(tree: ast.AST) -> dict[ast.AST, str]:
    owners: dict[ast.AST, str] = {}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(function):
                owners.setdefault(inner, function.name)  # the outermost function wins: ast.walk is breadth-first
    return owners


def test_every_evaluation_in_the_source_runs_under_a_meter() -> None:
    """The evaluation entry points: a Jinja template rendered (``generate``/``render``), ``render_template``, and
    an expression tree walked (``_Evaluator`` or a subclass built). Each must be the metered one."""
    evaluators = {"_Evaluator"}
    texts = {path: path.read_text() for path in SRC.rglob("*.py")}
    words = ("generate", "render", "Evaluator")  # the files that can hold a crossing: parsed, the others not
    trees = {path: ast.parse(text, str(path)) for path, text in texts.items() if any(w in text for w in words)}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") in evaluators for b in node.bases):
                evaluators.add(node.name)
    crossings: list[str] = []
    for path, tree in trees.items():
        owners = _enclosing(tree)
        where = path.relative_to(SRC).as_posix()
        for call, name in _calls(tree):
            if name in evaluators:
                # a Meter made for it, or the one the slicing evaluate() made (current_meter() in its work)
                made = {getattr(n.func, "id", "") for a in call.args for n in ast.walk(a) if isinstance(n, ast.Call)}
                metered = "Meter" in made
                assert metered, f"{where}:{call.lineno}: {name}(...) walks an expression without a Meter"
                crossings.append(f"{where}:{owners.get(call)}:{name}")
            elif name == "render_template" or (
                isinstance(call.func, ast.Attribute) and name in ("generate", "render", "render_async")
            ):  # a Jinja template's methods (kaval's own render() fills in paths: no evaluation)
                crossings.append(f"{where}:{owners.get(call)}:{name}")
    # A template is rendered only by render_template, and render_template is called only by render_metered
    # (which runs it under the meter); a new caller of either fails here until it goes through the gate.
    templates = sorted(c for c in crossings if not c.endswith(tuple(evaluators)))
    assert templates == [
        "workflow/_templates.py:render_metered:render_template",
        "workflow/_templates.py:render_template:generate",
    ], templates
    walks = sorted(c.rsplit(":", 1)[0] for c in crossings if c.endswith(tuple(evaluators)))
    assert walks == ["workflow/_expressions.py:_walk", "workflow/kaval/_runtime.py:_lenient"], walks


def test_every_expression_a_run_evaluates_is_sliced() -> None:
    """A run's expressions are evaluated with ``evaluate_async`` (at most a slice on the loop, never one heavy
    operation): the synchronous ``evaluate`` is called only where no event loop runs the evaluation."""
    synchronous = {  # where a sync evaluation is fine, and why
        "workflow/_graph.py:resolve": "Binding.resolve: the synchronous API for a caller's own use",
        "workflow/kaval/_runtime.py:read_path": "a plain path (no operation to slice), read through the lenient walk",
        "workflow/kaval/_runtime.py:evaluate_async": "the work it hands to the slicing evaluate()",
        "workflow/_templates.py:render_metered": "the meter's slicing evaluate() itself",
    }
    found = []
    for path in sorted((SRC / "workflow").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owners = _enclosing(tree)
        for call, name in _calls(tree):
            if name == "evaluate" and path.name != "_meter.py":
                where = f"{path.relative_to(SRC).as_posix()}:{owners.get(call)}"
                if where not in synchronous:
                    found.append(f"{where}:{call.lineno}")
    assert found == []


async def _loop_turns_during(work: Callable[[], Awaitable[object]]) -> tuple[int, object]:
    """How many times another task on the loop ran while ``work`` was awaited, and what it returned."""
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
        result = await work()
        during = turns - before
        group.cancel_scope.cancel()
    return during, result


async def test_sorting_a_huge_list_is_not_done_on_the_event_loop() -> None:
    items = list(range(HEAVY * 4, 0, -1))
    expression = compile_expression("sorted(input.items)[0]")
    during, result = await _loop_turns_during(lambda: expression.evaluate_async({"input": {"items": items}}))
    assert result == 1
    assert during > 0  # the loop turned while the sort ran: it ran in a worker thread


async def test_a_small_expression_stays_on_the_loop() -> None:
    expression = compile_expression("sorted(input.items)[0] + 1")
    during, result = await _loop_turns_during(lambda: expression.evaluate_async({"input": {"items": [3, 1, 2]}}))
    assert result == 2
    assert during == 0  # evaluated at once, no thread: the fast case costs nothing more


async def test_a_kaval_expression_over_a_huge_list_is_not_done_on_the_event_loop() -> None:
    from kavalai.workflow.kaval._runtime import evaluate_async

    items = [str(i) for i in range(HEAVY * 2)]
    during, result = await _loop_turns_during(
        lambda: evaluate_async("max(items)", {"items": items}, node="n", field="expr")
    )
    assert result == max(items)
    assert during > 0


def test_the_meter_refuses_to_begin_a_heavy_operation_on_the_loop() -> None:
    from kavalai.workflow._meter import _SliceSpent

    on_loop = Meter(deadline=None)
    on_loop.slice_end = time.monotonic() + 3600  # a slice that has not run out
    with pytest.raises(_SliceSpent):
        on_loop.tick(HEAVY + 1)
    on_loop.tick(HEAVY)  # up to HEAVY items: begun here
    off_loop = Meter(deadline=None)  # a worker thread's meter has no slice: the operation is done there
    off_loop.tick(HEAVY + 1)
    assert off_loop.spent == HEAVY + 1


# --------------------------------------------------------------------------------------------- filters and tests

# Each step's work is in filters: a map, a select, a sort over 100,000 items, and next to no loop steps or operators.
FILTERING = [
    "{% for i in range(input.n) %}{{ (range(100000) | map('string') | join(',')) | length }}{% endfor %}",
    "{% for i in range(input.n) %}{{ range(100000) | select('odd') | list | length }}{% endfor %}",
    "{% for i in range(input.n) %}{{ input.rows | sort(attribute='k') | length }}{% endfor %}",
]


@pytest.mark.parametrize("source", FILTERING, ids=["map", "select", "sort"])
def test_the_work_of_filters_and_tests_is_counted(source: str) -> None:
    """On main a step that maps, selects or sorts 100,000 items counted one operation: the meter never reached a
    check, so ``{% for %}`` of 20 such steps under ``timeout=1`` ran all 20 (24 s) before the run timed out."""
    from kavalai.workflow._templates import render_template

    items = [{"k": i} for i in range(100_000)]
    meter = Meter(deadline=None)
    meter.run(lambda: render_template(source, {"input": {"n": 2, "rows": items}}, node="n", field="f"))
    assert meter.spent >= 200_000  # each step counts the items its filters go over
    past = Meter(deadline=time.monotonic() - 1)  # a deadline already past: the first check ends the rendering
    with pytest.raises(NodeError, match="the template was stopped"):
        past.run(lambda: render_template(source, {"input": {"n": 1, "rows": items}}, node="n", field="f"))


def test_every_filter_test_global_and_operator_of_the_sandbox_is_metered() -> None:
    """The enumeration of the meter's crossing points in the sandbox: every filter, test and global function the
    environment has (Jinja's, kavalai's checked ones, any added to it) is counted on the meter, but the
    constant-time ones named with their reason (``CONSTANT_FILTERS``, ``CONSTANT_TESTS``, ``CONSTANT_GLOBALS``),
    each still Jinja's own (not a checked or user one under that name); every operator Jinja compiles is listed in
    ``OPERATORS`` as metered or constant with the reason, and the compiled comparisons are the metered ones."""
    import jinja2.compiler
    import jinja2.filters
    import jinja2.nodes
    import jinja2.tests

    from kavalai.workflow._sandbox import (
        COMPARING_FILTERS,
        COMPARING_TESTS,
        CONSTANT_FILTERS,
        CONSTANT_GLOBALS,
        CONSTANT_TESTS,
        GROWING_TESTS,
        OPERATORS,
        CompareRewriter,
    )
    from kavalai.workflow._templates import _environment

    environment = _environment()

    def unmetered(mapping: dict[str, object], constant: object) -> list[str]:
        return [
            name
            for name, function in mapping.items()
            if callable(function) and not getattr(function, "kavalai_metered", False) and name not in constant
        ]

    assert not unmetered(environment.filters, CONSTANT_FILTERS)
    assert all(environment.filters[name] is jinja2.filters.FILTERS[name] for name in CONSTANT_FILTERS)
    assert set(COMPARING_FILTERS) <= set(jinja2.filters.FILTERS)
    assert not unmetered(environment.tests, CONSTANT_TESTS)
    assert all(environment.tests[name] is jinja2.tests.TESTS[name] for name in CONSTANT_TESTS)
    kinds = [set(GROWING_TESTS), set(COMPARING_TESTS), set(CONSTANT_TESTS)]
    assert sum(map(len, kinds)) == len(set().union(*kinds))  # each test listed once
    assert set().union(*kinds) == set(jinja2.tests.TESTS)  # and every test of Jinja's listed: a new one fails here
    assert not unmetered(environment.globals, CONSTANT_GLOBALS)
    assert set(CONSTANT_GLOBALS) == set(environment.globals)
    operators = {n.operator for n in vars(jinja2.nodes).values() if isinstance(n, type) and hasattr(n, "operator")}
    operators -= {"not"}  # the unary 'not' and the binary ones share Jinja's classes with their own names
    assert operators | set(jinja2.compiler.operators.values()) <= set(OPERATORS), sorted(operators)
    source = "{{ (a == b, a != b, a < b, a <= b, a > b, a >= b, a in b, a not in b, a < b < c) }}"
    compiled = environment.from_string(source).root_render_func.__code__.co_names
    comparisons = ("eq", "ne", "lt", "lteq", "gt", "gteq", "in", "notin", "chain")
    assert {f"kavalai_{name}" for name in comparisons} <= set(compiled), compiled
    rewritten = CompareRewriter().visit(ast.parse(environment.compile(source, raw=True)))
    compares = [n for n in ast.walk(rewritten) if isinstance(n, ast.Compare)]
    assert all(isinstance(op, ast.Is | ast.IsNot) for n in compares for op in n.ops)  # Jinja's own checks only


def test_what_is_added_to_the_environment_later_is_metered() -> None:
    """Filters, tests and globals set after the environment was built (``env.filters[name] = f``, ``update``,
    ``setdefault``, ``|=``, a whole new mapping) pass the meter's gate: on main they ran unmetered."""
    from kavalai.workflow._sandbox import BoundedEnvironment

    def total(value: list[int]) -> int:
        return sum(value)

    environment = BoundedEnvironment()
    environment.filters["total"] = total
    environment.filters.update(total2=total)
    environment.filters.setdefault("total3", total)
    environment.filters |= {"total4": total}
    environment.tests["big"] = lambda value: sum(value) > 0
    environment.globals["add"] = total
    environment.globals["answer"] = 42  # a value, not a function: as it is
    sources = [
        "{{ big|total }}",
        "{{ big|total2 }}",
        "{{ big|total3 }}",
        "{{ big|total4 }}",
        "{{ big is big }}",
        "{{ add(big) }}",
    ]
    for source in sources:
        meter = Meter(deadline=None)
        meter.run(lambda source=source: environment.from_string(source).render(big=list(range(100_000))))
        assert meter.spent >= 100_000, (source, meter.spent)
    assert environment.globals["answer"] == 42
    environment.filters = {"total": total}  # replaced whole
    assert getattr(environment.filters["total"], "kavalai_metered", False)
    environment.tests = {"big": total}
    assert getattr(environment.tests["big"], "kavalai_metered", False)


def test_the_filters_and_tests_that_go_over_their_input_count_it() -> None:
    """A filter or test left unmetered would let a loop over a large value pass the meter: each metered one, given
    a value of 100,000 items, counts at least that many operations."""
    from kavalai.workflow._templates import render_template

    big = list(range(100_000))
    for source in ("{{ big|join(',')|length }}", "{{ big|sort|first }}", "{{ 5 is in big }}", "{{ big is lower }}"):
        meter = Meter(deadline=time.monotonic() + 600)
        meter.run(lambda source=source: render_template(source, {"big": big}, node="n", field="f"))
        assert meter.spent >= 100_000, (source, meter.spent)
