"""Who answers a server's request for user input (an elicitation) when ``McpServer(elicitation="caller")``: the
code that made the call, rather than one handler fixed for the server.

The caller says how it answers with :func:`answering` (an agent does it with ``Agent(on_elicitation=...)``, a
workflow run with ``WorkflowEngine.run(..., on_elicitation=...)``, ``kavalai run`` with a prompt on the terminal).
A 2026-07-28 server's input requests (and those of a task) are answered in the caller's own task, so the caller's
answerer is simply the one in effect there. A handshake-era server asks on its session, in the connection's task;
then the answerer is the one of the calls in flight on that connection, when they all have the same, and the
request is declined, saying why, when they have none or several different ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Final, Literal

import anyio

from kavalai.adapters.mcp._catalog import ElicitationHandler

__all__ = [
    "CALLER",
    "INPUT_KEY",
    "INPUT_ROUND",
    "InputRound",
    "answering",
    "asking_together",
    "asks_together",
    "current_answerer",
]

#: ``McpServer(elicitation=CALLER)``: the caller of each tool call answers (see the module's docstring).
CALLER: Final[Literal["caller"]] = "caller"

_answerer: ContextVar[ElicitationHandler | None] = ContextVar("kavalai_mcp_answerer", default=None)

#: The key a server gave the request being answered in its input-required round (``None`` outside one): a relay
#: asking someone else in rounds of its own (``kavalai serve``) asks under the same key.
INPUT_KEY: ContextVar[str | None] = ContextVar("kavalai_mcp_input_key", default=None)


class InputRound:
    """The requests a 2026-07-28 server asked together in one input-required round, put to their answerers at once
    (within :class:`asking_together`). Each is marked :meth:`arrived` once its answerer holds it (or it was answered
    without being held), so that a relay waiting on :attr:`settled` passes them on together, in one round of its own,
    not one round a request."""

    __slots__ = ("_left", "methods", "settled")

    def __init__(self, keys: Iterable[str], methods: Iterable[str] = ()) -> None:
        self._left = set(keys)
        self.methods = frozenset(methods)  # what the round asks (``sampling/createMessage``, ...): all of it at once
        self.settled = anyio.Event()
        if not self._left:
            self.settled.set()

    def arrived(self, key: str) -> None:
        """The request ``key`` is held by its answerer (or answered): it is no longer on its way."""
        self._left.discard(key)
        if not self._left:
            self.settled.set()


#: The round the request being answered was asked in, when its requests are asked together (else ``None``).
INPUT_ROUND: ContextVar[InputRound | None] = ContextVar("kavalai_mcp_input_round", default=None)
_together: ContextVar[bool] = ContextVar("kavalai_mcp_together", default=False)


class asking_together:  # lower case: used as a function, `with asking_together():`
    """Within the block, the requests a 2026-07-28 server asks in one round are put to their answerers at once (a
    relay that asks someone else in rounds of its own, ``kavalai serve``, asks them in one round); outside it, one
    after the other (a person at a terminal is asked one question at a time)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _together.set(True)

    def __exit__(self, *exc_info: object) -> None:
        _together.reset(self._token)


def asks_together() -> bool:
    """Whether the requests of one round are put to their answerers at once here (:class:`asking_together`)."""
    return _together.get()


class answering:  # lower case: used as a function, `with answering(handler):`
    """Within the block, input requests of ``elicitation="caller"`` servers are answered by ``handler`` (an
    :data:`~kavalai.adapters.mcp.ElicitationHandler`; ``None``: declined).

    A class rather than a generator-made context manager: every workflow run enters one, and this costs a third.
    """

    __slots__ = ("_handler", "_token")

    def __init__(self, handler: ElicitationHandler | None) -> None:
        self._handler = handler

    def __enter__(self) -> None:
        self._token = _answerer.set(self._handler)

    def __exit__(self, *exc_info: object) -> None:
        _answerer.reset(self._token)


def current_answerer() -> ElicitationHandler | None:
    """The answerer in effect here, if any."""
    return _answerer.get()
