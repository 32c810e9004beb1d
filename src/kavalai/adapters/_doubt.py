"""A server's doubt policy (``RestServer``/``McpServer`` ``on_doubt`` and ``tools_on_doubt``): what a durable run
does with a call of one of its tools found sent without a result after a crash or an outage.

A REST or MCP call carries the step's idempotency key (``Idempotency-Key``, MCP ``_meta``), so a durable run replays
it with its key by default: the server is trusted to tell a repeat. Giving a server (or one of its tools) a policy
says it does not: a call of a tool that is not read-only or idempotent (an idempotent HTTP method, MCP
``readOnlyHint``/``idempotentHint``) is then marked sent before it goes out, and a resume that finds the mark without
a result applies the policy (``"fail"``: the step is in doubt, ``"replay"``: sent again, ``"ask"``: the operator is
asked). See :mod:`kavalai.durable._doubt`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from difflib import get_close_matches
from typing import Any, Literal, Protocol

from pydantic import Field

from kavalai.errors import ConfigurationError

__all__ = [
    "DoubtKeyError",
    "OnDoubt",
    "ServerDoubt",
    "check_doubt_keys",
    "doubt_metadata",
    "on_doubt_field",
    "tools_on_doubt_field",
]

#: What a durable run does with a step found sent without a result.
OnDoubt = Literal["fail", "replay", "ask"]


class ServerDoubt(Protocol):
    """A server setting with a doubt policy."""

    @property
    def on_doubt(self) -> OnDoubt | None:
        """The policy of the server's tools."""

    @property
    def tools_on_doubt(self) -> Mapping[str, OnDoubt]:
        """The policy of some tools, by the tool's name on the server."""


def on_doubt_field() -> Any:
    """The ``on_doubt`` field of a server setting."""
    return Field(
        default=None,
        description="What a durable run does with a call of this server's tools found sent without a result "
        "after a crash: 'fail' (the step is in doubt: OutcomeUnknownError), 'replay' (sent again) or 'ask' (the "
        "operator is asked, durably). Setting it says the server does not honour the idempotency key kavalai "
        "sends, so a call of a tool that is not read-only or idempotent is not repeated blindly. None: the key is "
        "trusted and the call is replayed with it.",
    )


def tools_on_doubt_field() -> Any:
    """The ``tools_on_doubt`` field of a server setting."""
    return Field(
        default_factory=dict,
        description="The on_doubt policy of some tools, by the tool's name on this server (over `on_doubt`).",
    )


def doubt_metadata(server: ServerDoubt, tool: str) -> dict[str, Any]:
    """``{"on_doubt": policy}`` for a tool definition's metadata when the server gives tool ``tool`` a policy,
    else ``{}``."""
    policy = server.tools_on_doubt.get(tool, server.on_doubt)
    return {} if policy is None else {"on_doubt": policy}


class DoubtKeyError(ConfigurationError):
    """A ``tools_on_doubt`` key names no tool of its server: a setting of the user's, told apart from the other
    configuration errors a connection meets (a pinned protocol the server does not speak stays a connection error)."""


def check_doubt_keys(server: ServerDoubt, where: str, tools: Iterable[str]) -> None:
    """Check that every key of the server's ``tools_on_doubt`` names one of its ``tools`` (their names on the
    server), once its tools are known: a key that names none would leave that tool's calls to the server's policy
    without a word.

    Raises:
        DoubtKeyError: a :class:`ConfigurationError` naming the keys (with a close tool name, if any) and ``where``
            (the server).
    """
    known = sorted(set(tools))
    unknown = [key for key in server.tools_on_doubt if key not in known]
    if not unknown:
        return
    shown = [
        f"{key!r} (did you mean {close[0]!r}?)" if (close := get_close_matches(key, known, 1)) else repr(key)
        for key in unknown
    ]
    listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "") if known else "none"
    raise DoubtKeyError(
        f"{where}: tools_on_doubt names {', '.join(shown)}, not a tool of this server (its tools: {listed})."
    )
