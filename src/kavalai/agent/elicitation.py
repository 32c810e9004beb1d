"""MCP servers' requests for user input during a durable agent run: answers kept across a crash, or given from
outside the run.

A tool call is one step of a durable run and is journaled only when it ends, so what the user answered in the
middle of it would be asked again when the step is redone after a crash. :func:`recorded` keeps each answer in the
engine's answer log under the step's position and the request's rank in the step; the step's next attempt gets it
from there. :class:`OutsideElicitation` answers nothing in this process: it publishes the request, which the
runner's ``pending()`` lists and ``answer()`` (or ``kavalai answer``) answers from anywhere.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from kavalai.adapters.mcp import (
    ElicitationHandler,
    McpElicitation,
    McpElicitationResult,
    answering,
    current_answerer,
)
from kavalai.durable import DurableRun, current_run, elicitation_answer
from kavalai.errors import ConfigurationError
from kavalai.kernel import limit_seconds, required_seconds

__all__ = ["OutsideElicitation", "recorded", "recording_in_run"]


@dataclass(frozen=True, slots=True)
class OutsideElicitation:
    """Answers an MCP server's requests for user input from outside a durable run: give it as
    ``Agent(on_elicitation=OutsideElicitation())`` to an agent that runs durably, with the server configured
    ``McpServer(elicitation="caller")``. Each request becomes a question (``kind: "elicitation"``, the server, its
    message and schema) that ``runner.pending(run_id)`` lists and ``runner.answer(run_id, key, {...values})``
    (``"decline"``, ``"cancel"``) answers; the tool call waits for it, and an answer given survives a crash of the
    run's process.

    Attributes:
        timeout: seconds to wait for an answer (``None``: no limit; the tool's own timeout still applies); no
            answer in time declines.
        poll: seconds between looks for the answer.
    """

    timeout: float | None = None
    poll: float = 0.2

    def __post_init__(self) -> None:
        # The one rule for limits (kavalai.kernel.limit_seconds): a bad value is refused here, not at the wait.
        object.__setattr__(self, "timeout", limit_seconds(self.timeout, what="timeout"))
        object.__setattr__(self, "poll", required_seconds(self.poll, what="poll"))

    async def __call__(self, request: McpElicitation) -> McpElicitationResult:
        """Refuse to answer in this process: the answer comes through a durable run."""
        raise ConfigurationError(
            f"OutsideElicitation answers {request.server!r}'s request for input from outside the run, which needs a "
            "durable run: give the agent durable=... (a DbosRunner or a MemoryRunner)."
        )


def recorded(answerer: ElicitationHandler, run: DurableRun, position: int) -> ElicitationHandler:
    """``answerer`` for the tool call at ``position`` of ``run``: each answer kept in the run's answer log (see the
    module's docstring); an :class:`OutsideElicitation` (itself, or as ``answerer.outside``) waits for an answer
    from outside instead."""
    outside = answerer if isinstance(answerer, OutsideElicitation) else getattr(answerer, "outside", None)
    rank = itertools.count(1)

    async def answer(request: McpElicitation) -> McpElicitationResult:
        key = f"elicitation-{position}-{next(rank)}"
        question = {
            "kind": "elicitation",
            "key": key,
            "server": request.server,
            "message": request.message,
            "mode": request.mode,
            "schema": dict(request.schema),
            "url": request.url,
        }

        async def ask() -> Any:
            return _as_json(await answerer(request))

        if isinstance(outside, OutsideElicitation):
            value = await run.answer_in_step(key, question, None, timeout=outside.timeout, poll=outside.poll)
        else:
            value = await run.answer_in_step(key, question, ask)
        return _as_result(value)

    return answer


def recording_in_run() -> AbstractContextManager[None]:
    """For a tool call about to be made in a durable run (whose steps go one after another): the run's answerer of
    servers' input requests, :func:`recorded` under the step the call takes. Outside a durable run, or without an
    answerer, nothing changes."""
    run = current_run()
    answerer = current_answerer() if run is not None else None
    if run is None or answerer is None:
        return nullcontext()
    return answering(recorded(answerer, run, run.steps + 1))


def _as_json(outcome: object) -> dict[str, Any]:
    """What an answerer returned, as the answer log keeps it: a mapping (accept with those values), ``None``
    (decline), an :class:`McpElicitationResult`, or the MCP SDK's ``ElicitResult`` (its own action). Anything else
    is refused (raised), as the connection refuses it: guessing would record a decline as an accept."""
    if outcome is None:
        return {"action": "decline"}
    sdk = sys.modules.get("mcp_types")  # an SDK ElicitResult can only exist once the SDK's types are loaded
    if sdk is not None and isinstance(outcome, sdk.ElicitResult):
        outcome = McpElicitationResult(outcome.action, outcome.content)
    if isinstance(outcome, McpElicitationResult):
        content = dict(outcome.content) if outcome.content is not None else None
        return {"action": outcome.action, "content": content} if content is not None else {"action": outcome.action}
    if isinstance(outcome, Mapping):
        return elicitation_answer(dict(outcome))
    raise TypeError(
        f"the elicitation answerer returned a {type(outcome).__qualname__}, which is no answer: it returns the values "
        "(a mapping: accept), None (decline), or an McpElicitationResult"
    )


def _as_result(value: Any) -> McpElicitationResult:
    if value is None:  # no answer in time
        return McpElicitationResult("decline")
    data = elicitation_answer(value)
    return McpElicitationResult(data["action"], data.get("content"))
