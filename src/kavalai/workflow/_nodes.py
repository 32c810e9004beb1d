"""The node kinds of a workflow graph, as Pydantic models (the YAML ``nodes:`` entries validate into these).

Every node has an ``id`` (a Python identifier: node outputs are read in expressions by id) and a ``kind``. Where a
node names a data type (``output``) it is a type name of the workflow (see :mod:`kavalai.workflow._types`).

An ``inputs`` mapping binds local names to values: a string that is a context path whose first name is ``input``
or a node id (``input.folder``, ``listing.result[0]``) reads that value; ``{expr: "..."}`` evaluates an
expression; ``{literal: ...}`` is taken as is; anything else (numbers, other strings, lists, dicts) is a literal.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kavalai.kernel import Seconds

__all__ = [
    "AgentNode",
    "EndNode",
    "FunctionNode",
    "IfNode",
    "LlmNode",
    "Node",
    "NodeBase",
    "ParallelNode",
    "RetryPolicy",
    "StartNode",
    "SwitchNode",
]

NODE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RetryPolicy(_Frozen):
    """When and how a ``function`` node retries a failed tool call.

    The delay before retry ``n`` (1-based) is ``min(backoff * multiplier ** (n - 1), max_backoff)`` seconds.
    """

    attempts: int = Field(3, ge=1, le=100, description="Total attempts, the first call included.")
    backoff: float = Field(0.5, ge=0, description="Seconds to wait before the first retry.")
    multiplier: float = Field(2.0, ge=1, description="Factor applied to the delay after each retry.")
    max_backoff: float = Field(30.0, ge=0, description="The longest wait between attempts, in seconds.")
    retry_on: tuple[str, ...] = Field(
        ("ToolExecutionError", "ToolTimeoutError", "ServerConnectionError"),
        description="Names of kavalai error classes that are retried (subclasses included).",
    )

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        return float(min(self.backoff * self.multiplier ** (retry - 1), self.max_backoff))


class NodeBase(_Frozen):
    """What every node has."""

    id: str = Field(pattern=NODE_ID_PATTERN, description="Unique node id; outputs are read by it.")
    description: str | None = None

    def successors(self) -> list[tuple[str, str]]:
        """``(field, node id)`` of every node this one may continue to (parallel branches excluded)."""
        return []


class _Linear(NodeBase):
    next: str | None = Field(None, description="The node that runs after this one.")

    def successors(self) -> list[tuple[str, str]]:
        """``[("next", id)]`` when there is a next node."""
        return [("next", self.next)] if self.next is not None else []


class StartNode(_Linear):
    """Where a run begins; its output is the validated workflow input."""

    kind: Literal["start"] = "start"


class EndNode(NodeBase):
    """Where a run ends; its output, validated by the workflow's ``output`` type, is the run's output.

    ``outputs`` maps output fields to values (paths, expressions, literals); without it the output of the node
    visited just before is the workflow output.
    """

    kind: Literal["end"] = "end"
    outputs: dict[str, Any] | None = None


class FunctionNode(_Linear):
    """Calls one tool of the engine's kernel by URI."""

    kind: Literal["function"] = "function"
    tool: str = Field(description="The tool URI, e.g. python://fs.ls or mcp://files.read.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")
    output: str | None = Field(None, description="The output type; by default the tool's output model.")
    timeout: Seconds | None = Field(None, description="Seconds per attempt.")
    retry: RetryPolicy | None = None


class AgentNode(_Linear):
    """Runs an :class:`~kavalai.agent.Agent` on the engine's kernel: it may call the allowed tools."""

    kind: Literal["agent"] = "agent"
    prompt: str = Field(description="A Jinja2 template rendered with the node's inputs.")
    instructions: str | None = Field(None, description="The agent's system instructions (a template too).")
    inputs: dict[str, Any] = Field(default_factory=dict)
    allowed_tools: list[str] | None = Field(None, description="Tool URIs and globs; None for every tool.")
    max_steps: int | None = Field(None, ge=1)
    model: str | None = Field(None, description="The model, e.g. openai/gpt-4.1-mini; default: the engine's.")
    output: str | None = Field(None, description="The structured output type; default: text.")
    timeout: Seconds | None = Field(None)


class LlmNode(_Linear):
    """One model call with a structured output, no tools."""

    kind: Literal["llm"] = "llm"
    prompt: str = Field(description="A Jinja2 template rendered with the node's inputs.")
    system: str | None = Field(None, description="The system message (a template too).")
    inputs: dict[str, Any] = Field(default_factory=dict)
    model: str | None = None
    output: str | None = Field(None, description="The structured output type; default: text.")
    timeout: Seconds | None = Field(None)


class IfNode(NodeBase):
    """Continues to ``then`` when ``condition`` is truthy, else to ``else``."""

    kind: Literal["if"] = "if"
    condition: str = Field(description="An expression over the context.")
    then: str
    else_: str = Field(alias="else")

    def successors(self) -> list[tuple[str, str]]:
        """``then`` and ``else``."""
        return [("then", self.then), ("else", self.else_)]


class SwitchNode(NodeBase):
    """Continues to the node of the first case equal to ``value``, else to ``default``."""

    kind: Literal["switch"] = "switch"
    value: str = Field(description="An expression over the context.")
    cases: dict[str | bool | int | float, str] = Field(description="Case value -> node id.")
    default: str | None = None

    def successors(self) -> list[tuple[str, str]]:
        """Every case's node and the default."""
        found = [(f"cases.{key}", target) for key, target in self.cases.items()]
        return found + ([("default", self.default)] if self.default is not None else [])


class ParallelNode(_Linear):
    """Runs each branch concurrently, waits for all of them, then continues to ``next``.

    A branch starts at the node named in ``branches`` and follows ``next`` links until a node without ``next``;
    the parallel node's output maps each branch's first node id to the output of its last node.
    """

    kind: Literal["parallel"] = "parallel"
    branches: list[str] = Field(min_length=1, description="The first node of each branch.")
    timeout: Seconds | None = Field(None)


Node = Annotated[
    StartNode | EndNode | FunctionNode | AgentNode | LlmNode | IfNode | SwitchNode | ParallelNode,
    Field(discriminator="kind"),
]
