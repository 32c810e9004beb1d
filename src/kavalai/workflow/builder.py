"""Kaval.AI 1.0's ``kavalai.workflow.builder``: its ``WorkflowBuilder``, for code that imports it from here.

This one is always Kaval.AI's builder (:class:`kavalai.workflow.kaval.KavalWorkflowBuilder`): its ``build()``
returns a Kaval.AI document and its ``build_engine()`` our engine running it. ``from kavalai.workflow import
WorkflowBuilder`` is kavalai's own builder, which hands over to this one when it is called Kaval.AI's way.
"""

from __future__ import annotations

from kavalai.workflow.kaval._builder import KavalWorkflowBuilder as WorkflowBuilder

__all__ = ["WorkflowBuilder"]
