"""The bundled ``fs`` tool group: files under one root directory, read-only unless registered writable.

Register it explicitly::

    from kavalai.tools import fs
    fs.register(kernel, root="./data")                  # fs.ls, fs.read, fs.stat, fs.find
    fs.register(kernel, root="./out", writable=True, prefix="out")   # also out.write, out.mkdir, out.delete

Every path argument is relative to the root, ``/``-separated, and passes :class:`~kavalai.tools._jail.Jail`:
``..``, absolute paths, symbolic links leading out of the root, NUL bytes and Windows tricks are refused with a
message that says why. Writes are atomic (:func:`~kavalai.tools._atomic.atomic_write_bytes`).
"""

from __future__ import annotations

import codecs
import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from kavalai.adapters.python import pythontool
from kavalai.errors import ConfigurationError
from kavalai.tools._atomic import atomic_write_bytes
from kavalai.tools._jail import Jail
from kavalai.tools._register import check_limits, register_all

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["FsDeleted", "FsEntry", "FsFound", "FsListing", "FsMkdir", "FsStat", "FsText", "FsWritten", "register"]

EntryType = Literal["file", "dir", "symlink", "other"]
_BINARY_SNIFF = 8192
_WIDE_ENCODINGS = ("utf-16", "utf-32")
_MAX_PATTERN = 1000
_MAX_PATTERN_PARTS = 64
_UNLIMITED = 1 << 30  # a depth no tree reaches


class FsEntry(BaseModel):
    """One file system entry."""

    path: str = Field(description="The path relative to the root, '/'-separated.")
    type: EntryType = Field(description="'file', 'dir', 'symlink' (listed, never followed) or 'other'.")
    size: int | None = Field(description="The size in bytes; null for a directory.")
    modified: datetime = Field(description="The last modification time, in UTC.")


class FsListing(BaseModel):
    """The result of ``fs.ls``."""

    path: str = Field(description="The directory listed, relative to the root.")
    entries: list[FsEntry] = Field(description="The entries, depth first in name order.")
    truncated: bool = Field(description="Whether more entries exist than were returned (max_entries).")


class FsFound(BaseModel):
    """The result of ``fs.find``."""

    pattern: str = Field(description="The pattern searched for.")
    matches: list[FsEntry] = Field(description="The matching entries, depth first in name order.")
    truncated: bool = Field(description="Whether more matches exist than were returned (max_results).")


class FsText(BaseModel):
    """The result of ``fs.read``."""

    path: str = Field(description="The file read, relative to the root.")
    content: str = Field(description="The decoded text.")
    encoding: str = Field(description="The encoding used.")
    size: int = Field(description="The whole file's size in bytes.")
    truncated: bool = Field(description="Whether the file continues past the text returned.")
    next_offset: int | None = Field(description="The byte offset to read the rest from; null at the end.")


class FsStat(BaseModel):
    """The result of ``fs.stat``."""

    path: str = Field(description="The path asked about, relative to the root.")
    exists: bool = Field(description="Whether anything exists at the path.")
    type: EntryType | None = Field(description="'file', 'dir' or 'other'; null if it does not exist.")
    size: int | None = Field(description="The size in bytes; null for a directory or a missing path.")
    modified: datetime | None = Field(description="The last modification time in UTC; null if missing.")
    mode: str | None = Field(description="The permission bits in octal, e.g. '0o644'; null if missing.")


class FsWritten(BaseModel):
    """The result of ``fs.write``."""

    path: str = Field(description="The file written, relative to the root.")
    bytes_written: int = Field(description="The file's new size in bytes.")
    created: bool = Field(description="Whether the file is new (false: an existing file was replaced).")


class FsMkdir(BaseModel):
    """The result of ``fs.mkdir``."""

    path: str = Field(description="The directory, relative to the root.")
    created: bool = Field(description="Whether it was created (false: it already existed).")


class FsDeleted(BaseModel):
    """The result of ``fs.delete``."""

    path: str = Field(description="The path deleted, relative to the root.")
    type: EntryType = Field(description="What was deleted: 'file', 'dir', 'symlink' or 'other'.")


@dataclass(frozen=True, slots=True)
class _Group:
    jail: Jail
    max_read_bytes: int
    max_write_bytes: int
    max_entries: int


def register(
    kernel: FunctionKernel,
    root: str | os.PathLike[str],
    *,
    writable: bool = False,
    prefix: str = "fs",
    max_read_bytes: int = 1024 * 1024,
    max_write_bytes: int = 10 * 1024 * 1024,
    max_entries: int = 1000,
) -> list[str]:
    """Register the fs tools jailed to ``root`` on ``kernel`` and return their URIs.

    Args:
        kernel: the kernel to register on.
        root: the directory every path is relative to; it must exist.
        writable: also register ``write``, ``mkdir`` and ``delete``.
        prefix: the tool-name prefix (``fs`` gives ``python://fs.ls``, ...).
        max_read_bytes: the most bytes one ``read`` returns (and the ceiling of its ``max_bytes``).
        max_write_bytes: the largest content ``write`` accepts, in encoded bytes.
        max_entries: the most entries ``ls`` and ``find`` return (and the ceiling of their limits).

    Raises:
        ConfigurationError: ``root`` is not an existing directory, or a limit is not above 0.
        ToolRegistrationError: a tool is already registered under one of the names (use another ``prefix``).
    """
    check_limits(prefix, max_read_bytes=max_read_bytes, max_write_bytes=max_write_bytes, max_entries=max_entries)
    try:
        jail = Jail(root)
    except NotADirectoryError as exc:
        raise ConfigurationError(f"Cannot register the {prefix} tools: {exc}") from exc
    group = _Group(jail, max_read_bytes, max_write_bytes, max_entries)
    tools = _read_tools(group)
    if writable:
        tools.update(_write_tools(group))
    return register_all(kernel, prefix, tools)


# ------------------------------------------------------------------------------------------------- read tools


def _read_tools(group: _Group) -> dict[str, Callable[..., Any]]:
    jail, entry_cap = group.jail, group.max_entries

    @pythontool
    def ls(
        path: Annotated[str, Field(description="The directory, relative to the root.")] = ".",
        pattern: Annotated[
            str | None, Field(max_length=_MAX_PATTERN, description="Only names matching this glob, e.g. '*.md'.")
        ] = None,
        recursive: Annotated[bool, Field(description="Also list subdirectories' contents.")] = False,
        max_depth: Annotated[
            int | None,
            Field(gt=0, description="With `recursive`: how many levels to descend (1: this directory only)."),
        ] = None,
        max_entries: Annotated[int, Field(gt=0, description="The most entries to return.")] = entry_cap,
    ) -> FsListing:
        """List a directory: each entry's path, type, size and modification time."""
        if pattern is not None and "/" in pattern:
            raise ValueError(f"The ls pattern {pattern!r} matches names, which have no '/'; use fs.find for paths.")
        depth = (max_depth or _UNLIMITED) if recursive else 1
        with _relative_errors(jail, path):
            directory = _directory(jail, path)
            found = _walk(directory, depth)
            matches = (e for e in found if pattern is None or fnmatchcase(e.parts[-1], pattern))
            entries, truncated = _take(matches, min(max_entries, entry_cap), jail)
        return FsListing(path=jail.relative(directory), entries=entries, truncated=truncated)

    @pythontool
    def find(
        pattern: Annotated[
            str,
            Field(
                min_length=1,
                max_length=_MAX_PATTERN,
                description="A glob. Without '/' it matches names at any depth ('*.py'); with '/' it matches "
                "the path below `path`, a '**' part spanning directories ('src/**/test_*.py').",
            ),
        ],
        path: Annotated[str, Field(description="The directory to search, relative to the root.")] = ".",
        max_results: Annotated[int, Field(gt=0, description="The most matches to return.")] = entry_cap,
    ) -> FsFound:
        """Find files and directories whose name or path matches a glob pattern."""
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise PermissionError(f"Refused pattern {pattern!r}: it must be relative and must not contain '..'.")
        parts = _pattern_parts(pattern)
        with _relative_errors(jail, path):
            base = _directory(jail, path)
            if "/" in pattern:
                found = (e for e in _walk(base, _UNLIMITED) if _match_parts(parts, e.parts))
            else:
                found = (e for e in _walk(base, _UNLIMITED) if fnmatchcase(e.parts[-1], pattern))
            matches, truncated = _take(found, min(max_results, entry_cap), jail)
        return FsFound(pattern=pattern, matches=matches, truncated=truncated)

    @pythontool
    def read(
        path: Annotated[str, Field(description="The file, relative to the root.")],
        encoding: Annotated[str, Field(description="The text encoding.")] = "utf-8",
        offset: Annotated[int, Field(ge=0, description="The byte offset to start at (see next_offset).")] = 0,
        max_bytes: Annotated[
            int, Field(gt=0, description="The most bytes to read; the group's limit applies too.")
        ] = group.max_read_bytes,
    ) -> FsText:
        """Read a text file. Long files come in parts: read again from `next_offset` for the rest.

        Binary files are refused.
        """
        with _relative_errors(jail, path):
            return _read_text(jail, path, encoding, offset, min(max_bytes, group.max_read_bytes))

    @pythontool
    def stat_(path: Annotated[str, Field(description="The path, relative to the root.")]) -> FsStat:
        """Tell whether a path exists and give its type, size, modification time and permissions."""
        real = jail.resolve(path)
        try:
            with _relative_errors(jail, path):
                info = real.stat()
        except FileNotFoundError:
            return FsStat(path=jail.relative(real), exists=False, type=None, size=None, modified=None, mode=None)
        kind = _kind(info.st_mode)
        return FsStat(
            path=jail.relative(real),
            exists=True,
            type=kind,
            size=None if kind == "dir" else info.st_size,
            modified=datetime.fromtimestamp(info.st_mtime, tz=UTC),
            mode=oct(stat.S_IMODE(info.st_mode)),
        )

    return {"ls": ls, "read": read, "stat": stat_, "find": find}


def _read_text(jail: Jail, path: str, encoding: str, offset: int, limit: int) -> FsText:
    codec = _text_codec(encoding)
    real = jail.resolve(path)
    info = real.stat()  # FileNotFoundError says which path is missing
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"{path!r} is a directory; use fs.ls to list it.")
    if not stat.S_ISREG(info.st_mode):
        raise PermissionError(f"Refused to read {path!r}: it is not a regular file (a device, pipe or socket).")
    with real.open("rb") as handle:
        handle.seek(offset)
        chunk = handle.read(limit)
    at_end = offset + len(chunk) >= info.st_size
    if not codec.name.startswith(_WIDE_ENCODINGS) and b"\x00" in chunk[:_BINARY_SNIFF]:
        raise ValueError(
            f"Refused to read {path!r}: it looks like a binary file (it contains NUL bytes); fs.read returns text only."
        )
    decoder = codec.incrementaldecoder("strict")
    try:
        text = decoder.decode(chunk, final=at_end)
    except UnicodeError as exc:
        where = (
            f" (byte 0x{chunk[exc.start]:02x} at offset {offset + exc.start})"
            if isinstance(exc, UnicodeDecodeError) and exc.start < len(chunk)
            else ""
        )
        hint = "it may be binary, or pass the right encoding"
        if offset and isinstance(exc, UnicodeDecodeError) and exc.start < 4:
            hint = f"offset {offset} may fall inside a character: continue from a read's next_offset"
        raise ValueError(f"Refused to read {path!r}: it is not valid {codec.name} text{where}; {hint}.") from None
    consumed = len(chunk) - len(decoder.getstate()[0])
    return FsText(
        path=jail.relative(real),
        content=text,
        encoding=codec.name,
        size=info.st_size,
        truncated=not at_end,
        next_offset=None if at_end else offset + consumed,
    )


# ------------------------------------------------------------------------------------------------ write tools


def _write_tools(group: _Group) -> dict[str, Callable[..., Any]]:
    jail = group.jail

    @pythontool
    def write(
        path: Annotated[str, Field(description="The file, relative to the root.")],
        content: Annotated[str, Field(description="The complete new text of the file.")],
        encoding: Annotated[str, Field(description="The text encoding.")] = "utf-8",
        overwrite: Annotated[bool, Field(description="Replace the file if it exists.")] = True,
        make_parents: Annotated[bool, Field(description="Create missing parent directories.")] = True,
    ) -> FsWritten:
        """Write a text file atomically: it ends up with the complete new content or keeps its old one."""
        data = _encode(content, encoding, path)
        if len(data) > group.max_write_bytes:
            raise ValueError(
                f"Refused to write {path!r}: {len(data)} bytes is more than the {group.max_write_bytes}-byte "
                "limit (max_write_bytes)."
            )
        real = jail.resolve(path)
        with _relative_errors(jail, path):
            if real == jail.root or real.is_dir():
                raise IsADirectoryError(f"Refused to write {path!r}: it is a directory.")
            existed = real.exists()
            if existed and not overwrite:
                raise FileExistsError(f"Refused to write {path!r}: it exists and overwrite is false.")
            if not real.parent.is_dir():
                if not make_parents:
                    raise FileNotFoundError(f"The directory of {path!r} does not exist; pass make_parents=true.")
                _make_dirs(real.parent, path)
            atomic_write_bytes(real, data)
        return FsWritten(path=jail.relative(real), bytes_written=len(data), created=not existed)

    @pythontool
    def mkdir(
        path: Annotated[str, Field(description="The directory to create, relative to the root.")],
        parents: Annotated[bool, Field(description="Create missing parent directories too.")] = True,
    ) -> FsMkdir:
        """Create a directory; an existing directory is not an error."""
        real = jail.resolve(path)
        with _relative_errors(jail, path):
            if real.is_dir():
                return FsMkdir(path=jail.relative(real), created=False)
            if real.exists():
                raise FileExistsError(f"Cannot create directory {path!r}: a file exists there.")
            if parents:
                _make_dirs(real, path)
            else:
                real.mkdir()
        return FsMkdir(path=jail.relative(real), created=True)

    @pythontool
    def delete(
        path: Annotated[str, Field(description="The file or directory to delete, relative to the root.")],
        recursive: Annotated[bool, Field(description="Delete a non-empty directory and its contents.")] = False,
    ) -> FsDeleted:
        """Delete a file, a symbolic link (not its target) or a directory (non-empty only with `recursive`)."""
        real = jail.resolve(path, follow_last=False)
        if real == jail.root:
            raise PermissionError("Refused to delete the root directory itself.")
        with _relative_errors(jail, path):
            kind = _kind(real.lstat().st_mode)
            if kind != "dir":
                real.unlink()
            elif recursive:
                _remove_tree(real, path)
            elif any(real.iterdir()):
                raise OSError(f"Cannot delete {path!r}: the directory is not empty; pass recursive=true.")
            else:
                real.rmdir()
        return FsDeleted(path=jail.relative(real), type=kind)

    return {"write": write, "mkdir": mkdir, "delete": delete}


def _encode(content: str, encoding: str, path: str) -> bytes:
    codec = _text_codec(encoding)
    try:
        return content.encode(codec.name)
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"Refused to write {path!r}: character {content[exc.start]!r} at position {exc.start} cannot be "
            f"encoded as {encoding}."
        ) from None
    except UnicodeError as exc:
        raise ValueError(f"Refused to write {path!r}: the content cannot be encoded as {encoding} ({exc}).") from None


def _text_codec(encoding: str) -> codecs.CodecInfo:
    """The codec called ``encoding`` if it turns bytes into text; ``ValueError`` for others (``base64``, ...)."""
    try:
        codec = codecs.lookup(encoding)
        "".encode(codec.name)  # raises LookupError for bytes-to-bytes and str-to-str codecs
    except LookupError:
        raise ValueError(
            f"Unknown text encoding {encoding!r}; use a text encoding such as 'utf-8', 'utf-16' or 'latin-1'."
        ) from None
    return codec


def _remove_tree(directory: Path, path: str) -> None:
    # shutil.rmtree never follows a link and is safe against a directory swapped for one, but it recurses.
    try:
        shutil.rmtree(directory)
    except RecursionError:
        raise OSError(
            f"Cannot delete {path!r} in one call: the tree is nested too deeply; delete its deepest parts first "
            "(what could be deleted is gone)."
        ) from None


def _make_dirs(directory: Path, path: str) -> None:
    """Create ``directory`` and its missing parents, top down without recursion (a path may be very deep)."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    try:
        if not current.is_dir():
            raise NotADirectoryError
        for each in reversed(missing):
            each.mkdir(exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(f"Cannot create {path!r}: a part of its path is a file, not a directory.") from None


# ------------------------------------------------------------------------------------------------ helpers


@contextmanager
def _relative_errors(jail: Jail, path: str) -> Iterator[None]:
    """Re-raise an OS error that names an absolute file with the path relative to the root instead.

    The absolute root is never shown to a model: the message names the file relative to the root when it lies
    inside it, otherwise the caller's ``path``.
    """
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise
        named = Path(os.fsdecode(exc.filename))
        shown = jail.relative(named) if named.is_relative_to(jail.root) else path
        raise type(exc)(exc.errno, f"{exc.strerror or type(exc).__name__}: {shown!r}") from exc


def _directory(jail: Jail, path: str) -> Path:
    directory = jail.resolve(path)
    if not directory.exists():
        raise FileNotFoundError(f"{path!r} does not exist.")
    if not directory.is_dir():
        raise NotADirectoryError(f"{path!r} is not a directory; use fs.stat or fs.read on a file.")
    return directory


@dataclass(frozen=True, slots=True)
class _Found:
    path: Path
    parts: tuple[str, ...]  # relative to the directory walked
    info: os.stat_result


def _walk(top: Path, max_depth: int) -> Iterator[_Found]:
    """Entries under ``top`` depth-first in name order, ``max_depth`` levels down (1: ``top``'s own entries).

    Symbolic links are listed, never followed. An explicit stack, so a deep tree cannot exhaust the recursion
    limit; a subdirectory that cannot be read is skipped (``top`` itself raises).
    """
    stack = [iter(_scan(top, ()))]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        yield item
        if stat.S_ISDIR(item.info.st_mode) and len(item.parts) < max_depth:
            try:
                stack.append(iter(_scan(item.path, item.parts)))
            except (PermissionError, FileNotFoundError, NotADirectoryError):
                continue


def _scan(directory: Path, parts: tuple[str, ...]) -> list[_Found]:
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    found: list[_Found] = []
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed while we looked
            continue
        found.append(_Found(Path(entry.path), (*parts, entry.name), info))
    return found


def _take(found: Iterator[_Found], limit: int, jail: Jail) -> tuple[list[FsEntry], bool]:
    entries: list[FsEntry] = []
    for item in found:
        if len(entries) == limit:
            return entries, True
        kind = _kind(item.info.st_mode)
        entries.append(
            FsEntry(
                path=jail.relative(item.path),
                type=kind,
                size=None if kind == "dir" else item.info.st_size,
                modified=datetime.fromtimestamp(item.info.st_mtime, tz=UTC),
            )
        )
    return entries, False


def _kind(mode: int) -> EntryType:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def _pattern_parts(pattern: str) -> list[str]:
    """A find pattern's parts, without ``.`` and empty ones, runs of ``**`` merged (they mean the same)."""
    parts: list[str] = []
    for part in pattern.split("/"):
        if part not in ("", ".") and not (part == "**" and parts[-1:] == ["**"]):
            parts.append(part)
    if len(parts) > _MAX_PATTERN_PARTS:
        raise ValueError(f"The pattern has {len(parts)} parts; at most {_MAX_PATTERN_PARTS} are allowed.")
    return parts


def _match_parts(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    """Whether the path ``parts`` match the glob ``pattern`` parts; a ``**`` part spans directories.

    ``*``, ``?`` and ``[...]`` match within one part (:func:`fnmatch.fnmatchcase`, which does not backtrack
    badly). A ``**`` part matches any number of parts, at least one when it ends the pattern (``docs/**`` is
    everything below ``docs``). The work is bounded by the product of the two lengths.
    """
    states = {0}  # how many of ``parts`` the pattern so far can have consumed
    for index, glob in enumerate(pattern):
        if glob == "**":
            lowest = min(states) + (1 if index == len(pattern) - 1 else 0)
            states = set(range(lowest, len(parts) + 1))
        else:
            states = {n + 1 for n in states if n < len(parts) and fnmatchcase(parts[n], glob)}
        if not states:
            return False
    return len(parts) in states
