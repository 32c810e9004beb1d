"""Whose tokens a call uses: the identity of the current context.

An identity is a name the application chooses (a user id, an account, a tenant). Tools of a server configured with
OAuth get and keep tokens per identity, and each identity has connections of its own: what one identity was granted
is never used for another. The identity is a context variable, so it follows a call into every task it starts (an
agent's steps, a workflow's nodes) and costs nothing when no server uses OAuth.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

__all__ = ["DEFAULT_IDENTITY", "check_identity", "current_identity", "identity"]

#: The identity of a call made outside any ``identity(...)`` block (unless ``OAuth(identity=...)`` names another).
DEFAULT_IDENTITY: Final = "default"

_CURRENT: ContextVar[str | None] = ContextVar("kavalai_identity", default=None)
_VALID: Final = re.compile(r"[^\x00-\x1f\x7f]{1,256}")


def check_identity(name: object) -> str:
    """``name`` if it is a valid identity: a non-empty string of at most 256 characters, no control characters.

    Raises:
        ValueError: it is not.
    """
    if not isinstance(name, str) or not name.strip() or not _VALID.fullmatch(name):
        raise ValueError("an identity is a non-empty name of at most 256 characters, without control characters")
    return name


@contextmanager
def identity(name: str) -> Iterator[str]:
    """Make the calls inside the block act for identity ``name``::

        with kavalai.auth.identity("alice"):
            await kernel.call_tool("mcp://files.read", {"path": "notes.txt"})

    A server configured with OAuth then uses alice's tokens (getting them first if it has none) over a connection
    of alice's own. Blocks nest; the innermost wins. Tasks started inside the block inherit the identity.

    Raises:
        ValueError: ``name`` is not a valid identity (see :func:`check_identity`).
    """
    token = _CURRENT.set(check_identity(name))
    try:
        yield name
    finally:
        _CURRENT.reset(token)


def current_identity() -> str | None:
    """The identity set by the innermost enclosing :func:`identity` block, or ``None`` outside any."""
    return _CURRENT.get()
