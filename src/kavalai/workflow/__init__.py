"""Typed workflows: a graph of nodes whose ``function`` nodes call kernel tools by URI.

Define a workflow in Python with :class:`WorkflowBuilder` or in YAML with :meth:`WorkflowEngine.from_yaml`, then
run it on a :class:`WorkflowEngine`::

    async with WorkflowEngine.from_yaml("workflow.yaml") as engine:
        result = await engine.run({"folder": "docs"})
        print(result.status, result.output)

Every value that crosses a node boundary is validated against its declared type; a run returns a
:class:`RunResult` with the status, the validated output and a trace of every node visit.
"""

from kavalai.workflow._engine import WorkflowEngine
from kavalai.workflow._expressions import Expression, compile_expression
from kavalai.workflow._graph import Workflow
from kavalai.workflow._nodes import (
    AgentNode,
    EndNode,
    FunctionNode,
    IfNode,
    LlmNode,
    Node,
    NodeBase,
    ParallelNode,
    RetryPolicy,
    StartNode,
    SwitchNode,
)
from kavalai.workflow._result import (
    InputRequested,
    NodeFailed,
    NodeFinished,
    NodeProgress,
    NodeStarted,
    NodeTrace,
    OutputData,
    OutputList,
    RunFinished,
    RunResult,
    RunStarted,
    RunStatus,
    ToolCallTrace,
    WorkflowEvent,
)
from kavalai.workflow._services import Service
from kavalai.workflow.errors import (
    ExpressionError,
    NodeError,
    NodeTimeoutError,
    NodeValidationError,
    RunMemoryError,
    RunTimeoutError,
    VisitLimitError,
    WorkflowDefinitionError,
    WorkflowError,
)

# Kaval.AI's public paths point into its wing (kavalai.workflow.kaval): the builder speaking both vocabularies.
from kavalai.workflow.kaval._bilingual import WorkflowBuilder

__all__ = [
    "AgentNode",
    "EndNode",
    "Expression",
    "ExpressionError",
    "FunctionNode",
    "IfNode",
    "InputRequested",
    "LlmNode",
    "Node",
    "NodeBase",
    "NodeError",
    "NodeFailed",
    "NodeFinished",
    "NodeProgress",
    "NodeStarted",
    "NodeTimeoutError",
    "NodeTrace",
    "NodeValidationError",
    "OutputData",
    "OutputList",
    "ParallelNode",
    "RetryPolicy",
    "RunFinished",
    "RunMemoryError",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "RunTimeoutError",
    "Service",
    "StartNode",
    "SwitchNode",
    "ToolCallTrace",
    "VisitLimitError",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowDefinitionError",
    "WorkflowEngine",
    "WorkflowError",
    "WorkflowEvent",
    "compile_expression",
]
