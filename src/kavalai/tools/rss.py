"""Kaval.AI 1.0's ``get_rss_feed`` tool: an RSS or Atom feed's title and items, fetched through kavalai's
SSRF-guarded HTTP layer and parsed with ``feedparser`` (which never fetches anything itself here)."""

from __future__ import annotations

import html
from collections.abc import Callable

from pydantic import BaseModel

from kavalai.adapters.python import pythontool
from kavalai.kernel import required_seconds
from kavalai.tools._kaval_fetch import fetch, run_blocking

__all__ = ["Feed", "RssFeedItem", "get_rss_feed", "make_get_rss_feed"]


class RssFeedItem(BaseModel):
    """One entry of a feed."""

    title: str | None = None
    link: str | None = None
    summary: str | None = None


class Feed(BaseModel):
    """A feed: its title, URL and items."""

    title: str | None = None
    url: str | None = None
    items: list[RssFeedItem] = []


def make_get_rss_feed(*, allow_private_networks: bool = False, timeout: float = 30.0) -> Callable[..., Feed]:
    """A ``get_rss_feed`` tool; ``allow_private_networks=True`` lifts the SSRF guard (trusted callers only).

    Raises:
        ValueError: ``timeout`` is not positive seconds (the one rule, ``kavalai.kernel.limit_seconds``).
    """
    seconds = required_seconds(timeout, what="timeout")

    @pythontool
    def get_rss_feed(url: str, max_results: int = 5) -> Feed:
        """Read an RSS or Atom feed and return its newest items.

        Args:
            url: the feed's absolute http(s) URL.
            max_results: the most items to return.
        """
        import feedparser

        try:
            fetched = run_blocking(fetch("GET", url, allow_private_networks=allow_private_networks, timeout=seconds))
        except (OSError, ValueError, TimeoutError) as exc:
            raise Exception(f"Error parsing feed: {exc}") from exc  # Kaval.AI's wording and type
        if fetched.status >= 400:
            raise Exception(f"Error parsing feed: HTTP {fetched.status} {fetched.reason}")
        parsed = feedparser.parse(fetched.body)
        if parsed.get("bozo") and not parsed.entries:
            raise Exception(f"Error parsing feed: {parsed.get('bozo_exception')}")
        if not parsed.entries:
            return Feed()
        items = [
            RssFeedItem(
                title=entry.get("title") or "No Title",
                link=entry.get("link") or "No Link",
                summary=html.unescape(entry.get("summary") or "No summary available."),
            )
            for entry in parsed.entries[: max(max_results, 0)]
        ]
        return Feed(title=parsed.feed.get("title"), url=url, items=items)

    return get_rss_feed


get_rss_feed = make_get_rss_feed()
