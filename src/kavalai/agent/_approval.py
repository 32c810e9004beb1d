"""Approval before a tool call: a hook that allows the call, refuses it with a reason, or edits its arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from kavalai.kernel import limit_seconds
from kavalai.llm.messages import ToolCall

__all__ = ["Approval", "ApprovalHook", "OutsideApproval"]


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


@dataclass(frozen=True, slots=True)
class OutsideApproval:
    """An approval given from outside the run, durably: give it as ``Agent(approve=OutsideApproval())`` to an agent
    that runs durably (``durable=``). Each call that needs approval publishes a question (the tool's URI and
    arguments) and the run waits; the runner's ``pending(run_id)`` lists the questions, and ``answer(run_id, key,
    "allow" | "deny" | {"action": "edit", "arguments": {...}})``, ``DbosClient.answer`` or ``kavalai answer`` answers
    from any process. The wait survives a crash: a resumed run waits on, and an answer sent while no process ran the
    run is taken when one does.

    Attributes:
        timeout: seconds to wait for an answer (``None``: no limit); the wait is journaled, so a restart does not
            extend it.
        on_timeout: the decision when no answer came in time.
    """

    timeout: float | None = None
    on_timeout: Approval = field(default_factory=lambda: Approval.deny("no answer in time"))

    def __post_init__(self) -> None:
        # The one rule for limits (kavalai.kernel.limit_seconds): a bad value is refused here, not at the wait.
        object.__setattr__(self, "timeout", limit_seconds(self.timeout, what="timeout"))

    def __call__(self, call: ToolCall) -> Approval:
        """Refuse to be used as a plain hook: the answer comes through the durable run, not from this call."""
        raise RuntimeError(
            f"OutsideApproval waits for an answer to {call.name} from outside the run, which needs a durable run: "
            "give the agent durable=... (a DbosRunner, a TemporalRunner or a MemoryRunner)."
        )
