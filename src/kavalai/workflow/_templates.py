"""Prompt templates: Jinja2 in its sandboxed environment, with undefined variables as errors.

Jinja2 is imported on first use, so importing :mod:`kavalai.workflow` stays light.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any

from kavalai.workflow.errors import NodeError, WorkflowDefinitionError

__all__ = ["check_template", "render_template"]


@lru_cache(maxsize=1)
def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


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

    try:
        return str(_template(source).render(dict(variables)))
    except TemplateError as exc:
        raise NodeError(
            f"Node {node!r}: field {field!r}: the template could not be rendered: {exc}", node=node, field=field
        ) from exc
