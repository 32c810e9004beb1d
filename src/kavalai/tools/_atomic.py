"""Atomic file replacement: a write either lands completely or leaves the old file untouched."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes"]

_NEW_FILE_MODE = 0o644


def atomic_write_bytes(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` atomically.

    The bytes go to a temporary file in the same directory (so the rename stays on one file system), are flushed
    and fsynced, and the file is renamed over ``target`` with ``os.replace``. On any failure the temporary file
    is removed and ``target`` keeps its old content. An existing file keeps its permission bits.
    """
    directory = target.parent
    mode = _mode_of(target)
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{target.name[:64]}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _fsync_directory(directory)


def _mode_of(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return _NEW_FILE_MODE


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable on POSIX; Windows cannot open a directory, and there it is not needed.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
