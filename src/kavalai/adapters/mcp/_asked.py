"""Whose capabilities a 2026-07-28 server is told of: the caller's who will be asked, when it is not the kernel.

A 2026-07-28 server reads what its client can be asked (sampling, elicitation, roots) from the client capabilities
in each request's ``_meta``, and asks only for those. A gateway (``kavalai serve``) passes what a server asks on to
its host, so the server must be told the host's capabilities, not the gateway's: a host that declared only sampling
is then asked a round of sampling alone, instead of the gateway refusing the elicitation in it (-32021).

The SDK's client (mcp 2.3) writes its own capabilities into every request's ``_meta`` as the request is sent, over
whatever the caller put there, and offers no public way to set them per request. So the narrowest owned adapter
does it: the caller opens :func:`asking_of` around the call; the connection puts the capabilities under a key of
kavalai's own in the request's ``_meta`` (:func:`asked_meta`), and the session's write stream (:func:`moved_into_place`,
in :class:`~kavalai.adapters.mcp._session_streams.SessionStreams`) moves them over the SDK's before the request
leaves (the key never reaches the server). What the gateway answers itself (its extensions: tasks) stays as the SDK
declared it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["RELAYED", "asked_meta", "asking_of", "moved_into_place"]

#: Where the asked capabilities travel in a request's ``_meta`` between the connection and :func:`moved_into_place`.
_KEY: Final = "io.kavalai/asked-capabilities"
#: The capabilities that say what the client can be asked: the host's replace the gateway's.
RELAYED: Final = ("sampling", "elicitation", "roots")

_asked: ContextVar[dict[str, Any] | None] = ContextVar("kavalai_mcp_asked_capabilities", default=None)


@contextmanager
def asking_of(capabilities: Mapping[str, Any] | None) -> Iterator[None]:
    """Within the block, the 2026-07-28 servers called from this context are told that what they ask goes to a
    client with ``capabilities`` (wire form, as a host declared them): of :data:`RELAYED`, only those."""
    token = _asked.set({key: capabilities[key] for key in RELAYED if key in capabilities} if capabilities else {})
    try:
        yield
    finally:
        _asked.reset(token)


def asked_meta(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """A request's ``_meta`` carrying the capabilities of the block (:func:`asking_of`), when one is open."""
    asked = _asked.get()
    if asked is None:
        return meta
    return {**(meta or {}), _KEY: asked}


def moved_into_place(item: SessionMessage) -> SessionMessage:
    """``item`` (a request) leaving with the asked capabilities its ``_meta`` carries (:func:`asked_meta`) in place
    of the SDK's for :data:`RELAYED` (the others kept) and the carrying key removed; ``item`` itself when it carries
    none. :class:`~kavalai.adapters.mcp._session_streams.SessionStreams` applies it to every request it sends."""
    message = item.message
    params = getattr(message, "params", None)
    if not params or _KEY not in (params.get("_meta") or {}):
        return item
    # The SDK loads with a connection, not with ``kavalai.adapters.mcp`` (tests/test_exported_members.py).
    import mcp_types
    from mcp.shared.message import SessionMessage

    meta = dict(params["_meta"])
    asked = meta.pop(_KEY)
    declared = meta.get(mcp_types.CLIENT_CAPABILITIES_META_KEY)
    if isinstance(declared, dict):
        kept = {key: value for key, value in declared.items() if key not in RELAYED}
        meta[mcp_types.CLIENT_CAPABILITIES_META_KEY] = {**kept, **asked}
    return SessionMessage(message.model_copy(update={"params": {**params, "_meta": meta}}), item.metadata)
