"""Enumeration: every request and notification the SDK's low-level server can handle (its ``on_*`` handlers) is
either relayed by ``kavalai serve`` or named here with the reason it is not, so that a handler the SDK adds (or one
the gateway drops) fails this test instead of going unnoticed."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from mcp.server import Server

SERVE = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "serve"

#: Handlers the gateway leaves to the SDK, and why.
NOT_RELAYED = {
    "on_ping": "answered by the gateway itself (the SDK's default)",
    "on_progress": "a host's progress on a request of the gateway's: the gateway sends none",
    "on_roots_list_changed": "roots are asked of the host during each call, so a change needs no relay",
}


def test_every_handler_of_the_sdk_server_is_relayed_or_named() -> None:
    handlers = {name for name in inspect.signature(Server.__init__).parameters if name.startswith("on_")}
    source = "\n".join(path.read_text(encoding="utf-8") for path in sorted(SERVE.glob("*.py")))
    relayed = set(re.findall(r"\b(on_[a-z_]+)=", source)) | set(re.findall(r'"(on_[a-z_]+)":', source))
    assert handlers - relayed - set(NOT_RELAYED) == set(), "a handler neither relayed nor named in NOT_RELAYED"
    assert set(NOT_RELAYED) <= handlers, "NOT_RELAYED names a handler the SDK no longer has"
    assert relayed & set(NOT_RELAYED) == set()
