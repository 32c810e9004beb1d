"""Reading JSON and YAML documents that may come from elsewhere (OpenAPI specs, workflow files), within limits.

Two limits hold for every document: its size in bytes, and for YAML the number of nodes it would have once its
aliases were expanded. PyYAML shares an aliased node instead of copying it, so a 1 KB "billion laughs" document
loads quickly, but anything that walks the result (schema checks, serialisation, validation) walks every
expansion, for minutes. Counting the expansion before anything is built refuses such a document at once; the count
itself is linear in the document's size (each node is counted once, memoised).

Written here rather than taken from a library because PyYAML, the YAML parser we use, has no such limit.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

import yaml

from kavalai.errors import ConfigurationError

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_DOCUMENT_NODES", "load_json_or_yaml", "load_yaml", "read_document"]

#: The default size limit of one document: far above any real OpenAPI spec or workflow file.
MAX_DOCUMENT_BYTES: Final = 32 * 1024 * 1024
#: The default limit on the nodes of a YAML document with its aliases expanded.
MAX_DOCUMENT_NODES: Final = 2_000_000
_CHUNK: Final = 64 * 1024  # bytes a document is read by

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_document(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The text of the UTF-8 file at ``path`` (line endings read as ``Path.read_text`` reads them); at most
    ``max_bytes`` are read, so a larger file (or a device or pipe that never ends) is refused before it is held in
    memory, not after.

    Raises:
        ConfigurationError: starting with ``what`` (``"the configuration file 'x.yaml'"``), when the file cannot be
            read, is over ``max_bytes``, or is not UTF-8 text.
    """
    try:
        data = _read_at_most(path, max_bytes + 1)  # one byte past the limit tells a file over it
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {what}: {exc.strerror or exc}.") from None
    if len(data) > max_bytes:
        raise ConfigurationError(
            f"Cannot read {what}: it is over the limit of {max_bytes:,} bytes for one document; raise max_bytes if "
            "it is genuine."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"Cannot read {what}: it is not UTF-8 text ({exc.reason} at byte {exc.start:,}); save it as UTF-8."
        ) from None
    # universal newlines, as read_text gives them (positions in YAML errors then count lines as before)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _read_at_most(path: str | os.PathLike[str], limit: int) -> bytes:
    """Up to ``limit`` bytes of the file at ``path``, in chunks: ``read(limit)`` would allocate the whole limit for
    every file, however small."""
    chunks: list[bytes] = []
    total = 0
    with open(path, "rb", buffering=0) as file:
        while total < limit:
            chunk = file.read(min(_CHUNK, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def load_yaml(
    text: str | bytes,
    *,
    source: str,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    max_nodes: int = MAX_DOCUMENT_NODES,
) -> Any:
    """Parse a YAML document safely (no Python objects), within ``max_bytes`` and ``max_nodes``.

    Raises:
        ConfigurationError: the document is too large, expands past ``max_nodes``, or is not valid YAML; the
            message names ``source``, the limit and how to raise it.
    """
    _check_size(text, source, max_bytes)
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{source} is not valid YAML: {exc}") from exc
        if node is None:
            return None
        expanded = _expanded_size(node, max_nodes)
        if expanded > max_nodes:
            raise ConfigurationError(
                f"{source} expands to more than {max_nodes:,} nodes through its YAML aliases (anchors reused many "
                f"times over, as in a 'billion laughs' document), so it is refused. Raise max_nodes if it is "
                "genuine."
            )
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{source} is not valid YAML: {exc}") from exc
    finally:
        loader.dispose()


def load_json_or_yaml(
    text: str | bytes,
    *,
    source: str,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    max_nodes: int = MAX_DOCUMENT_NODES,
) -> Any:
    """Parse ``text`` as JSON when it looks like a JSON object or array, else as YAML, within the same limits.

    JSON is refused when nested past the parser's depth, with the same error type as every other problem.
    """
    _check_size(text, source, max_bytes)
    stripped = text.lstrip()[:1]
    if stripped in ("{", "[", b"{", b"["):
        try:
            return json.loads(text)
        except RecursionError:
            raise ConfigurationError(f"{source} is JSON nested too deeply to be read.") from None
        except ValueError as exc:
            raise ConfigurationError(f"{source} is not valid JSON: {exc}") from exc
    return load_yaml(text, source=source, max_bytes=max_bytes, max_nodes=max_nodes)


def _check_size(text: str | bytes, source: str, max_bytes: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    if size > max_bytes:
        raise ConfigurationError(
            f"{source} is {size:,} bytes, over the limit of {max_bytes:,} bytes for one document; raise "
            "max_bytes if it is genuine."
        )


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """The number of nodes under ``root`` with every alias expanded, counting each distinct node once (memoised)
    and stopping early once past ``limit``. Iterative, so a deeply nested document cannot exhaust the stack."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            visiting.discard(key)
            total = 1 + sum(sizes.get(id(child), 0) for child in children)
            sizes[key] = min(total, limit + 1)
            continue
        if key in visiting:
            return limit + 1  # a node inside itself (a recursive alias): its expansion never ends
        visiting.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in visiting:
                return limit + 1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes.get(id(root), 0)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
