"""The seam between kavalai and a durable engine: :class:`DurableRunner`, and what it runs (:class:`DurableTarget`).

A target is something with a name, a kernel and a way to run one JSON payload inside a durable run: a
:class:`~kavalai.workflow.WorkflowEngine` (the payload is the run input) or an :class:`~kavalai.agent.Agent` (the
prompt and history). The runner registers targets by name, so a run recovered in another process (or another worker)
finds the same target there, adds the journaling middleware to their kernels, and runs payloads under a run id.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol, runtime_checkable

from kavalai.durable._json import journal_json
from kavalai.durable._steps import durable_steps, is_durable_middleware
from kavalai.errors import AlreadyAnsweredError
from kavalai.secrets import excerpt

if TYPE_CHECKING:
    from kavalai.kernel import Kernel

__all__ = [
    "MAX_RUN_ID",
    "RUN_ID_RULE",
    "DurableRunner",
    "DurableTarget",
    "RunInfo",
    "RunState",
    "UnknownRunError",
    "checked_run_id",
    "existing_run_id",
    "new_run_id",
]


@runtime_checkable
class DurableTarget(Protocol):
    """What a durable runner runs: a workflow engine or an agent (or anything of this shape).

    A target whose steps other than tool calls should run on an engine that runs steps in another process (Temporal)
    also has ``async def execute_step(request) -> JSON``, redoing a step from its JSON request, and may have
    ``step_answers(run, position)``, a context manager under which a tool step redone there answers MCP servers'
    requests for input.
    """

    @property
    def durable_name(self) -> str:
        """The name the target is registered under; the same in every process that serves its runs."""
        ...

    @property
    def durable_kernel(self) -> Kernel | None:
        """The kernel whose tool calls become steps, or ``None`` for a target without tools."""
        ...

    async def run_journaled(self, payload: Any) -> Any:
        """Run ``payload`` inside the current durable run and return the outcome as JSON-ready data; an error
        of the run is part of that data, not raised."""
        ...


class DurableRunner(ABC):
    """Runs targets durably on an engine. :class:`~kavalai.durable.DbosRunner` and
    :class:`~kavalai.durable.TemporalRunner` are the two engines; both give the same guarantees to the code they run
    (see ``docs/durable.md``).
    """

    #: The engine's name, for messages.
    engine: ClassVar[str] = "durable"

    def __init__(self) -> None:
        self._targets: dict[str, DurableTarget] = {}

    def register(self, target: DurableTarget, *, replace: bool = False) -> str:
        """Register ``target`` by its name (runs recovered here find it by that name) and make its kernel's tool
        calls journaled steps. Registering the same object again is harmless; another one under a taken name is an
        error unless ``replace`` (:meth:`run` replaces: the target a run is started with serves its name from then
        on). Returns the name."""
        name = target.durable_name
        known = self._targets.get(name)
        if known is not None and known is not target and not replace:
            raise ValueError(
                f"Another target is already registered as {name!r} on this {self.engine} runner: give each "
                "workflow a distinct name (or each agent a distinct durable_name)."
            )
        self._targets[name] = target
        kernel = target.durable_kernel
        if kernel is not None:
            self.attach(kernel)
        return name

    def target(self, name: str) -> DurableTarget | None:
        """The target registered as ``name``, or ``None``."""
        return self._targets.get(name)

    @property
    def targets(self) -> list[str]:
        """The names of the registered targets, sorted."""
        return sorted(self._targets)

    @staticmethod
    def attach(kernel: Kernel) -> None:
        """Add the journaling middleware to ``kernel`` (once; later middleware run inside it). Outside a durable
        run it only passes each call on."""
        if not any(is_durable_middleware(item) for item in kernel.middleware):
            kernel.add_middleware(durable_steps(kernel))

    @abstractmethod
    async def run(self, target: DurableTarget, payload: Any, *, run_id: str | None = None) -> Any:
        """Run ``payload`` on ``target`` durably under ``run_id`` and return the target's JSON outcome.

        The run id names one run: running it again returns the recorded outcome of a finished run, resumes one
        whose process died, and waits for one still running elsewhere.
        """

    async def result(self, run_id: str) -> Any:
        """Wait for the run ``run_id`` (here or in any process serving it) and return its JSON outcome.

        Raises:
            ValueError: the id breaks :data:`RUN_ID_RULE`.
            UnknownRunError: no run has this id.
        """
        raise NotImplementedError(f"The {self.engine} runner cannot wait for a run by its id.")

    async def pending(self, run_id: str) -> dict[str, Any]:
        """The questions run ``run_id`` waits to have answered from outside (an approval, ...), by key; empty when
        it waits for none (or there is no such run)."""
        raise NotImplementedError(f"The {self.engine} runner does not wait for answers from outside.")

    async def answer(self, run_id: str, key: str, value: Any) -> None:
        """Answer the question ``key`` that run ``run_id`` waits on (see :meth:`pending`) with ``value`` (JSON;
        an approval takes ``{"action": "allow"}``, ``{"action": "deny", "reason": ...}`` or ``{"action": "edit",
        "arguments": {...}}``). The run may be in another process, or resumed later: the engine keeps the answer.

        Raises:
            LookupError: the run waits for no question ``key``.
        """
        raise NotImplementedError(f"The {self.engine} runner does not wait for answers from outside.")

    @abstractmethod
    async def aclose(self) -> None:
        """Stop the engine's client or worker in this process. Runs in flight stay in the journal, to be resumed."""

    async def __aenter__(self) -> DurableRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def not_pending(run_id: str, key: str, pending: dict[str, Any]) -> LookupError:
    """The error for an answer to a question the run does not wait for."""
    waits = ", ".join(sorted(pending)) or "no question"
    return LookupError(f"Run {run_id} waits for no answer {key!r} (it waits for {waits}).")


def lost_answer(run_id: str, key: str, winner: Any) -> AlreadyAnsweredError:
    """The error for an answer that lost to ``winner``, the answer recorded first."""
    shown = excerpt(journal_json(winner), 200, marker="...")  # masked, then cut: no piece of a secret
    return AlreadyAnsweredError(
        f"Run {run_id}: {key!r} was answered already, with {shown}; this answer was not taken.",
        run_id=run_id,
        key=key,
        answer=winner,
    )


def new_run_id() -> str:
    """A fresh run id."""
    return uuid.uuid4().hex


#: The longest run id: the journals' tables (``kavalai_steps``, ``kavalai_answers``) hold up to this many characters.
MAX_RUN_ID: Final = 200

#: The rule every runner applies to run ids, before any engine sees one.
RUN_ID_RULE: Final = f"A run id is 1 to {MAX_RUN_ID} printable characters, with no space at either end (so never blank)"


class UnknownRunError(LookupError, ValueError):
    """No run has this id (on this runner's engine): waiting for its result, or resuming it, needs a run started
    under it first. A :class:`LookupError` (nothing found) and a :class:`ValueError` (the id given names no run)."""

    def __init__(self, run_id: str, engine: str) -> None:
        super().__init__(f"No run {run_id!r} on the {engine} runner: start it with run(..., run_id={run_id!r}).")
        self.run_id = run_id
        self.engine = engine


def checked_run_id(run_id: str | None) -> str:
    """``run_id``, or a fresh one for ``None``; checked before anything is journaled under it (see
    :data:`RUN_ID_RULE`), the same on every runner.

    Raises:
        ValueError: the id breaks the rule; the message states it.
    """
    if run_id is None:
        return new_run_id()
    if (
        not isinstance(run_id, str)
        or not 0 < len(run_id) <= MAX_RUN_ID
        or not run_id.isprintable()
        or run_id != run_id.strip()
    ):
        shown = repr(run_id) if len(repr(run_id)) <= 60 else f"{repr(run_id)[:57]}..."
        raise ValueError(f"{RUN_ID_RULE}, got {shown}.")
    return run_id


def existing_run_id(run_id: str) -> str:
    """``run_id`` of a run that should exist (to wait for, answer, show, cancel): checked by the same rule.

    Raises:
        ValueError: the id breaks :data:`RUN_ID_RULE`.
    """
    if run_id is None:
        raise ValueError(f"{RUN_ID_RULE}, got None.")
    return checked_run_id(run_id)


#: Where a run is, in words every engine's statuses map to.
RunState = Literal["queued", "running", "interrupted", "finished", "failed", "cancelled"]


@dataclass(frozen=True)
class RunInfo:
    """Where a durable run is, as ``kavalai runs show|list`` prints it.

    Attributes:
        run_id: the run's id.
        state: ``queued``, ``running``, ``interrupted`` (its journal was away longer than it could wait: it stays
            resumable, run it again under its id), ``finished`` (the engine holds its outcome, which says whether the
            workflow or agent succeeded), ``failed`` (the engine itself gave up on it) or ``cancelled``.
        engine_status: the engine's own word for it (DBOS ``SUCCESS``, Temporal ``COMPLETED``, ...).
        target: what it runs (``workflow:<name>``, ``agent:<name>``), when the engine says.
        created_at, updated_at: when it began and last changed (UTC), when the engine says.
        outcome: a finished run's JSON outcome (only from ``describe``).
        in_doubt: the steps whose outcome is unknown (only from ``describe``: DBOS's step log, Temporal's
            history): ``position``, ``name`` and ``state`` (``in_doubt``: found sent without a result; ``sent``: in
            flight, or its worker gone; ``cancelled``: cut in flight by a cancel).
        error: why a run that ended without an outcome ended (only from ``describe``, where the engine records it:
            a Temporal run a worker refused reads ``DefinitionChangedError: ...``, naming the step).
    """

    run_id: str
    state: RunState
    engine_status: str
    target: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    outcome: Any = None
    in_doubt: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready data (times in ISO 8601)."""
        data = asdict(self)
        for name in ("created_at", "updated_at"):
            if data[name] is not None:
                data[name] = data[name].isoformat()
        return data
