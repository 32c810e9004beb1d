"""The path jail of the bundled ``fs`` tools: turn a caller's relative path into a real path inside the root.

A path is refused on its spelling first, the same on every platform, so a tool behaves alike on Linux and
Windows: NUL and other control characters, absolute paths, ``..``, backslashes, drive letters and UNC prefixes,
``:`` (NTFS alternate data streams such as ``file:stream``), Windows device names (``CON``, ``NUL``, ``COM1``,
...) and names ending in a dot or a space (which Windows silently strips). Then it is resolved, following every
symbolic link, and refused unless the result is still inside the root.

The check and the later use are separate steps, so a process that can already write inside the root could swap
a directory for a link in between; the jail keeps a model's paths in, it is not a sandbox against local users.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

__all__ = ["Jail", "check_spelling"]

_DEVICE_NAMES: Final = re.compile(r"^(con|prn|aux|nul|conin\$|conout\$|(com|lpt)[0-9¹²³])(\..*)?$", re.IGNORECASE)
_DRIVE: Final = re.compile(r"^[A-Za-z]:")


def check_spelling(path: str, *, what: str = "path") -> list[str]:
    """Check a relative path's spelling and return its parts; raise ``PermissionError`` saying why if refused.

    ``""`` and ``"."`` mean the root and give ``[]``.
    """
    if any(ord(char) < 0x20 or char == "\x7f" for char in path):
        kind = "a NUL byte" if "\x00" in path else "a control character"
        raise PermissionError(f"Refused {what} {path!r}: it contains {kind}.")
    if "\\" in path:
        raise PermissionError(
            f"Refused {what} {path!r}: backslashes are not allowed (Windows separators and UNC paths); "
            "use '/' between the parts of a path relative to the root."
        )
    if path.startswith("/"):
        raise PermissionError(f"Refused {what} {path!r}: it is absolute; give a path relative to the root.")
    if _DRIVE.match(path):
        raise PermissionError(f"Refused {what} {path!r}: drive letters are not allowed; give a relative path.")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    for part in parts:
        _check_part(path, part, what)
    return parts


def _check_part(path: str, part: str, what: str) -> None:
    if part == "..":
        raise PermissionError(f"Refused {what} {path!r}: '..' is not allowed; paths stay inside the root.")
    if ":" in part:
        raise PermissionError(
            f"Refused {what} {path!r}: ':' is not allowed (a drive or an NTFS alternate data stream)."
        )
    if part.endswith((".", " ")):
        raise PermissionError(
            f"Refused {what} {path!r}: the name {part!r} ends with a dot or a space, which Windows strips."
        )
    if _DEVICE_NAMES.match(part):
        raise PermissionError(f"Refused {what} {path!r}: {part!r} is a reserved Windows device name.")


class Jail:
    """Maps relative paths to real paths under ``root`` and refuses any that would leave it.

    Attributes:
        root: the root directory, absolute and resolved.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise NotADirectoryError(f"The fs root {str(root)!r} is not an existing directory.")
        self.root = resolved

    def resolve(self, path: str, *, follow_last: bool = True) -> Path:
        """The real path of ``path`` (relative to the root), symbolic links followed; raise if it leaves the root.

        Args:
            path: the caller's path, ``/``-separated, relative to the root.
            follow_last: resolve a symbolic link in the last part too; with ``False`` the result names the link
                itself (to delete it, say), and only the directory holding it must lie inside the root.

        Raises:
            PermissionError: the spelling is refused, or the path resolves outside the root.
        """
        parts = check_spelling(path)
        if not parts:
            return self.root
        candidate = self.root.joinpath(*parts)
        try:
            resolved = candidate.resolve() if follow_last else candidate.parent.resolve() / candidate.name
            # Python 3.13's non-strict resolve() leaves a symbolic link loop unresolved instead of raising.
            looped = follow_last and resolved.is_symlink()
        except RuntimeError as exc:  # a symbolic link loop (Python < 3.13); its text names the absolute path
            raise PermissionError(f"Refused path {path!r}: it cannot be resolved (a symbolic link loop).") from exc
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise PermissionError(f"Refused path {path!r}: it cannot be resolved ({reason}).") from exc
        if looped:
            raise PermissionError(f"Refused path {path!r}: it cannot be resolved (a symbolic link loop).")
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise PermissionError(f"Refused path {path!r}: it resolves outside the root (through a symbolic link).")
        return resolved

    def relative(self, path: Path) -> str:
        """``path`` (inside the root) as the ``/``-separated relative path callers use; ``"."`` for the root."""
        relative = path.relative_to(self.root).as_posix()
        return relative or "."
