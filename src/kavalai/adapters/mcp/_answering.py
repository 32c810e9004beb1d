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

from contextvars import ContextVar
from typing import Final, Literal

from kavalai.adapters.mcp._catalog import ElicitationHandler

__all__ = ["CALLER", "INPUT_KEY", "answering", "current_answerer"]

#: ``McpServer(elicitation=CALLER)``: the caller of each tool call answers (see the module's docstring).
CALLER: Final[Literal["caller"]] = "caller"

_answerer: ContextVar[ElicitationHandler | None] = ContextVar("kavalai_mcp_answerer", default=None)

#: The key a server gave the request being answered in its input-required round (``None`` outside one): a relay
#: asking someone else in rounds of its own (``kavalai serve``) asks under the same key.
INPUT_KEY: ContextVar[str | None] = ContextVar("kavalai_mcp_input_key", default=None)


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
