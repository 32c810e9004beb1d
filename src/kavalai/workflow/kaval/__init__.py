"""Kaval.AI 1.0 workflow documents, loaded and run by our :class:`~kavalai.workflow.WorkflowEngine`.

:meth:`WorkflowEngine.from_yaml <kavalai.workflow.WorkflowEngine.from_yaml>`, ``from_yaml_path`` and ``from_dict``
recognise the format by its shape (nodes with ``name``/``type``) and translate it into our graph, so the graph
checks, node-visit limits, timeouts, the trace and the event stream are the same for both formats; a run answers
in Kaval.AI's terms (:class:`WorkflowState`). See ``docs/migrating_from_kaval.md`` for every difference.

The wing points inward: it imports kavalai's workflow modules, and ours import nothing of it. Its one
registration point is :mod:`kavalai.workflow.kaval._wing`, which registers the dialect with the loader when the
package face ``kavalai.workflow`` imports the wing.
"""

from typing import TYPE_CHECKING, Any

# The wing's one registration point: importing the wing registers Kaval.AI 1.0's dialect with the loader. The rest
# is imported when first asked for, so `import kavalai.workflow` (whose face imports the wing for its builder)
# pays only for what a program uses.
from kavalai.workflow.kaval._wing import KAVAL_DIALECT, is_kaval_document

if TYPE_CHECKING:
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
    from kavalai.workflow.kaval._state import WorkflowState
    from kavalai.workflow.kaval._translate import load_kaval_document, parse_kaval_document

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

#: Kaval.AI 1.0's names for the document models (its ``kavalai.workflow.models``): aliases of ours.
_ALIASES: dict[str, str] = {
    "WorkflowGraph": "KavalDocument",
    "ArgumentInfo": "KavalArgument",
    "PythonFunction": "KavalPythonFunction",
    "TemplateModel": "KavalTemplate",
    "StartNode": "KavalStartNode",
    "EndNode": "KavalEndNode",
    "LLMNode": "KavalLlmNode",
    "AgentNode": "KavalAgentNode",
    "FunctionNode": "KavalFunctionNode",
    "IfNode": "KavalIfNode",
    "SwitchNode": "KavalSwitchNode",
    "ParallelNode": "KavalParallelNode",
    "RagQueryNode": "KavalRagQueryNode",
    "WorkflowBuilder": "KavalWorkflowBuilder",
}
#: The module each lazily imported name of ours lives in (its attribute has the same name).
_HOMES: dict[str, str] = {
    "KavalWorkflowBuilder": "_builder",
    **{name: "_models" for name in _ALIASES.values() if name != "KavalWorkflowBuilder"},
    **dict.fromkeys(("History", "InMemoryHistory", "RagHit", "Retriever"), "_runtime"),
    "WorkflowState": "_state",
    "load_kaval_document": "_translate",
    "parse_kaval_document": "_translate",
}


def __getattr__(name: str) -> Any:
    attribute = _ALIASES.get(name, name)
    home = _HOMES.get(attribute)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), attribute)
    globals()[name] = value
    return value


__all__ = [
    "KAVAL_DIALECT",
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
    "WorkflowState",
    "is_kaval_document",
    "load_kaval_document",
    "parse_kaval_document",
]
