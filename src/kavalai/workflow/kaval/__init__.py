"""Kaval.AI 1.0 workflow documents, loaded and run by our :class:`~kavalai.workflow.WorkflowEngine`.

:meth:`WorkflowEngine.from_yaml <kavalai.workflow.WorkflowEngine.from_yaml>`, ``from_yaml_path`` and ``from_dict``
recognise the format by its shape (nodes with ``name``/``type``) and translate it into our graph, so the graph
checks, node-visit limits, timeouts, the trace and the event stream are the same for both formats. See
``docs/migrating_from_kaval.md`` for every difference.
"""

from kavalai.workflow.kaval._builder import KavalWorkflowBuilder
from kavalai.workflow.kaval._models import (
    KavalAgentNode,
    KavalArgument,
    KavalDocument,
    KavalEndNode,
    KavalFunctionNode,
    KavalIfNode,
    KavalLlmNode,
    KavalParallelNode,
    KavalPythonFunction,
    KavalRagQueryNode,
    KavalStartNode,
    KavalSwitchNode,
    KavalTemplate,
)
from kavalai.workflow.kaval._runtime import History, InMemoryHistory, RagHit, Retriever
from kavalai.workflow.kaval._translate import is_kaval_document, load_kaval_document, parse_kaval_document

# Kaval.AI 1.0's names for the document models (its ``kavalai.workflow.models``), for code written against them.
WorkflowGraph = KavalDocument
ArgumentInfo = KavalArgument
PythonFunction = KavalPythonFunction
TemplateModel = KavalTemplate
StartNode = KavalStartNode
EndNode = KavalEndNode
LLMNode = KavalLlmNode
AgentNode = KavalAgentNode
FunctionNode = KavalFunctionNode
IfNode = KavalIfNode
SwitchNode = KavalSwitchNode
ParallelNode = KavalParallelNode
RagQueryNode = KavalRagQueryNode
WorkflowBuilder = KavalWorkflowBuilder

__all__ = [
    "AgentNode",
    "ArgumentInfo",
    "EndNode",
    "FunctionNode",
    "History",
    "IfNode",
    "InMemoryHistory",
    "KavalAgentNode",
    "KavalArgument",
    "KavalDocument",
    "KavalEndNode",
    "KavalFunctionNode",
    "KavalIfNode",
    "KavalLlmNode",
    "KavalParallelNode",
    "KavalPythonFunction",
    "KavalRagQueryNode",
    "KavalStartNode",
    "KavalSwitchNode",
    "KavalTemplate",
    "KavalWorkflowBuilder",
    "LLMNode",
    "ParallelNode",
    "PythonFunction",
    "RagHit",
    "RagQueryNode",
    "Retriever",
    "StartNode",
    "SwitchNode",
    "TemplateModel",
    "WorkflowBuilder",
    "WorkflowGraph",
    "is_kaval_document",
    "load_kaval_document",
    "parse_kaval_document",
]
