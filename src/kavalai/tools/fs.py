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
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from kavalai.adapters.python import pythontool
from kavalai.errors import ConfigurationError
from kavalai.tools._atomic import atomic_write_bytes
from kavalai.tools._jail import Jail

if TYPE_CHECKING:
    from kavalai.kernel import FunctionKernel

__all__ = ["FsDeleted", "FsEntry", "FsFound", "FsListing", "FsMkdir", "FsStat", "FsText", "FsWritten", "register"]

EntryType = Literal["file", "dir", "symlink", "other"]
_BINARY_SNIFF = 8192
_WIDE_ENCODINGS = ("utf-16", "utf-32")


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
        ConfigurationError: ``root`` is not an existing directory.
    """
    try:
        jail = Jail(root)
    except NotADirectoryError as exc:
        raise ConfigurationError(f"Cannot register the {prefix} tools: {exc}") from exc
    group = _Group(jail, max_read_bytes, max_write_bytes, max_entries)
    tools = _read_tools(group)
    if writable:
        tools.update(_write_tools(group))
    return [kernel.register_python_tool(f"{prefix}.{name}", func) for name, func in tools.items()]


# ------------------------------------------------------------------------------------------------- read tools


def _read_tools(group: _Group) -> dict[str, Callable[..., Any]]:
    jail, entry_cap = group.jail, group.max_entries

    @pythontool
    def ls(
        path: Annotated[str, Field(description="The directory, relative to the root.")] = ".",
        pattern: Annotated[str | None, Field(description="Only names matching this glob, e.g. '*.md'.")] = None,
        recursive: Annotated[bool, Field(description="Also list subdirectories' contents.")] = False,
        max_entries: Annotated[int, Field(gt=0, description="The most entries to return.")] = entry_cap,
    ) -> FsListing:
        """List a directory: each entry's path, type, size and modification time."""
        directory = _directory(jail, path)
        regex = None if pattern is None else _glob(pattern)
        with _plain_errors(path):
            matches = (e for e in _walk(directory, recursive) if regex is None or regex.match(e.name))
            entries, truncated = _take(matches, min(max_entries, entry_cap), jail)
        return FsListing(path=jail.relative(directory), entries=entries, truncated=truncated)

    @pythontool
    def find(
        pattern: Annotated[
            str,
            Field(
                description="A glob. Without '/' it matches names at any depth ('*.py'); with '/' it matches "
                "the path below `path`, '**' spanning directories ('src/**/test_*.py')."
            ),
        ],
        path: Annotated[str, Field(description="The directory to search, relative to the root.")] = ".",
        max_results: Annotated[int, Field(gt=0, description="The most matches to return.")] = entry_cap,
    ) -> FsFound:
        """Find files and directories whose name or path matches a glob pattern."""
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise PermissionError(f"Refused pattern {pattern!r}: it must be relative and must not contain '..'.")
        base = _directory(jail, path)
        regex = _glob(pattern)
        by_path = "/" in pattern
        with _plain_errors(path):
            found = (
                e
                for e in _walk(base, recursive=True)
                if regex.match(e.path.relative_to(base).as_posix() if by_path else e.name)
            )
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
        with _plain_errors(path):
            return _read_text(jail, path, encoding, offset, min(max_bytes, group.max_read_bytes))

    @pythontool
    def stat_(path: Annotated[str, Field(description="The path, relative to the root.")]) -> FsStat:
        """Tell whether a path exists and give its type, size, modification time and permissions."""
        real = jail.resolve(path)
        try:
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
    try:
        codec = codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"Unknown encoding {encoding!r}; use a Python codec name such as 'utf-8'.") from None
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
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"Refused to read {path!r}: it is not valid {codec.name} text (byte 0x{chunk[exc.start]:02x} at "
            f"offset {offset + exc.start}); it may be binary, or pass the right encoding."
        ) from None
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
        if real == jail.root or real.is_dir():
            raise IsADirectoryError(f"Refused to write {path!r}: it is a directory.")
        existed = real.exists()
        if existed and not overwrite:
            raise FileExistsError(f"Refused to write {path!r}: it exists and overwrite is false.")
        if not real.parent.is_dir():
            if not make_parents:
                raise FileNotFoundError(f"The directory of {path!r} does not exist; pass make_parents=true.")
            with _plain_errors(path):
                real.parent.mkdir(parents=True, exist_ok=True)
        with _plain_errors(path):
            atomic_write_bytes(real, data)
        return FsWritten(path=jail.relative(real), bytes_written=len(data), created=not existed)

    @pythontool
    def mkdir(
        path: Annotated[str, Field(description="The directory to create, relative to the root.")],
        parents: Annotated[bool, Field(description="Create missing parent directories too.")] = True,
    ) -> FsMkdir:
        """Create a directory; an existing directory is not an error."""
        real = jail.resolve(path)
        if real.is_dir():
            return FsMkdir(path=jail.relative(real), created=False)
        if real.exists():
            raise FileExistsError(f"Cannot create directory {path!r}: a file exists there.")
        with _plain_errors(path):
            real.mkdir(parents=parents)
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
        with _plain_errors(path):
            kind = _kind(real.lstat().st_mode)
            if kind != "dir":
                real.unlink()
            elif recursive:
                shutil.rmtree(real)
            elif any(real.iterdir()):
                raise OSError(f"Cannot delete {path!r}: the directory is not empty; pass recursive=true.")
            else:
                real.rmdir()
        return FsDeleted(path=jail.relative(real), type=kind)

    return {"write": write, "mkdir": mkdir, "delete": delete}


def _encode(content: str, encoding: str, path: str) -> bytes:
    try:
        return content.encode(encoding)
    except LookupError:
        raise ValueError(f"Unknown encoding {encoding!r}; use a Python codec name such as 'utf-8'.") from None
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"Refused to write {path!r}: character {content[exc.start]!r} at position {exc.start} cannot be "
            f"encoded as {encoding}."
        ) from None


# ------------------------------------------------------------------------------------------------ helpers


@contextmanager
def _plain_errors(path: str) -> Iterator[None]:
    """Re-raise an OS error that names an absolute file with the caller's relative path instead."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise
        raise type(exc)(exc.errno, f"{exc.strerror}: {path!r}") from exc


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
    name: str
    info: os.stat_result


def _walk(directory: Path, recursive: bool) -> Iterator[_Found]:
    """Entries under ``directory`` depth-first in name order; symbolic links are listed, never followed."""
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed while we looked
            continue
        yield _Found(Path(entry.path), entry.name, info)
        if recursive and stat.S_ISDIR(info.st_mode):
            yield from _walk(Path(entry.path), recursive)


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


def _glob(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``*`` and ``?`` stay within one path part, ``**`` spans parts, ``[...]`` is a class."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            token, i = _glob_token(pattern, i)
            out.append(token)
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _glob_token(pattern: str, i: int) -> tuple[str, int]:
    char = pattern[i]
    if char == "*":
        return "[^/]*", i + 1
    if char == "?":
        return "[^/]", i + 1
    end = pattern.find("]", i + 2) if char == "[" else -1
    if end == -1:
        return re.escape(char), i + 1
    body = pattern[i + 1 : end]
    negate = body.startswith("!")
    body = body[1:] if negate else body
    body = body.replace("\\", "\\\\").replace("[", "\\[")
    if body.startswith("^"):
        body = "\\" + body
    return f"[{'^' if negate else ''}{body}]", end + 1
