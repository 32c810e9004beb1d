"""Kaval.AI 1.0 workflow documents, loaded and run by our :class:`~kavalai.workflow.WorkflowEngine`.

:meth:`WorkflowEngine.from_yaml <kavalai.workflow.WorkflowEngine.from_yaml>`, ``from_yaml_path`` and ``from_dict``
recognise the format by its shape (nodes with ``name``/``type``) and translate it into our graph, so the graph
checks, node-visit limits, timeouts, the trace and the event stream are the same for both formats. See
``docs/migrating_from_kaval.md`` for every difference.
"""

from kavalai.workflow.kaval._models import KavalArgument, KavalDocument
from kavalai.workflow.kaval._runtime import History, InMemoryHistory, RagHit, Retriever
from kavalai.workflow.kaval._translate import is_kaval_document, load_kaval_document, parse_kaval_document

__all__ = [
    "History",
    "InMemoryHistory",
    "KavalArgument",
    "KavalDocument",
    "RagHit",
    "Retriever",
    "is_kaval_document",
    "load_kaval_document",
    "parse_kaval_document",
]
