"""Kaval.AI 1.0's ``kavalai.workflow.models``: the server configurations and the workflow document model.

Kept so that code written for Kaval.AI (``from kavalai.workflow.models import RestServer, McpServer``) runs unchanged;
new code imports ``RestServer`` and ``McpServer`` from :mod:`kavalai`. ``WorkflowException`` is the root of every
kavalai error (:class:`~kavalai.errors.FunctionKernelException`), so ``except WorkflowException`` still catches what
Kaval.AI raised under that name.
"""

from __future__ import annotations

from kavalai.adapters.mcp import McpServer
from kavalai.adapters.rest import RestServer
from kavalai.errors import FunctionKernelException as WorkflowException
from kavalai.workflow.kaval import KavalDocument as Workflow

__all__ = ["McpServer", "RestServer", "Workflow", "WorkflowException"]
