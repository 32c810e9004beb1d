"""The one registry of a kernel: every tool of every scheme, by URI.

Adapters publish their tools here and withdraw them here; they keep no second table of definitions, so what is
listed is exactly what is callable. Definitions are frozen: to change one, publish a new one with ``replace=True``.

A tool may be published lazily (:meth:`ToolRegistry.add_lazy`): listed and described at once from its JSON schemas,
with its Pydantic models built when it is first called or its definition first asked for. A server that lists
10,000 tools then connects in milliseconds instead of building 20,000 model classes on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kavalai.errors import ToolRegistrationError
from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._uri import ToolURI

__all__ = ["LazyTool", "ToolRegistry"]


@dataclass(frozen=True, slots=True, eq=False)
class LazyTool:
    """A tool published before its models are built: what listing and describing it need, and how to build it.

    Attributes:
        uri: the tool's URI.
        description: what the tool does.
        input_schema: the JSON schema of its arguments, as shown to models.
        output_schema: the JSON schema of its output, or ``None`` for any.
        build: makes the full :class:`ToolDefinition` (called once, when first needed).
        metadata: adapter-specific facts, as on a definition.
    """

    uri: ToolURI
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    build: Callable[[], ToolDefinition] = field(repr=False)
    metadata: dict[str, Any] = field(default_factory=dict)
    _name: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_name", str(self.uri))  # once: listing 10,000 tools reads it 10,000 times

    @property
    def name(self) -> str:
        """The tool's URI as a string."""
        return self._name

    def describe(self) -> dict[str, Any]:
        """The same description a built definition gives, from the schemas alone."""
        return {
            "name": self._name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema if self.output_schema is not None else {},
        }


class ToolRegistry:
    """Tool definitions by URI string, in registration order."""

    __slots__ = ("_lazy", "_servers", "_tools", "revision")

    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        self._lazy: dict[str, LazyTool] = {}
        #: The URIs under each server prefix :meth:`names_of` may be asked for (``"rest://shop."``, and one per
        #: further dot of a URI, as a server's name may hold dots), in registration order, kept as tools come and
        #: go: building a configuration asks once per server, and a scan of every URI each time made it quadratic
        #: (4,000 REST servers: 260 s).
        self._servers: dict[str, dict[str, None]] = {}
        #: Bumped by every publication and withdrawal: equal revisions, the same tools (building a lazy one is
        #: no change).
        self.revision = 0

    def add_tool(self, definition: ToolDefinition, *, replace: bool = False) -> None:
        """Publish ``definition``.

        Raises:
            ToolRegistrationError: its URI is taken and ``replace`` is false.
        """
        name = definition.name
        self._check_free(name, replace)
        self._lazy.pop(name, None)
        self._tools[name] = definition
        self._index(name)
        self.revision += 1

    def add_lazy(self, tool: LazyTool, *, replace: bool = False) -> None:
        """Publish ``tool``, to be built when first needed (see the module docstring)."""
        name = tool.name
        self._check_free(name, replace)
        self._tools.pop(name, None)
        self._lazy[name] = tool
        self._index(name)
        self.revision += 1

    def _check_free(self, name: str, replace: bool) -> None:
        if not replace and (name in self._tools or name in self._lazy):
            raise ToolRegistrationError(
                f"A tool is already registered at {name}. Choose another name, or pass replace=True to replace it.",
                uri=name,
            )

    def remove_tool(self, uri: str) -> ToolDefinition | LazyTool | None:
        """Withdraw the tool at ``uri`` and return it (built or not); ``None`` if there was none."""
        name = str(uri)
        removed = self._tools.pop(name, None) or self._lazy.pop(name, None)
        if removed is not None:
            for prefix in _server_prefixes(name):
                under = self._servers.get(prefix)
                if under is not None:
                    under.pop(name, None)
                    if not under:
                        del self._servers[prefix]
            self.revision += 1
        return removed

    def _index(self, name: str) -> None:
        for prefix in _server_prefixes(name):
            self._servers.setdefault(prefix, {})[name] = None

    def get(self, uri: str) -> ToolDefinition | None:
        """The tool at ``uri`` (built now if it was published lazily), or ``None``."""
        found = self._tools.get(uri)
        if found is not None:
            return found
        lazy = self._lazy.get(uri)
        if lazy is None:
            return None
        built = lazy.build()
        if self._lazy.get(uri) is lazy:  # still the published one: keep the built definition
            del self._lazy[uri]
            self._tools[uri] = built
        return built

    def describe(self, uri: str) -> dict[str, Any]:
        """The description of the tool at ``uri``, without building a lazily published one.

        Raises:
            KeyError: no tool is registered at ``uri``.
        """
        found = self._tools.get(uri)
        return found.describe() if found is not None else self._lazy[uri].describe()

    def metadata_of(self, uri: str) -> Mapping[str, Any]:
        """The metadata of the tool at ``uri``, without building a lazily published one (``{}`` if unknown)."""
        found = self._tools.get(uri)
        if found is not None:
            return found.metadata
        lazy = self._lazy.get(uri)
        return lazy.metadata if lazy is not None else {}

    def tools_of(self, scheme: str, server: str | None = None) -> list[ToolDefinition]:
        """The tools of one scheme (and of one server of it, when ``server`` is given); builds lazy ones."""
        built = []
        for name in self.names_of(scheme, server):
            definition = self.get(name)
            if definition is not None:
                built.append(definition)
        return built

    def names_of(self, scheme: str, server: str | None = None) -> list[str]:
        """The URIs of one scheme's tools (of one server, when given), without building anything."""
        if server is None:
            prefix = f"{scheme}://"
            return [name for name in self.names() if name.startswith(prefix)]
        return list(self._servers.get(f"{scheme}://{server}.", ()))

    def names(self) -> list[str]:
        """Every registered URI."""
        return [*self._tools, *self._lazy]

    def __contains__(self, uri: object) -> bool:
        return uri in self._tools or uri in self._lazy

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self.tools_of_all())

    def tools_of_all(self) -> list[ToolDefinition]:
        """Every tool, built."""
        return [d for d in (self.get(name) for name in self.names()) if d is not None]

    def __len__(self) -> int:
        return len(self._tools) + len(self._lazy)

    def __repr__(self) -> str:
        return f"<ToolRegistry of {len(self)} tools>"


def _server_prefixes(uri: str) -> list[str]:
    """Every ``scheme://server.`` prefix of ``uri`` (one per dot after the scheme: a server's name may hold dots)."""
    scheme, found, rest = uri.partition("://")
    if not found:
        return []
    head = f"{scheme}://"
    return [head + rest[: index + 1] for index, char in enumerate(rest) if char == "."]
