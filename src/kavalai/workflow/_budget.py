"""Output budgets in workflows: what of the run's data reaches a model through an ``llm`` or ``agent`` node's prompt.

Tool results reach a workflow's models two ways. Inside an ``agent`` node the agent calls tools itself, and its
output budget applies as in any agent (the engine hands it the budget). Before that, an ``llm`` or ``agent`` node's
templates print the run's data (``{{ page }}``, ``{{ search.result }}``), often a tool's whole result: a
:class:`PromptFit` sees each printed value and fits its text to the budget, at the budget of the tool it came from
when it is a ``function`` node's output or a field of one (``per_tool`` by that tool's URI), else at ``max_chars``.
Over the budget, the text is cut with a notice, or with ``overflow="artifact"`` cut and kept whole in the budget's
store: an agent reads on with ``read_artifact``; an ``llm`` node, which has no tools, names the artifact so the run's
trace (and your code, through ``budget.store``) can find it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kavalai.workflow._nodes import FunctionNode

if TYPE_CHECKING:
    from kavalai.agent.budget import OutputBudget
    from kavalai.workflow._graph import Workflow

__all__ = ["PromptFit"]


class PromptFit:
    """Fits each value a node's templates print to an output budget (a Jinja ``finalize``, then :meth:`settle`).

    Args:
        budget: the budget.
        workflow: the graph, to tell which context values are ``function`` node outputs.
        values: the run context (``input`` and node outputs by id).
        readable: whether the model can call ``read_artifact`` (an agent node's can).
    """

    def __init__(self, budget: OutputBudget, workflow: Workflow, values: Mapping[str, Any], *, readable: bool) -> None:
        self.budget = budget
        self.readable = readable
        self._sources = _tool_outputs(workflow, values)
        self._pending: list[tuple[str, str, int, str]] = []  # (placeholder, whole text, shown, what)
        self._nonce = secrets.token_hex(6)

    def __call__(self, value: Any) -> Any:
        """A printed value, or its text fitted to the budget (a placeholder until :meth:`settle` for an artifact)."""
        text = value if isinstance(value, str) else str(value)
        uri = self._sources.get(id(value))
        limit = self.budget.max_chars if uri is None else self.budget.limit_for(uri)
        if len(text) <= limit:
            return value
        what = "a value of this prompt" if uri is None else f"the result of {uri}"
        if self.budget.overflow == "truncate":
            return f"{text[:limit]}\n{self.budget.notice(what, len(text), limit, readable=self.readable)}"
        placeholder = f"\x00kavalai-artifact-{self._nonce}-{len(self._pending)}\x00"
        self._pending.append((placeholder, text, limit, what))
        return placeholder

    def restart(self) -> None:
        """Forget the values recorded so far: the rendering is begun again (off the event loop)."""
        self._pending.clear()

    async def settle(self, rendered: str) -> str:
        """``rendered`` with every value kept as an artifact stored, and its placeholder replaced by its start
        and notice."""
        for placeholder, text, limit, what in self._pending:
            handle = await self.budget.keep(text)  # issued to this run: its agent nodes may read it
            notice = self.budget.notice(what, len(text), limit, handle, readable=self.readable)
            rendered = rendered.replace(placeholder, f"{text[:limit]}\n{notice}")
        self._pending.clear()
        return rendered


def _tool_outputs(workflow: Workflow, values: Mapping[str, Any]) -> dict[int, str]:
    """By object identity, the context values that are a ``function`` node's output or a field of it: their tool."""
    sources: dict[int, str] = {}
    for node_id, value in values.items():
        node = workflow.nodes.get(node_id)
        if not isinstance(node, FunctionNode):
            continue
        sources[id(value)] = node.tool
        if isinstance(value, Mapping):
            for field in value.values():
                sources[id(field)] = node.tool
    return sources
