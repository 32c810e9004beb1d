"""The Kaval.AI 1.0 workflow document, as Pydantic models with upstream's field names.

These models only describe the document; :mod:`kavalai.workflow.kaval._translate` turns a checked document into
our :class:`~kavalai.workflow.Workflow` graph. Unlike upstream, unknown keys are refused (a misspelt field such as
``promt`` would otherwise load and do nothing).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

__all__ = [
    "KavalAgentNode",
    "KavalArgument",
    "KavalDocument",
    "KavalEndNode",
    "KavalFunctionNode",
    "KavalIfNode",
    "KavalLlmNode",
    "KavalNode",
    "KavalParallelNode",
    "KavalPythonFunction",
    "KavalRagQueryNode",
    "KavalStartNode",
    "KavalSwitchNode",
    "KavalTemplate",
]


from kavalai.workflow.kaval._checks import check_document
from kavalai.workflow.kaval._node_models import (
    KavalAgentNode,
    KavalArgument,
    KavalEndNode,
    KavalFunctionNode,
    KavalIfNode,
    KavalLlmNode,
    KavalNode,
    KavalParallelNode,
    KavalPythonFunction,
    KavalRagQueryNode,
    KavalStartNode,
    KavalSwitchNode,
    KavalTemplate,
    Strict,
)


class KavalDocument(Strict):
    """A Kaval.AI 1.0 workflow document (the root of its YAML)."""

    name: str = "workflow"
    description: str = ""
    version: str = "2.0"
    start_node: str | None = Field(None, alias="start", description="Optional: the start node's name.")
    llm_model: str | None = None
    llm_kwargs: dict[str, Any] = Field(default_factory=dict)
    rag_service: str | None = None
    rag_collection: str | None = None
    data_types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    rest_servers: list[dict[str, Any]] = Field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    templates: list[KavalTemplate] = Field(default_factory=list)
    python_functions: list[KavalPythonFunction] = Field(default_factory=list)
    nodes: list[KavalNode]

    @model_validator(mode="after")
    def _check(self) -> KavalDocument:
        check_document(self)
        return self

    @property
    def start(self) -> str:
        """The name of the start node."""
        return next(node.name for node in self.nodes if isinstance(node, KavalStartNode))

    @property
    def output_type(self) -> str:
        """The data type every end node returns."""
        return next(node.output for node in self.nodes if isinstance(node, KavalEndNode))

    @property
    def node_map(self) -> dict[str, KavalNode]:
        """The nodes by name."""
        return {node.name: node for node in self.nodes}
