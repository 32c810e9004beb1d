"""What a run of a workflow built or loaded the Kaval.AI 1.0 way returns: Kaval.AI's ``WorkflowState`` questions
answered as Kaval.AI answered them, over our :class:`~kavalai.workflow.RunResult`."""

from __future__ import annotations

import json
from typing import Any, Literal

from kavalai.workflow._result import RunResult

__all__ = ["WorkflowState"]


class WorkflowState:
    """A Kaval.AI-way run's result in Kaval.AI 1.0's terms.

    ``status`` is ``"completed"`` or ``"failed"``; ``trace`` the names of the nodes run, in order; ``error`` the
    error's text; ``output_data`` the end node's output. Every other attribute is our
    :class:`~kavalai.workflow.RunResult`'s (``ok``, ``output``, ``visited``, ``raise_for_status()``, ...), and
    :attr:`result` is that result itself, with our ``status`` and ``trace`` records.
    """

    __slots__ = ("result",)

    def __init__(self, result: RunResult) -> None:
        #: Our result of the run.
        self.result = result

    @property
    def workflow_name(self) -> str:
        """The workflow's name."""
        return self.result.workflow

    @property
    def status(self) -> Literal["completed", "failed"]:
        """``"completed"`` when the run reached its end node, else ``"failed"`` (a time-out too)."""
        return "completed" if self.result.ok else "failed"

    @property
    def trace(self) -> list[str]:
        """The names of the nodes run, in the order they finished."""
        return [_name(visit.node) for visit in self.result.trace]

    @property
    def current_node(self) -> str | None:
        """The last node run (the one that failed, for a failed run)."""
        failed = getattr(self.result.error, "node", None)
        if isinstance(failed, str):
            return _name(failed)
        return _name(self.result.trace[-1].node) if self.result.trace else None

    @property
    def error(self) -> str | None:
        """What ended a failed run, as text (``None`` for a completed one)."""
        return None if self.result.error is None else str(self.result.error)

    @property
    def duration_seconds(self) -> float:
        """How long the run took."""
        return self.result.duration

    def to_json(self) -> str:
        """Kaval.AI's fields as a JSON text."""
        return json.dumps(
            {
                "workflow_name": self.workflow_name,
                "status": self.status,
                "current_node": self.current_node,
                "trace": self.trace,
                "output_data": self.result.to_dict().get("output") if self.result.ok else None,
                "error": self.error,
                "duration_seconds": self.duration_seconds,
                "run_id": self.result.run_id,
            },
            default=str,
        )

    def __getattr__(self, name: str) -> Any:
        if name == "result":  # not set yet (a copy being made): never look it up on itself
            raise AttributeError(name)
        return getattr(self.result, name)

    def __repr__(self) -> str:
        return f"WorkflowState(workflow_name={self.workflow_name!r}, status={self.status!r}, trace={self.trace!r})"


def _name(node_id: str) -> str:
    """A Kaval.AI node's name from our node id (a name our expressions reserve got a ``#`` appended)."""
    return node_id.removesuffix("#")
