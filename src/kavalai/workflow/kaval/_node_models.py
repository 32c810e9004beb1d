"""The parts of a Kaval.AI 1.0 workflow document, as Pydantic models with upstream's field names: its nodes,
arguments, Python functions and templates (the document itself is :mod:`kavalai.workflow.kaval._models`'s).

Unlike upstream, unknown keys are refused (a misspelt field such as ``promt`` would otherwise load and do nothing).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "KavalAgentNode",
    "KavalArgument",
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
    "Strict",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class KavalArgument(Strict):
    """One node input: ``literal`` (``value`` as is), ``context`` (a path in the run context) or ``history``
    (a path in earlier runs of the session). Without ``value`` and ``name`` the input's own key is the path."""

    type: Literal["literal", "context", "history"]
    value: Any = None
    name: str | None = None


class KavalPythonFunction(Strict):
    """A Python tool: ``path`` is the dotted import path, ``name`` the tool name (``python://<name>``)."""

    name: str
    path: str


class KavalTemplate(Strict):
    """A named text fragment prompts read as ``{{ templates.<name> }}``."""

    name: str
    value: str


class _Node(Strict):
    name: str = Field(min_length=1)


class KavalStartNode(_Node):
    """Where a run begins."""

    type: Literal["start"] = "start"
    next: str


class KavalEndNode(_Node):
    """Where a run ends; ``output`` names the context variable returned."""

    type: Literal["end"] = "end"
    output: str = "output"


class _ModelNode(_Node):
    prompt: str
    inputs: dict[str, KavalArgument] = Field(default_factory=dict)
    output: str
    next: str
    use_history: bool = True
    history_limit: int = Field(50, ge=0)
    history_max_chars: int | None = Field(None, ge=1)
    llm_model: str | None = None
    llm_kwargs: dict[str, Any] = Field(default_factory=dict)
    stream_output: bool = False
    stream_delta: bool = False


class KavalLlmNode(_ModelNode):
    """One model call; the structured answer is stored under ``output``."""

    type: Literal["llm"] = "llm"


class KavalAgentNode(_ModelNode):
    """A tool-calling agent; its final answer is stored under ``output``."""

    type: Literal["agent"] = "agent"
    allowed_tools: list[str] | None = None
    max_steps: int = Field(10, ge=1)
    stream_instructions: bool = False
    stream_partials: bool = False


class KavalFunctionNode(_Node):
    """Calls one tool; ``method`` is the HTTP method of a ``rest://`` call."""

    type: Literal["function"] = "function"
    tool: str
    inputs: dict[str, KavalArgument] = Field(default_factory=dict)
    output: str
    next: str
    method: str = "get"


class KavalIfNode(_Node):
    """Continues to ``then`` when ``condition`` holds, else to ``else``."""

    type: Literal["if"] = "if"
    condition: str
    then: str
    else_: str = Field(alias="else")


class KavalSwitchNode(_Node):
    """Continues to the case whose key equals ``expr`` as text, else to ``default``."""

    type: Literal["switch"] = "switch"
    expr: str
    cases: dict[str, str] = Field(default_factory=dict)
    default: str | None = None


class KavalParallelNode(_Node):
    """Runs each branch (up to the join node ``next``) concurrently."""

    type: Literal["parallel"] = "parallel"
    branches: list[str] = Field(min_length=1)
    next: str
    max_concurrency: int | None = Field(None, ge=1)


class KavalRagQueryNode(_Node):
    """Queries a retriever and stores the hits (or their joined text) under ``output``."""

    type: Literal["rag_query"] = "rag_query"
    query: str
    output: str
    next: str
    service: str | None = None
    collection: str | None = None
    top_k: int = Field(5, ge=1)
    source_ids: list[str] | None = None
    match: dict[str, str | int | float | bool] | None = Field(None, min_length=1)
    keep_best: bool = False
    min_similarity: float | None = Field(None, ge=-1.0, le=1.0)
    store: Literal["results", "content"] = "results"


KavalNode = Annotated[
    KavalStartNode
    | KavalEndNode
    | KavalLlmNode
    | KavalAgentNode
    | KavalFunctionNode
    | KavalIfNode
    | KavalSwitchNode
    | KavalParallelNode
    | KavalRagQueryNode,
    Field(discriminator="type"),
]
