"""Tool URIs <-> provider function names, in one place.

Providers accept function names matching ``^[a-zA-Z0-9_-]{1,64}$``; kernel URIs hold ``://`` and dots. A URI
becomes its scheme and path joined by ``_`` with every other character replaced by ``_``
(``mcp://files.read`` -> ``mcp_files_read``). When two URIs of one request would get the same name, or a name
would be longer than 64 characters, each affected name is shortened and ends in ``_`` and 8 hex digits of the
URI's SHA-256, so the mapping stays collision-free and does not depend on the order of the tools.
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


def _hashed(uri: str, base: str) -> str:
    digest = hashlib.sha256(uri.encode()).hexdigest()[:_HASH_CHARS]
    return f"{base[: MAX_NAME_LENGTH - _HASH_CHARS - 1]}_{digest}"


class ToolNameMap:
    """The two-way mapping between the URIs of one request and the names sent to the provider.

    Args:
        uris: every tool URI the request mentions (offered tools, and tool calls in the history).
    """

    def __init__(self, uris: Iterable[str]) -> None:
        unique = sorted(set(uris))
        groups: dict[str, list[str]] = {}
        for uri in unique:
            groups.setdefault(provider_name(uri), []).append(uri)
        self._to_provider: dict[str, str] = {}
        for base, members in groups.items():
            needs_hash = len(members) > 1 or len(base) > MAX_NAME_LENGTH
            for uri in members:
                self._to_provider[uri] = _hashed(uri, base) if needs_hash else base
        self._to_uri = {name: uri for uri, name in self._to_provider.items()}

    def to_provider(self, uri: str) -> str:
        """The provider name of ``uri`` (a URI not given at construction gets its readable name)."""
        name = self._to_provider.get(uri)
        if name is not None:
            return name
        base = provider_name(uri)
        return base if len(base) <= MAX_NAME_LENGTH else _hashed(uri, base)

    def to_uri(self, name: str) -> str:
        """The URI behind a provider name; an unknown name (a tool the model made up) is returned unchanged."""
        return self._to_uri.get(name, name)

    def __len__(self) -> int:
        return len(self._to_provider)

    def __repr__(self) -> str:
        return f"ToolNameMap({self._to_provider!r})"
