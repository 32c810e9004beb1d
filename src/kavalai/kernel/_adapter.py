"""The small contract every tool kind implements.

An adapter owns the tools of one URI scheme. The kernel keeps one :class:`ToolRegistry` for all schemes (so a call
is one dictionary look-up); an adapter publishes its tools there, withdraws them when they go away, and is asked
for a tool the registry does not hold (so a server can connect on demand). A new scheme is a new adapter: nothing
in the kernel changes (``kernel.add_adapter(MyAdapter(kernel.registry))``).

The kernel never imports an adapter or its dependencies.
"""

from __future__ import annotations

from typing import ClassVar

from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._registry import ToolRegistry
from kavalai.kernel._uri import ToolURI

__all__ = ["ToolAdapter"]


class ToolAdapter:
    """Base class of the adapters: publish tools, connect their sources, withdraw them, close.

    A tool runs through :attr:`ToolDefinition.invoke`, which the adapter sets when it builds the definition.
    Subclasses set :attr:`scheme` and override what they need; every method has a sensible default.
    """

    scheme: ClassVar[str]

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def connect(self) -> None:
        """Bring every configured source online and publish its tools.

        Sources that connect stay connected even when another fails; failures are raised afterwards as one
        :class:`~kavalai.errors.ServerConnectionError` that names each failed source and why.
        """

    async def resolve(self, uri: ToolURI) -> ToolDefinition | None:
        """Return the tool at ``uri`` when the registry does not hold it yet, connecting its source if needed.

        Returns ``None`` when this adapter has no such tool.
        """
        return None

    def missing_hint(self, uri: ToolURI) -> str | None:
        """A sentence that explains why ``uri`` is not (yet) available, for the not-found error; or ``None``."""
        return None

    def remove_tool(self, uri: str) -> bool:
        """Withdraw a tool this adapter owns, with any bookkeeping of its own, so that it is neither listed nor
        callable. Return whether there was one."""
        return self.registry.remove_tool(uri) is not None

    async def aclose(self) -> None:
        """Release everything the adapter holds (sessions, processes, tasks). Idempotent; it may reconnect later."""
