"""Kaval.AI 1.0's ``kavalai.workflow.models``: the server configurations and the workflow document models.

Kept so that code written for Kaval.AI (``from kavalai.workflow.models import RestServer, McpServer``) runs unchanged;
new code imports ``RestServer`` and ``McpServer`` from :mod:`kavalai`. ``WorkflowException`` is the root of every
kavalai error (:class:`~kavalai.errors.FunctionKernelException`), so ``except WorkflowException`` still catches what
Kaval.AI raised under that name. The node and document models are those of :mod:`kavalai.workflow.kaval`, under
Kaval.AI's names.
"""

from __future__ import annotations

from kavalai.adapters.mcp import McpServer
from kavalai.adapters.rest import RestServer
from kavalai.errors import FunctionKernelException as WorkflowException
from kavalai.workflow.kaval._models import (
    KavalAgentNode as AgentNode,
)
from kavalai.workflow.kaval._models import (
    KavalArgument as ArgumentInfo,
)
from kavalai.workflow.kaval._models import (
    KavalDocument as WorkflowGraph,
)
from kavalai.workflow.kaval._models import (
    KavalEndNode as EndNode,
)
from kavalai.workflow.kaval._models import (
    KavalFunctionNode as FunctionNode,
)
from kavalai.workflow.kaval._models import (
    KavalIfNode as IfNode,
)
from kavalai.workflow.kaval._models import (
    KavalLlmNode as LLMNode,
)
from kavalai.workflow.kaval._models import (
    KavalParallelNode as ParallelNode,
)
from kavalai.workflow.kaval._models import (
    KavalRagQueryNode as RagQueryNode,
)
from kavalai.workflow.kaval._models import (
    KavalStartNode as StartNode,
)
from kavalai.workflow.kaval._models import (
    KavalSwitchNode as SwitchNode,
)

Workflow = WorkflowGraph

__all__ = [
    "AgentNode",
    "ArgumentInfo",
    "EndNode",
    "FunctionNode",
    "IfNode",
    "LLMNode",
    "McpServer",
    "ParallelNode",
    "RagQueryNode",
    "RestServer",
    "StartNode",
    "SwitchNode",
    "Workflow",
    "WorkflowException",
    "WorkflowGraph",
]
