"""Kaval.AI 1.0's ``kavalai.workflow.builder``: its ``WorkflowBuilder``, for code that imports it from here.

This is :class:`kavalai.workflow.WorkflowBuilder` speaking Kaval.AI's vocabulary from the start: its ``build()``
returns a Kaval.AI document and its ``build_engine()`` our engine running it; ``isinstance(builder,
kavalai.workflow.WorkflowBuilder)`` holds.
"""

from __future__ import annotations

from kavalai.workflow.kaval._bilingual import KavalStyleWorkflowBuilder as WorkflowBuilder

__all__ = ["WorkflowBuilder"]
