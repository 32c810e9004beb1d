"""Tool URIs: ``python://name``, ``rest://server.tool`` and ``mcp://server.tool``, parsed in this one place.

The set of schemes is open: an adapter plugged into a kernel brings its own. ``python`` URIs name a tool only;
every other scheme names a server and a tool (``scheme://server.tool``). Whether a kernel handles a scheme is the
kernel's question, not the parser's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from kavalai.errors import InvalidToolURIError

__all__ = ["SCHEMES", "SERVERLESS_SCHEMES", "SERVER_NAME_PATTERN", "ToolURI", "validate_server_name"]

#: The schemes of the tool kinds that come with kavalai; adapters may add others.
SCHEMES: Final[tuple[str, ...]] = ("python", "rest", "mcp")
#: Schemes whose URIs name a tool only, without a server.
SERVERLESS_SCHEMES: Final = frozenset({"python"})

#: A server name: letters, digits, ``_`` and ``-``; no dots, so the first dot of a URI ends the server name.
SERVER_NAME_PATTERN: Final = r"[A-Za-z0-9_-]+"
_SERVER_RE: Final = re.compile(SERVER_NAME_PATTERN)
# A tool name is any run of visible characters (MCP servers name tools freely); dots are allowed.
_TOOL_RE: Final = re.compile(r"[^\s/\\]+")
_QUALIFIER_RE: Final = re.compile(r"(?P<uri>\S+) \[(?P<word>[A-Za-z]+)\]")
_URI_RE: Final = re.compile(r"(?P<scheme>[a-z][a-z0-9+-]*)://(?P<rest>.*)", re.DOTALL)


def validate_server_name(name: str) -> str:
    """Return ``name`` if it is a valid server name, else raise :class:`InvalidToolURIError`."""
    if not isinstance(name, str) or not _SERVER_RE.fullmatch(name):
        raise InvalidToolURIError(
            f"Invalid server name {name!r}: use letters, digits, '_' and '-' only (no dots or spaces)."
        )
    return name


@dataclass(frozen=True, slots=True)
class ToolURI:
    """A parsed tool URI.

    Attributes:
        scheme: ``"python"``, ``"rest"``, ``"mcp"``, or the scheme of an adapter of your own.
        server: the server name for ``rest`` and ``mcp`` tools; ``None`` for ``python`` tools.
        tool: the tool name; it may contain dots (``python://fs.ls`` has tool ``"fs.ls"``).
        qualifier: what a trailing `` [WORD]`` said (``rest://api.items [GET]``, as Kaval.AI 1.0 printed REST tools:
            the HTTP method), upper-cased; ``None`` without one. It is not part of the tool's identity: ``str()``
            leaves it out and equality ignores it. The scheme's adapter decides what it means.
    """

    scheme: str
    server: str | None
    tool: str
    qualifier: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, uri: str | ToolURI) -> ToolURI:
        """Parse ``uri``; raise :class:`InvalidToolURIError` with what is wrong if it does not parse."""
        if isinstance(uri, ToolURI):
            return uri
        if not isinstance(uri, str):
            raise InvalidToolURIError(f"A tool URI must be a string, not {type(uri).__name__}.")
        return _parse(uri)

    @classmethod
    def build(cls, scheme: str, server: str | None, tool: str) -> ToolURI:
        """Build and validate a URI from its parts."""
        if server is None:
            return cls.parse(f"{scheme}://{tool}")
        return cls.parse(f"{scheme}://{server}.{tool}")

    def without_qualifier(self) -> ToolURI:
        """This URI without its qualifier."""
        return ToolURI(self.scheme, self.server, self.tool) if self.qualifier else self

    def __str__(self) -> str:
        if self.server is None:
            return f"{self.scheme}://{self.tool}"
        return f"{self.scheme}://{self.server}.{self.tool}"


@lru_cache(maxsize=4096)
def _parse(uri: str) -> ToolURI:
    qualified = _QUALIFIER_RE.fullmatch(uri)
    if qualified is not None:
        bare = _parse(qualified["uri"])
        return ToolURI(bare.scheme, bare.server, bare.tool, qualified["word"].upper())
    match = _URI_RE.fullmatch(uri)
    if match is None:
        raise InvalidToolURIError(
            f"Invalid tool URI format for {uri!r}: expected 'python://name', 'rest://server.tool' or 'mcp://server.tool'.",
            uri=uri,
        )
    scheme, rest = match["scheme"], match["rest"]
    if scheme in SERVERLESS_SCHEMES:
        _check_tool_name(uri, rest)
        return ToolURI(scheme, None, rest)
    server, dot, tool = rest.partition(".")
    if not dot or not tool:
        raise InvalidToolURIError(
            f"Invalid tool path format in {uri!r}: a {scheme}:// URI names a server and a tool, as "
            f"'{scheme}://server.tool'.",
            uri=uri,
        )
    if not _SERVER_RE.fullmatch(server):
        raise InvalidToolURIError(
            f"Invalid tool URI format for {uri!r}: server name {server!r} may only hold letters, digits, '_' and '-'.",
            uri=uri,
        )
    _check_tool_name(uri, tool)
    return ToolURI(scheme, server, tool)


def _check_tool_name(uri: str, tool: str) -> None:
    if not tool:
        raise InvalidToolURIError(f"Invalid tool URI format for {uri!r}: the tool name is empty.", uri=uri)
    if not _TOOL_RE.fullmatch(tool):
        raise InvalidToolURIError(
            f"Invalid tool URI format for {uri!r}: tool name {tool!r} may not contain spaces, '/' or '\\'.", uri=uri
        )
    if tool.startswith(".") or tool.endswith(".") or ".." in tool:
        raise InvalidToolURIError(
            f"Invalid tool URI format for {uri!r}: tool name {tool!r} has an empty dotted part.", uri=uri
        )
