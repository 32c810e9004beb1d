"""Approval before a tool call: a hook that allows the call, refuses it with a reason, or edits its arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from kavalai.llm.messages import ToolCall

__all__ = ["Approval", "ApprovalHook"]


@dataclass(frozen=True, slots=True)
class Approval:
    """An approval hook's decision; build it with :meth:`allow`, :meth:`deny` or :meth:`edit`.

    Attributes:
        action: ``"allow"``, ``"deny"`` or ``"edit"``.
        reason: for ``deny``, why; the model reads it.
        arguments: for ``edit``, the arguments to call the tool with instead (validated by the kernel as usual).
    """

    action: Literal["allow", "deny", "edit"]
    reason: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def allow(cls) -> Approval:
        """Run the call as the model asked."""
        return cls("allow")

    @classmethod
    def deny(cls, reason: str = "not approved") -> Approval:
        """Refuse the call; ``reason`` goes back to the model as the tool's error result."""
        return cls("deny", reason=reason)

    @classmethod
    def edit(cls, arguments: Mapping[str, Any]) -> Approval:
        """Run the call with ``arguments`` instead of the model's."""
        return cls("edit", arguments=dict(arguments))


#: Decides on one tool call (its ``name`` is the URI). Return an :class:`Approval`, or ``True``/``False`` for
#: allow/deny; sync or async.
ApprovalHook: TypeAlias = Callable[[ToolCall], "Approval | bool | Awaitable[Approval | bool]"]
