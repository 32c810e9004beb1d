"""Tool URIs <-> provider function names, in one place.

Providers accept function names matching ``^[a-zA-Z0-9_-]{1,64}$``; kernel URIs hold ``://`` and dots. A URI
becomes its scheme and path joined by ``_`` with every other character replaced by ``_``
(``mcp://files.read`` -> ``mcp_files_read``). When two URIs of one request would get the same name, or a name
would be longer than 64 characters, each affected name is shortened and ends in ``_`` and 8 hex digits of the
URI's SHA-256, so the mapping stays collision-free and does not depend on the order of the tools.

Names that are not URIs (a tool the model made up, kept in the conversation) are sent back as they were; they never
change the name of an offered tool, and never shadow one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["MAX_NAME_LENGTH", "ToolNameMap", "provider_name"]

#: The longest function name providers accept.
MAX_NAME_LENGTH: Final = 64
_INVALID: Final = re.compile(r"[^A-Za-z0-9_-]+")
_HASH_CHARS: Final = 8


def provider_name(uri: str) -> str:
    """The readable provider name of ``uri`` before collision handling (may exceed 64 characters)."""
    scheme, sep, path = uri.partition("://")
    readable = f"{scheme}_{path}" if sep else uri
    return _INVALID.sub("_", readable).strip("_") or "tool"


def _hashed(uri: str, base: str, chars: int = _HASH_CHARS) -> str:
    digest = hashlib.sha256(uri.encode()).hexdigest()[:chars]
    return f"{base[: MAX_NAME_LENGTH - chars - 1]}_{digest}"


def _fits(name: str) -> str | None:
    return name if len(name) <= MAX_NAME_LENGTH else None


class ToolNameMap:
    """The two-way mapping between the tool URIs of one request and the names sent to the provider.

    Args:
        uris: the URIs of the tools offered to the model.
        mentioned: other tool names of the conversation (calls and results in the history); URIs among them
            are mapped like offered ones, anything else (a made-up name) is sent as it is.
    """

    def __init__(self, uris: Iterable[str], mentioned: Iterable[str] = ()) -> None:
        known = set(uris)
        known.update(name for name in mentioned if "://" in name)
        groups: dict[str, list[str]] = {}
        for uri in sorted(known):
            groups.setdefault(provider_name(uri), []).append(uri)
        self._to_provider: dict[str, str] = {}
        for base, members in groups.items():
            needs_hash = len(members) > 1 or len(base) > MAX_NAME_LENGTH
            for uri in members:
                self._to_provider[uri] = _hashed(uri, base) if needs_hash else base
        self._settle_clashes()
        self._to_uri = {name: uri for uri, name in self._to_provider.items()}

    def _settle_clashes(self) -> None:
        """A hashed name can, in theory, equal another URI's readable name: give both a longer hash."""
        seen: dict[str, str] = {}
        for uri, name in sorted(self._to_provider.items()):
            other = seen.get(name)
            if other is None:
                seen[name] = uri
                continue
            for clashing in (other, uri):
                self._to_provider[clashing] = _hashed(clashing, provider_name(clashing), chars=16)

    def to_provider(self, uri: str) -> str:
        """The provider name of ``uri``; a name that is not a URI of this request is sent as it is, made valid."""
        name = self._to_provider.get(uri)
        if name is not None:
            return name
        base = provider_name(uri)
        return _fits(base) or _hashed(uri, base)

    def to_uri(self, name: str) -> str:
        """The URI behind a provider name; an unknown name (a tool the model made up) is returned unchanged."""
        return self._to_uri.get(name, name)

    def __len__(self) -> int:
        """The number of URIs mapped."""
        return len(self._to_provider)

    def __repr__(self) -> str:
        return f"ToolNameMap({self._to_provider!r})"
