"""What a run was begun under: its definition's fingerprint, recorded with the run, checked when it resumes.

Steps are found by their identity (node, visit, call: :mod:`._run`), so a changed definition can no longer hand a
step another step's record; but a run resumed under one would still take another path than the one it began (a node
added runs in the middle of a half-done run, a removed one's effect is left without its sequel). So each run records,
in its input (which no engine lets change), :func:`definition_of` its target: a fingerprint of the whole definition
and one per step (a workflow's nodes, in order; an agent's model, instructions, tools, output type and step limit).
A resume whose target has another fingerprint is refused with :class:`~kavalai.errors.DefinitionChangedError`,
naming the first step that differs; the run stays as it was, to be resumed by a worker running the definition it
began with. :func:`definition_version` is the opt-in way to keep such workers: the DBOS application version of a
``DbosRunner(versioned=True)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from kavalai.durable._json import journal_json
from kavalai.errors import DefinitionChangedError

__all__ = [
    "Definition",
    "Versions",
    "changed",
    "definition_of",
    "definition_version",
    "difference",
    "fingerprint",
    "keyed_by_position",
    "missing_tool",
    "other_version",
    "recorded_definition",
    "tool_gone",
]

#: ``{"fingerprint": "<sha256 of the whole>", "steps": [[name, "<sha256 of that step>"], ...]}``
Definition = dict[str, Any]


def fingerprint(value: Any) -> str:
    """A short content hash of JSON-ready ``value`` (canonical JSON)."""
    text = journal_json(value, sort_keys=True, compact=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def definition_of(target: object) -> Definition | None:
    """The definition a run of ``target`` records: from its ``durable_definition()`` (named steps as JSON, in
    order), or ``None`` for a target that has none (nothing is then checked)."""
    describe = getattr(target, "durable_definition", None)
    if describe is None:
        return None
    steps: list[tuple[str, Any]] = describe()
    hashed = [[name, fingerprint(body)] for name, body in steps]
    return {"fingerprint": fingerprint(hashed), "steps": hashed}


def changed(run_id: str, recorded: Definition | None, current: Definition | None) -> DefinitionChangedError | None:
    """The error for resuming run ``run_id``, begun under ``recorded``, under ``current``; ``None`` when they are the
    same (or either is unknown)."""
    found = difference(recorded, current)
    if found is None:
        return None
    step, how = found
    return DefinitionChangedError(
        f"Run {run_id} was begun under another definition: step {step!r} {how} since. Resuming it here is refused "
        "(no step may be handed another's record): finish it on a worker running the definition it began with, or "
        "start a new run.",
        run_id=run_id,
        step=step,
    )


async def missing_tool(run_id: str | None, target: object) -> DefinitionChangedError | None:
    """The error for running or resuming run ``run_id`` here when ``target`` names a tool its kernel does not have
    (its ``durable_missing_tool()``: node, URI, why); ``None`` when it has them all (or cannot tell). Asked before
    anything of the run runs or is recorded here: a resume would otherwise meet the tool's absence before the
    journal (the kernel resolves a tool before its durable middleware), end the run failed and leave a step sent
    without its result for ever. Refused, the run stays as it is, resumable where the tool is registered.
    ``run_id=None``: the error of a worker that would serve ``target`` (Temporal), which takes up no run of it."""
    ask = getattr(target, "durable_missing_tool", None)
    if ask is None:
        return None
    found: tuple[str, str, str] | None = await ask()
    if found is None:
        return None
    node, uri, why = found
    where = f"node {node!r}" if not node.startswith("tool ") else "its agent"
    if run_id is None:
        name = getattr(target, "durable_name", "its target")
        return DefinitionChangedError(
            f"This worker does not serve {name}: {where} calls {uri!r}, which this kernel does not have ({why}). It "
            "takes up no run nor step of it: start it again once the tool is registered.",
            run_id="",
            step=node,
        )
    return DefinitionChangedError(
        f"Run {run_id} is not run here: {where} calls {uri!r}, which this kernel does not have ({why}). Nothing "
        "of the run ran or was recorded: run it again under the same id once the tool is registered.",
        run_id=run_id,
        step=node,
    )


def tool_gone(uri: str, why: str) -> DefinitionChangedError | None:
    """Inside a durable run, the refusal of a step whose tool ``uri`` the kernel here does not have (``why``), the
    run stopped with it (:meth:`~kavalai.durable.DurableRun.refuse`: left resumable, never ended by the absence);
    outside one ``None``. An agent asks when the tool a recorded step of its run called is gone (a tool list the run
    began with, ``allowed_tools=None`` or globs, that no check before the run can know)."""
    from kavalai.durable._run import current_run

    run = current_run()
    if run is None:
        return None
    error = DefinitionChangedError(
        f"Run {run.run_id} is not run here: its agent calls {uri!r}, which this kernel does not have ({why}). The "
        "run stops without an outcome: run it again under the same id once the tool is registered.",
        run_id=run.run_id,
        step=f"tool {uri}",
    )
    run.refuse(error)
    return error


def keyed_by_position(run_id: str, names: Iterable[str]) -> DefinitionChangedError | None:
    """The error for resuming run ``run_id`` whose journal recorded steps under ``names`` (in order) when one of them
    was recorded by position, before a step was known by its identity (node, visit and call, each part ending in
    ``#N``: ``b#1/tool rest://shop.charge#1``; a step recorded by position is ``tool rest://shop.charge``): its record
    cannot be matched to a step of the run now, so the run is refused rather than replayed under new keys."""
    for name in names:
        if "#" not in name:
            return DefinitionChangedError(
                f"Run {run_id} was begun by an earlier kavalai, which recorded its steps by position: step {name!r} "
                "cannot be matched to a step of it now. Resuming it here is refused (it would send its steps again "
                "under new keys): finish it with the kavalai release it began under, or start a new run.",
                run_id=run_id,
                step=name,
            )
    return None


def difference(recorded: Definition | None, current: Definition | None) -> tuple[str, str] | None:
    """The first step that differs between two definitions and how (``"was added (or renamed)"``, ...), or ``None``
    when they are the same (or either is unknown)."""
    if not recorded or not current or recorded.get("fingerprint") == current.get("fingerprint"):
        return None
    before = dict(recorded.get("steps", []))
    now = dict(current.get("steps", []))
    return _first_difference(recorded.get("steps", []), current.get("steps", []), before, now)


def _first_difference(
    recorded: list[list[str]], current: list[list[str]], before: dict[str, str], now: dict[str, str]
) -> tuple[str, str]:
    """A step added or removed first (in definition order), else the first one changed."""
    for index in range(max(len(recorded), len(current))):
        if index < len(current) and current[index][0] not in before:
            return current[index][0], "was added (or renamed)"
        if index < len(recorded) and recorded[index][0] not in now:
            return recorded[index][0], "was removed (or renamed)"
    for name, digest in current:
        if before.get(name) != digest:
            return name, "was changed"
    return recorded[0][0] if recorded else "?", "moved"


def definition_version(*targets: object) -> str:
    """A version name made of the definitions of ``targets`` (workflow engines, agents), the same in every process
    serving the same definitions and another one as soon as one of them changes: ``"kavalai-<fingerprint>"``. A
    ``DbosRunner(versioned=True)`` uses it as its DBOS application version."""
    named = sorted(
        (str(getattr(target, "durable_name", "?")), (definition_of(target) or {}).get("fingerprint"))
        for target in targets
    )
    return f"kavalai-{fingerprint(named)}"


class Versions:
    """What a versioned runner's version (DBOS application version, Temporal build id) is made of: the definitions
    of its targets, by name.

    Raises:
        RuntimeError: no target is registered yet (its version would be made of nothing).
    """

    def __init__(self, targets: Mapping[str, object]) -> None:
        if not targets:
            raise RuntimeError(
                "A versioned runner's version is made of its targets' definitions: register them before it starts "
                "(runner.register(engine)), or start it by running one."
            )
        self.definitions = {name: definition_of(target) for name, target in targets.items()}
        #: the version's name: :func:`definition_version` of the targets
        self.name = definition_version(*targets.values())

    def check(self, target: object) -> None:
        """Refuse a target whose definition the version was not made of.

        Raises:
            DefinitionChangedError: ``target`` is new or changed since the version was made.
        """
        name = str(getattr(target, "durable_name", "?"))
        if self.definitions.get(name) != definition_of(target):
            raise DefinitionChangedError(
                f"{name!r} is not a definition this process's version ({self.name}) was made of: a "
                "versioned runner takes its targets before it starts (register them first), and a changed one in a "
                "new process, of a new version.",
                run_id="",
                step=name,
            )

    def check_run(self, run_id: str, version: str, inputs: Any, target: object) -> None:
        """Refuse a run of another application ``version`` (its DBOS ``inputs`` hold the definition it began with).

        Raises:
            DefinitionChangedError: ``version`` is not this one's; names the first step that differs, when known.
        """
        if version != self.name:
            raise other_version(run_id, version, self.name, inputs, target)


def recorded_definition(inputs: Any) -> Definition | None:
    """The definition a DBOS run began with, from its workflow ``inputs`` (the fourth argument of ``_kavalai_run``);
    ``None`` for a run enqueued before definitions were recorded."""
    args = inputs.get("args") if isinstance(inputs, dict) else getattr(inputs, "args", None)
    recorded = args[3] if isinstance(args, list | tuple) and len(args) > 3 else None
    return recorded if isinstance(recorded, dict) else None


def other_version(run_id: str, version: str, here: str, inputs: Any, target: object) -> DefinitionChangedError:
    """The error of a run of DBOS application ``version`` submitted to a process of version ``here``, naming the
    first step that differs when the run's recorded definition (in its DBOS ``inputs``) says."""
    found = difference(recorded_definition(inputs), definition_of(target))
    step = found[0] if found is not None else ""
    why = f"step {found[0]!r} {found[1]} since" if found is not None else "another of its targets changed"
    return DefinitionChangedError(
        f"Run {run_id} is of application version {version}, and this process runs {here} ({why}): a worker of "
        f"version {version} (the definition it began with) finishes it.",
        run_id=run_id,
        step=step,
    )
