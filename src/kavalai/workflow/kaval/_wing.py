"""The Kaval.AI 1.0 wing's one registration: its dialect, registered with the workflow loader when the wing is
imported (the package face ``kavalai.workflow`` imports it), so nothing of ours imports the wing.

The dialect recognises Kaval.AI documents by their shape, reads them with the translator (imported only when a
Kaval.AI document is loaded), and answers their runs in Kaval.AI's terms (:class:`WorkflowState`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kavalai.workflow._load import register_dialect
from kavalai.workflow._parts import LoadedWorkflow, LoadOptions

if TYPE_CHECKING:
    from kavalai.workflow._result import RunResult

__all__ = ["KAVAL_DIALECT", "is_kaval_document"]

_KAVAL_KEYS: Final = frozenset(
    {"data_types", "llm_model", "llm_kwargs", "version", "templates", "rag_service", "rag_collection", "start"}
)


def is_kaval_document(document: Any) -> bool:
    """Whether a parsed YAML document has the Kaval.AI 1.0 shape: nodes with ``name``/``type`` (ours have
    ``id``/``kind``), or a top-level key only that format has (``data_types``, ``llm_model``, ``start``, ...)."""
    if not isinstance(document, Mapping):
        return False
    nodes = document.get("nodes")
    if isinstance(nodes, list) and nodes and isinstance(nodes[0], Mapping):
        first = nodes[0]
        if "kind" in first or "id" in first:
            return False
        if "type" in first or "name" in first:
            return True
    return any(key in document for key in _KAVAL_KEYS)


class _KavalDialect:
    """Kaval.AI 1.0's workflow documents (see :mod:`kavalai.workflow.kaval`)."""

    name = "kaval"

    def recognises(self, document: Any) -> bool:
        return is_kaval_document(document)

    def load(self, document: Any, *, base_dir: Path, source: str, options: LoadOptions) -> LoadedWorkflow:
        from kavalai import FunctionKernel
        from kavalai.workflow.kaval._translate import load_kaval_document

        given = options.get("kernel")
        kernel = FunctionKernel() if given is None else given
        workflow = load_kaval_document(
            document,
            kernel=kernel,
            base_dir=base_dir,
            rag_services=options.get("rag_services"),
            history=options.get("history"),
            source=source,
            data_models=options.get("data_models"),
        )
        return LoadedWorkflow(workflow=workflow, kernel=kernel, owns_kernel=given is None)

    def answer(self, result: RunResult) -> Any:
        from kavalai.workflow.kaval._state import WorkflowState

        return WorkflowState(result)


KAVAL_DIALECT: Final = _KavalDialect()
register_dialect(KAVAL_DIALECT)
