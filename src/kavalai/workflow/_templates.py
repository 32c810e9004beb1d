"""Prompt templates: Jinja2 in its sandboxed environment, with undefined variables as errors.

Jinja2 is imported on first use, so importing :mod:`kavalai.workflow` stays light.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, Final

from kavalai.workflow.errors import NodeError, WorkflowDefinitionError

__all__ = ["check_template", "render_template"]


#: The most characters one rendering may produce, and the most loop steps its `range()`s may give in all.
MAX_RENDERED_CHARS: Final = 1_000_000
MAX_RANGE_STEPS: Final = 1_000_000
_budget: ContextVar[list[int] | None] = ContextVar("kavalai_template_range_budget", default=None)


def _bounded_range(*args: int) -> range:
    # The sandbox bounds one range() (100,000 items); nested loops multiply, so the steps of a whole rendering are
    # counted too: a template cannot spin the event loop with loops that print nothing.
    result = range(*args)
    budget = _budget.get()
    if budget is not None:
        budget[0] -= len(result)
        if budget[0] < 0:
            raise OverflowError(f"the template's loops would take more than {MAX_RANGE_STEPS:,} steps")
    return result


@lru_cache(maxsize=1)
def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals["range"] = _bounded_range
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


def render_template(source: str, variables: Mapping[str, Any], *, node: str, field: str) -> str:
    """Render ``source`` with ``variables`` in the sandbox; raise :class:`NodeError` naming node and field."""
    from jinja2 import TemplateError

    token = _budget.set([MAX_RANGE_STEPS])
    try:
        chunks: list[str] = []
        size = 0
        for chunk in _template(source).generate(dict(variables)):  # streamed: the size is checked as it grows
            size += len(chunk)
            if size > MAX_RENDERED_CHARS:
                raise OverflowError(f"the rendered text is longer than {MAX_RENDERED_CHARS:,} characters")
            chunks.append(chunk)
        return "".join(chunks)
    except (TemplateError, OverflowError) as exc:
        raise NodeError(
            f"Node {node!r}: field {field!r}: the template could not be rendered: {exc}", node=node, field=field
        ) from exc
    finally:
        _budget.reset(token)
