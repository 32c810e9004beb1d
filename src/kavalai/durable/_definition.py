"""What a run was begun under: its definition's fingerprint, recorded with the run, checked when it resumes.

Steps are replayed by position. A definition changed between a crash and the resume (a node added, removed, renamed
or edited) would hand a step another step's record, or run a step again under a new key, silently. So each run records,
in its input (which no engine lets change), :func:`definition_of` its target: a fingerprint of the whole definition
and one per step (a workflow's nodes, in order). A resume whose target has another fingerprint is refused with
:class:`~kavalai.errors.DefinitionChangedError`, naming the first step that differs; the run stays as it was, to be
resumed by a worker running the definition it began with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kavalai.errors import DefinitionChangedError

__all__ = ["Definition", "changed", "definition_of", "fingerprint"]

#: ``{"fingerprint": "<sha256 of the whole>", "steps": [[name, "<sha256 of that step>"], ...]}``
Definition = dict[str, Any]


def fingerprint(value: Any) -> str:
    """A short content hash of JSON-ready ``value`` (canonical JSON)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
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
    if not recorded or not current or recorded.get("fingerprint") == current.get("fingerprint"):
        return None
    before = dict(recorded.get("steps", []))
    now = dict(current.get("steps", []))
    step, how = _first_difference(recorded.get("steps", []), current.get("steps", []), before, now)
    return DefinitionChangedError(
        f"Run {run_id} was begun under another definition: step {step!r} {how} since. Resuming it here is refused "
        "(no step may be handed another's record): finish it on a worker running the definition it began with, or "
        "start a new run.",
        run_id=run_id,
        step=step,
    )


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
