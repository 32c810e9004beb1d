"""The one loader of workflow documents: a file, a YAML text or a parsed dict, in any registered dialect, becomes
neutral parts (:class:`LoadedWorkflow`: the checked graph, the kernel with the declared tools, model factories,
services, an output budget) that :class:`~kavalai.workflow.WorkflowEngine` is built from.

A dialect is a document format. Ours is built in (:mod:`kavalai.workflow._document`); others register themselves
with :func:`register_dialect` (Kaval.AI 1.0's does, from its wing :mod:`kavalai.workflow.kaval`, which this module
never imports). The first registered dialect that recognises a document's shape reads it; ours reads the rest.

Every failure is a :class:`~kavalai.workflow.WorkflowDefinitionError` naming the document (its file, or the first
line of a text) and the place in it. The loader never imports the engine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kavalai.errors import ConfigurationError
from kavalai.workflow._parts import Dialect, LoadedWorkflow, LoadOptions
from kavalai.workflow.errors import WorkflowDefinitionError

__all__ = ["checked_options", "load_workflow", "register_dialect", "text_source"]


_OPTION_NAMES = frozenset(LoadOptions.__annotations__)


def checked_options(options: Mapping[str, Any]) -> LoadOptions:
    """``options`` as :class:`LoadOptions`; a name that is not one of them is a ``TypeError`` naming it, as an
    unknown keyword argument is."""
    unknown = sorted(set(options) - _OPTION_NAMES)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (options: {', '.join(sorted(_OPTION_NAMES))})")
    checked: LoadOptions = {**options}  # type: ignore[typeddict-item]  # the names are checked just above
    return checked


_DIALECTS: list[Dialect] = []


def register_dialect(dialect: Dialect) -> None:
    """Read documents ``dialect`` recognises with it (registering the same name again replaces it)."""
    _DIALECTS[:] = [known for known in _DIALECTS if known.name != dialect.name]
    _DIALECTS.append(dialect)


def load_workflow(
    source: str | os.PathLike[str] | Mapping[str, Any],
    options: LoadOptions,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    text: bool | None = None,
) -> LoadedWorkflow:
    """Load a workflow document in any registered dialect.

    Args:
        source: a parsed document (a mapping), a file's path, or YAML text.
        options: the loading options (the kernel to register on, ...).
        base_dir: where module and relative paths are looked up: the file's folder for a file, else this (the
            current directory by default).
        text: ``True``: ``source`` is YAML text; ``False``: a file; ``None``: a :class:`~pathlib.Path`, or a
            ``str`` naming an existing file, is a file, and any other ``str`` with a newline or a colon is text.

    Raises:
        WorkflowDefinitionError: the document cannot be read or is invalid, naming the document and the place.
    """
    folder = Path.cwd() if base_dir is None else Path(base_dir)
    if isinstance(source, Mapping):
        return _load(source, folder, "<dict>", options)
    if text is None:
        text = isinstance(source, str) and not os.path.isfile(source) and ("\n" in source or ":" in source)
    if text:
        body, name = str(source), text_source(str(source))
    else:
        path = Path(source)
        body, name, folder = _read(path), str(path), path.resolve().parent
    return _load(_parsed(body, name), folder, name, options)


def _load(document: Any, base_dir: Path, source: str, options: LoadOptions) -> LoadedWorkflow:
    for dialect in _DIALECTS:
        if dialect.recognises(document):
            loaded = dialect.load(document, base_dir=base_dir, source=source, options=options)
            loaded.dialect = dialect
            return loaded
    from kavalai.workflow._document import load_document

    return load_document(document, base_dir=base_dir, source=source, kernel=options.get("kernel"))


def _read(path: Path) -> str:
    from kavalai.documents import read_document

    try:  # an unreadable file, or one that is not UTF-8 text, named as the workflow file it was meant to be
        return read_document(path, f"workflow file {str(path)!r}")
    except ConfigurationError as exc:
        raise WorkflowDefinitionError(str(exc)) from None


def _parsed(text: str, source: str) -> Any:
    from kavalai.documents import load_yaml

    try:  # bounded: size, and aliases expanded past a limit ("billion laughs") refused before anything is built
        return load_yaml(text, source=f"Workflow {source!r}")
    except ConfigurationError as exc:
        raise WorkflowDefinitionError(str(exc)) from None


#: How much of a YAML text's first line names it in messages.
_SOURCE_CHARS = 40


def text_source(text: str) -> str:
    """How messages name a workflow given as YAML text: by its first non-blank line, cut short (never the whole
    document, which may be long or hold secrets further down)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > _SOURCE_CHARS:
        first = first[: _SOURCE_CHARS - 3] + "..."
    return f"<yaml text: {first}>"
