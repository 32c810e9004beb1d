"""The neutral parts of a loaded workflow document, whatever its dialect, and the options every way of loading one
takes: what :mod:`kavalai.workflow._load`, the dialects and the engine share.

Types only: no function here runs while a document is loaded (the loader, :mod:`kavalai.workflow._load`, checks the
options; our dialect, :mod:`kavalai.workflow._document`, builds the kernel sections).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

if TYPE_CHECKING:
    from pydantic import BaseModel

    from kavalai import FunctionKernel
    from kavalai.agent.budget import OutputBudget
    from kavalai.durable import DurableRunner
    from kavalai.llm.base import LLMClient
    from kavalai.workflow._factory import ClientFactory
    from kavalai.workflow._graph import Workflow
    from kavalai.workflow._result import RunResult
    from kavalai.workflow._services import Service

__all__ = [
    "UNSET",
    "Dialect",
    "LoadOptions",
    "LoadedWorkflow",
]


class _Unset:
    """The type of :data:`UNSET`."""

    def __repr__(self) -> str:
        return "UNSET"


#: An option left as the workflow says (``timeout``: the document's; ``None`` means "no limit").
UNSET = _Unset()


class LoadOptions(TypedDict, total=False):
    """The options every way of loading a workflow takes (``WorkflowEngine.from_yaml(path, **options)``); see
    :class:`~kavalai.workflow.WorkflowEngine` for each. ``rag_services``, ``history`` and ``data_models`` concern
    Kaval.AI 1.0 documents only."""

    kernel: FunctionKernel | None
    llm: LLMClient | str | None
    llms: Mapping[str, LLMClient] | None
    max_visits: int | None
    timeout: float | _Unset | None
    durable: DurableRunner | str | bool | None
    client_factory: ClientFactory | None
    rag_services: Any
    history: Any
    data_models: Mapping[str, type[BaseModel]] | None


@dataclass(slots=True)
class LoadedWorkflow:
    """A document's neutral parts, whatever its dialect.

    Attributes:
        workflow: the checked graph.
        kernel: the kernel with the declared tools and servers registered (nothing connected yet).
        owns_kernel: whether the loader made the kernel (then the engine closes it).
        models: client factories by model name (the engine creates and closes the clients).
        services: what the engine starts with its connections (OpenAPI imports, REST apps it serves).
        output_budget: the document's output budget, or ``None``.
        dialect: the dialect that read it (``None`` for ours); a dialect may answer runs in its own terms.
    """

    workflow: Workflow
    kernel: FunctionKernel
    owns_kernel: bool = True
    models: dict[str, Callable[[], LLMClient]] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    output_budget: OutputBudget | None = None
    dialect: Dialect | None = None


class Dialect(Protocol):
    """A workflow document format other than ours (Kaval.AI 1.0's registers one)."""

    name: str

    def recognises(self, document: Any) -> bool:
        """Whether ``document`` (parsed, any shape) is of this dialect."""

    def load(self, document: Any, *, base_dir: Path, source: str, options: LoadOptions) -> LoadedWorkflow:
        """Read ``document`` into neutral parts; raise :class:`WorkflowDefinitionError`."""

    def answer(self, result: RunResult) -> Any:
        """What a run of a workflow of this dialect returns to its caller (the result in the dialect's terms)."""
