"""Prompt templates: Jinja2 in its sandboxed environment, with undefined variables as errors.

A rendering is bounded in what it produces (the size limit of :mod:`kavalai.workflow._sizes`, 1,000,000 characters
by default), in what each operation builds (the same limit, checked before it is built: see
:mod:`kavalai.workflow._sandbox`) and in the steps its loops take, all loops together (:data:`MAX_LOOP_STEPS`):
nested loops over the run's data that print nothing would otherwise spin the event loop for as long as their product.
Jinja has no hook per loop step, so the environment counts them in the template's compiled code: its documented
``_compile`` hook wraps the iterable of every ``for`` in a counter. Each step is also counted on the rendering's
meter (:mod:`kavalai.workflow._meter`), with the sandbox's operations, so :func:`render_metered` ends with the
deadline around it and never holds the event loop past a slice.

Each value a template prints (``{{ ... }}``) passes through the environment's ``finalize``; a rendering may give a
``fit`` callable there (the output budget of a model node, :mod:`kavalai.workflow._budget`).

Jinja2 is imported on first use, so importing :mod:`kavalai.workflow` stays light.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, Final

from kavalai.workflow._meter import EvaluationDeadlineError, current_meter, evaluate
from kavalai.workflow._sizes import DEFAULT_MAX_SIZE, check_size, max_size, text_size
from kavalai.workflow.errors import NodeError, WorkflowDefinitionError, failure_text

__all__ = ["check_template", "render_metered", "render_template"]


#: The most characters one rendering may produce by default (a workflow's ``max_value_size`` changes it), and the
#: most loop steps its loops may take in all.
MAX_RENDERED_CHARS: Final = DEFAULT_MAX_SIZE
MAX_LOOP_STEPS: Final = 1_000_000
_budget: ContextVar[list[int] | None] = ContextVar("kavalai_template_loop_budget", default=None)
_fit: ContextVar[Callable[[Any], Any] | None] = ContextVar("kavalai_template_fit", default=None)
_COUNTER: Final = "kavalai_loop_steps"  # the environment attribute the compiled loops call


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``'s items, each one spent from the rendering's loop budget and counted on its meter."""
    budget, meter = _budget.get(), current_meter()
    if budget is None:
        budget = [MAX_LOOP_STEPS]
    tick = meter.tick if meter is not None else _no_meter
    for item in iterable:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError(f"the template's loops would take more than {MAX_LOOP_STEPS:,} steps")
        tick()
        yield item


def _no_meter(weight: int = 1) -> None:
    """The tick of a rendering outside a meter (a direct :func:`render_template` call: its loop budget only)."""


class _LoopCounter(ast.NodeTransformer):
    """Wraps the iterable of every ``for`` of a compiled template in ``environment.kavalai_loop_steps(...)``."""

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        counter = ast.Attribute(value=ast.Name(id="environment", ctx=ast.Load()), attr=_COUNTER, ctx=ast.Load())
        node.iter = ast.Call(func=counter, args=[node.iter], keywords=[])
        return node


def _finalize(value: Any) -> Any:
    """Each printed value, through the rendering's ``fit`` when it has one; refused first when its text would be
    over the limit (a list holding one long text many times)."""
    if not isinstance(value, str):
        check_size(text_size(value), "the text of a printed value")
    fit = _fit.get()
    return value if fit is None else fit(value)


@lru_cache(maxsize=1)
def _environment() -> Any:
    from jinja2 import StrictUndefined

    from kavalai.workflow._sandbox import BoundedEnvironment, CompareRewriter, JoinRewriter

    class CountingEnvironment(BoundedEnvironment):
        def _compile(self, source: str, filename: str) -> Any:
            tree = CompareRewriter().visit(JoinRewriter().visit(_LoopCounter().visit(ast.parse(source, filename))))
            return compile(ast.fix_missing_locations(tree), filename, "exec")

    env = CountingEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize
    )
    setattr(env, _COUNTER, _counted)
    return env


@lru_cache(maxsize=512)
def _template(source: str) -> Any:
    return _environment().from_string(source)


def check_template(source: str, names: Collection[str], *, node: str, field: str) -> None:
    """Parse ``source`` and check it reads only ``names``; raise :class:`WorkflowDefinitionError` naming the node
    and field if it does not parse or reads another variable."""
    from jinja2 import TemplateError, meta

    try:
        _template(source)
        unknown = sorted(meta.find_undeclared_variables(_environment().parse(source)) - set(names))
    except TemplateError as exc:
        raise WorkflowDefinitionError(
            f"Node {node!r}: field {field!r} is not a valid template: {exc}", node=node, field=field
        ) from None
    if unknown:
        shown = ", ".join(sorted(names))
        raise WorkflowDefinitionError(
            f"Node {node!r}: field {field!r}: the template reads {unknown[0]!r}, which is not one of the node's "
            f"inputs ({shown}). Add it to 'inputs', or read it from 'input'.",
            node=node,
            field=field,
        )


async def render_metered(
    source: str,
    variables: Mapping[str, Any],
    *,
    node: str,
    field: str,
    fit: Callable[[Any], Any] | None = None,
    again: Callable[[], None] | None = None,
) -> str:
    """:func:`render_template` under the meter (:func:`kavalai.workflow._meter.evaluate`): bounded by the deadline
    around it and the meter's budget, never holding the event loop past a slice. ``again`` undoes what ``fit``
    recorded when the rendering is begun again off the loop."""
    return await evaluate(
        lambda: render_template(source, variables, node=node, field=field, fit=fit), again=again, long=_loops(source)
    )


@lru_cache(maxsize=512)
def _loops(source: str) -> bool:
    """Whether ``source`` has a ``for`` loop (its rendering may be long: it runs off the event loop)."""
    from jinja2 import TemplateError, nodes

    try:
        return _environment().parse(source).find(nodes.For) is not None
    except TemplateError:
        return False  # rendered on the loop, where the error is raised at once


def render_template(
    source: str,
    variables: Mapping[str, Any],
    *,
    node: str,
    field: str,
    fit: Callable[[Any], Any] | None = None,
) -> str:
    """Render ``source`` with ``variables`` in the sandbox; raise :class:`NodeError` naming node and field.

    ``fit``: called with each value the template prints; what it returns is printed instead.
    """
    from jinja2 import TemplateError

    token = _budget.set([MAX_LOOP_STEPS])
    fitting = _fit.set(fit)
    try:
        chunks: list[str] = []
        size = 0
        limit = max_size()
        for chunk in _template(source).generate(dict(variables)):  # streamed: the size is checked as it grows
            size += len(chunk)
            if size > limit:
                raise OverflowError(f"the rendered text is longer than {limit:,} characters")
            chunks.append(chunk)
        return "".join(chunks)
    except NodeError:
        raise
    except EvaluationDeadlineError as exc:
        stopped = f"Node {node!r}: field {field!r}: the template was stopped: {exc}"
        raise NodeError(stopped, node=node, field=field) from exc
    except (TemplateError, OverflowError, ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as exc:
        # Not only Jinja's own errors: `{{ 1 - 'x' }}` raises TypeError, a macro calling itself RecursionError.
        what = str(exc) if isinstance(exc, TemplateError | OverflowError) else failure_text(exc)
        raise NodeError(
            f"Node {node!r}: field {field!r}: the template could not be rendered: {what}", node=node, field=field
        ) from exc
    finally:
        _budget.reset(token)
        _fit.reset(fitting)
