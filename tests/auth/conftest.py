"""Fixtures of the OAuth tests: the demo authorization server with the MCP server and REST API it protects, all on
free 127.0.0.1 ports in the test's event loop (``kavalai.demo.oauth``, built from the MCP SDK's server pieces)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest

from kavalai.auth import OAuthRecord, TokenStore
from kavalai.demo.oauth import DemoOAuth, serve_demo_oauth

DemoFactory = Callable[..., AbstractAsyncContextManager[DemoOAuth]]


@pytest.fixture
async def demo() -> AsyncIterator[DemoOAuth]:
    """The demo servers with their defaults (one-hour tokens, no confidential clients)."""
    async with serve_demo_oauth() as running:
        yield running


@pytest.fixture
def demo_with() -> DemoFactory:
    """``async with demo_with(access_token_lifetime=1, clients={...}, deny=[...]) as demo:`` for other settings."""
    return serve_demo_oauth


async def wait_until_expired(store: TokenStore, resource: str, identity: str, timeout: float = 5.0) -> OAuthRecord:
    """Wait (bounded) until the access token kept for ``identity`` has expired by the clock; return the record."""
    record = await store.load(resource, identity)
    assert record is not None
    assert record.tokens is not None
    assert record.tokens.expires_at is not None
    with anyio.fail_after(timeout):
        while time.time() < record.tokens.expires_at + 0.05:  # noqa: ASYNC110 - waiting for the clock itself
            await anyio.sleep(0.05)
    return record


def all_secrets(*records: OAuthRecord | None, extra: Any = ()) -> list[str]:
    """Every token and client secret in ``records`` (to look for in messages and logs)."""
    found = [*extra]
    for record in records:
        if record is None:
            continue
        if record.tokens is not None:
            found += [record.tokens.access_token, record.tokens.refresh_token or ""]
        found.append((record.client or {}).get("client_secret") or "")
    return [secret for secret in found if secret]
