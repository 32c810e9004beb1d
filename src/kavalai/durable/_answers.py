"""Answers given from outside a durable run: their form, checked before an engine takes them.

A run waiting for an answer (:meth:`~kavalai.durable.DurableRun.wait_for_answer`) publishes a question with a
``kind``. The engine keeps whatever is sent until the run takes it, so a malformed answer would only fail once the
run read it, possibly hours later in another process; :func:`checked_answer` refuses it at the sender instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kavalai.durable._json import journal_json

__all__ = ["approval_answer", "checked_answer", "elicitation_answer"]


def checked_answer(question: Mapping[str, Any], value: Any) -> Any:
    """``value`` in the form the question's kind takes (approvals: see :func:`approval_answer`), as JSON data.

    Raises:
        ValueError: the value is not an answer of that kind, or not JSON.
    """
    if question.get("kind") == "approval":
        value = approval_answer(value)
    elif question.get("kind") == "elicitation":
        value = elicitation_answer(value)
    elif question.get("kind") == "doubt":
        from kavalai.durable._doubt import doubt_answer

        value = doubt_answer(value)
    try:  # of every kind: what the journal keeps is JSON (no NaN, no sets), as every reader of it takes it
        return json.loads(journal_json(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"An answer must be JSON data: {exc}") from None


def approval_answer(value: Any) -> dict[str, Any]:
    """An approval answer as ``{"action": "allow"}``, ``{"action": "deny", "reason": ...}`` or ``{"action": "edit",
    "arguments": {...}}``; ``True``/``"allow"`` and ``False``/``"deny"`` are short forms.

    Raises:
        ValueError: anything else.
    """
    if value is True or value == "allow":
        return {"action": "allow"}
    if value is False or value == "deny":
        return {"action": "deny", "reason": "not approved"}
    action = value.get("action") if isinstance(value, Mapping) else None
    if action == "allow":
        return {"action": "allow"}
    if action == "deny":
        reason = value.get("reason") or "not approved"
        if isinstance(reason, str):
            return {"action": "deny", "reason": reason}
    if action == "edit" and isinstance(value.get("arguments"), Mapping):
        return {"action": "edit", "arguments": checked_answer({}, dict(value["arguments"]))}
    raise ValueError(
        f"An approval is 'allow', 'deny', {{'action': 'deny', 'reason': '...'}} or "
        f"{{'action': 'edit', 'arguments': {{...}}}}, not {value!r}."
    )


def elicitation_answer(value: Any) -> dict[str, Any]:
    """An answer to an MCP server's request for user input as ``{"action": "accept", "content": {...}}``,
    ``{"action": "decline"}`` or ``{"action": "cancel"}``; ``"decline"``/``"cancel"``/``"accept"`` and a plain
    mapping of values (meaning accept) are short forms.

    Raises:
        ValueError: anything else.
    """
    if value in ("decline", "cancel"):
        return {"action": value}
    if value == "accept":
        return {"action": "accept", "content": {}}
    if isinstance(value, Mapping):
        action = value.get("action")
        if action in ("decline", "cancel"):
            return {"action": action}
        content = value.get("content", {}) if action == "accept" else value
        if (action is None or action == "accept") and isinstance(content, Mapping):
            return {"action": "accept", "content": checked_answer({}, dict(content))}
    raise ValueError(
        "An answer to a request for input is 'decline', 'cancel', the values as an object, or "
        f"{{'action': 'accept', 'content': {{...}}}}, not {value!r}."
    )
