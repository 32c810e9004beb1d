"""Whose capabilities a 2026-07-28 server is told of: the caller's who will be asked, when it is not the kernel.

A 2026-07-28 server reads what its client can be asked (sampling, elicitation, roots) from the client capabilities
in each request's ``_meta``, and asks only for those. A gateway (``kavalai serve``) passes what a server asks on to
its host, so the server must be told the host's capabilities, not the gateway's: a host that declared only sampling
is then asked a round of sampling alone, instead of the gateway refusing the elicitation in it (-32021).

The SDK's client (mcp 2.3) writes its own capabilities into every request's ``_meta`` as the request is sent, over
whatever the caller put there, and offers no public way to set them per request. So the narrowest owned adapter
does it: the caller opens :func:`asking_of` around the call; the connection puts the capabilities under a key of
kavalai's own in the request's ``_meta`` (:func:`asked_meta`), and :class:`AskedWrites`, the session's write stream,
moves them over the SDK's before the request leaves (the key never reaches the server). What the gateway answers
itself (its extensions: tasks) stays as the SDK declared it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["RELAYED", "AskedWrites", "asked_meta", "asking_of"]

#: Where the asked capabilities travel in a request's ``_meta`` between the connection and :class:`AskedWrites`.
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


class AskedWrites:
    """The session's write stream: a request whose ``_meta`` carries asked capabilities (:func:`asked_meta`) leaves
    with them in place of the SDK's for :data:`RELAYED` (the others kept), the carrying key removed."""

    def __init__(self, inner: Any) -> None:
        # The SDK loads with a connection, not with ``kavalai.adapters.mcp`` (tests/test_exported_members.py).
        import mcp_types
        from mcp.shared.message import SessionMessage

        self._inner = inner
        self._request = mcp_types.JSONRPCRequest
        self._message = SessionMessage
        self._declared = mcp_types.CLIENT_CAPABILITIES_META_KEY

    async def send(self, item: SessionMessage, /) -> None:
        """Send ``item``, its asked capabilities moved into place."""
        message = item.message
        if type(message) is self._request and message.params and _KEY in message.params.get("_meta", {}):
            meta = dict(message.params["_meta"])
            asked = meta.pop(_KEY)
            declared = meta.get(self._declared)
            if isinstance(declared, dict):
                kept = {key: value for key, value in declared.items() if key not in RELAYED}
                meta[self._declared] = {**kept, **asked}
            params = {**message.params, "_meta": meta}
            item = self._message(message.model_copy(update={"params": params}), item.metadata)
        await self._inner.send(item)

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> AskedWrites:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
