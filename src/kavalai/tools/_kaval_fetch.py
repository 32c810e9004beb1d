"""One guarded fetch for the Kaval.AI-named tools (``http_request``, ``crawl_url``, ``web_search``,
``get_rss_feed``): the SSRF guard, redirect and size limits of the bundled tools, a client per call (these tools
are module-level functions with no kernel to close a pooled session)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from kavalai.tools._fetch import FetchConfig, Fetched, GuardedClient, parse_url

__all__ = ["fetch", "run_blocking"]

T = TypeVar("T")


async def fetch(
    method: str,
    url: str,
    *,
    allow_private_networks: bool,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    json: Any = None,
    body: str | None = None,
    max_response_bytes: int = 2 * 1024 * 1024,
) -> Fetched:
    """One guarded request: private and local addresses refused unless allowed, redirects checked hop by hop."""
    config = FetchConfig(allow_private_networks=allow_private_networks, max_response_bytes=max_response_bytes)
    client = GuardedClient(config)
    try:
        return await client.request(method, parse_url(url), headers=headers, json=json, body=body, timeout=timeout)
    finally:
        await client.aclose()


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end from sync code: here when no event loop runs in this thread (a tool's worker
    thread), else in a thread of its own (a sync tool called directly from async code)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
