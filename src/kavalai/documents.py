"""Reading JSON and YAML documents that may come from elsewhere (OpenAPI specs, workflow files), within limits.

Two limits hold for every document: its size in bytes, and for YAML the number of nodes it would have once its
aliases were expanded. PyYAML shares an aliased node instead of copying it, so a 1 KB "billion laughs" document
loads quickly, but anything that walks the result (schema checks, serialisation, validation) walks every
expansion, for minutes. Counting the expansion before anything is built refuses such a document at once; the count
itself is linear in the document's size (each node is counted once, memoised).

Written here rather than taken from a library because PyYAML, the YAML parser we use, has no such limit.
"""

from __future__ import annotations

import errno
import json
import math
import os
import select
import stat
import time
from typing import Any, Final

import yaml

from kavalai.errors import ConfigurationError
from kavalai.kernel import required_seconds

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_NODES",
    "READ_TIMEOUT",
    "load_json_or_yaml",
    "load_yaml",
    "read_document",
]

#: The default size limit of one document: far above any real OpenAPI spec or workflow file.
MAX_DOCUMENT_BYTES: Final = 32 * 1024 * 1024
#: The default limit on the nodes of a YAML document with its aliases expanded.
MAX_DOCUMENT_NODES: Final = 2_000_000
_CHUNK: Final = 64 * 1024  # bytes a document is read by
#: How long a document that is not a regular file (a FIFO, a ``/dev/fd/N`` pipe) may take to come, in seconds.
READ_TIMEOUT: Final = 30.0
_MAX_POLL_MS: Final = 2**31 - 1  # the longest one poll() waits, in milliseconds (a C int)

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_document(
    path: str | os.PathLike[str],
    what: str,
    *,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    timeout: float = READ_TIMEOUT,
) -> str:
    """The text of the UTF-8 file at ``path`` (line endings read as ``Path.read_text`` reads them); at most
    ``max_bytes`` are read, so a larger file (or a device or pipe that never ends) is refused before it is held in
    memory, not after. A path that is not a regular file (a FIFO, a process substitution's ``/dev/fd/N`` pipe, a
    device) is opened without waiting for a writer and read as its data comes, for ``timeout`` seconds in all: a FIFO
    nobody writes to, or a writer that never finishes, is refused then instead of waited on for ever.

    Raises:
        ConfigurationError: starting with ``what`` (``"the configuration file 'x.yaml'"``), when the file cannot be
            read, is over ``max_bytes``, is not UTF-8 text, or does not end within ``timeout``.
        ValueError: ``timeout`` is not a number of seconds above 0.
    """
    seconds = required_seconds(timeout, what="timeout")
    try:
        data = _read_at_most(path, max_bytes + 1, seconds)  # one byte past the limit tells a file over it
    except TimeoutError:
        raise ConfigurationError(
            f"Cannot read {what}: it is not a regular file, and its data did not end within {seconds:g} s (a FIFO "
            "nobody writes to, or a writer that does not finish); write it to a file, or start its writer first."
        ) from None
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


def _read_at_most(path: str | os.PathLike[str], limit: int, seconds: float) -> bytes:
    """Up to ``limit`` bytes of the file at ``path``, in chunks (``read(limit)`` would allocate the whole limit for
    every file, however small). Opened with ``O_NONBLOCK``, so a FIFO without a writer does not hold ``open()``; a
    regular file is then read as usual, anything else as its data comes, within ``seconds`` (``TimeoutError``)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if stat.S_ISREG(os.fstat(fd).st_mode) or not hasattr(select, "poll"):
            os.set_blocking(fd, True)
            return _chunks(fd, limit, None)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return _chunks(fd, limit, (poller, time.monotonic() + seconds))
    finally:
        os.close(fd)


def _chunks(fd: int, limit: int, waiting: tuple[Any, float] | None) -> bytes:
    """Read ``fd`` to its end or ``limit`` bytes; with ``waiting`` (a poller and a deadline), wait for each chunk
    first: a FIFO that has had no writer reads as ended at once, so its data is waited for, not read for."""
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        if waiting is not None:
            _wait_readable(*waiting)
        try:
            chunk = os.read(fd, min(_CHUNK, limit - total))
        except BlockingIOError:
            continue  # woken with nothing to read (yet)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _wait_readable(poller: Any, deadline: float) -> None:
    """Wait until ``poller``'s file is readable, or raise ``TimeoutError`` at ``deadline`` (monotonic). One poll
    waits at most :data:`_MAX_POLL_MS`: ``poll()`` takes a C ``int`` of milliseconds (about 24.8 days), and a
    timeout the seconds rule allows (up to a year) is longer."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if poller.poll(min(max(1, math.ceil(left * 1000)), _MAX_POLL_MS)):
            return


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
        except (ValueError, OverflowError) as exc:
            # a scalar PyYAML's constructors cannot build: an integer past Python's 4,300 digits, a date that is
            # no date (2001-13-01); raised raw by them, not as a YAMLError
            raise ConfigurationError(f"{source} holds a value YAML cannot read: {exc}") from None
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
