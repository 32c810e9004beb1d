"""Kaval.AI 1.0's ``crawl_url`` and ``web_search`` tools, on kavalai's SSRF-guarded HTTP layer.

Kaval.AI drove the Crawl4AI browser crawler; kavalai fetches the page itself and turns its HTML into Markdown (the
bundled ``web`` group's converter), and searches by reading the results page of an HTML search endpoint (DuckDuckGo's
by default). A refused or failed URL is answered with ``success=False`` and an ``error_message``, not raised, as in
Kaval.AI.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs, quote_plus, urlsplit

from bs4 import BeautifulSoup
from pydantic import BaseModel

from kavalai.adapters.python import pythontool
from kavalai.tools._kaval_fetch import fetch
from kavalai.tools.web import html_to_markdown

__all__ = [
    "Crawl4aiResponse",
    "WebSearchResponse",
    "WebSearchResult",
    "crawl_url",
    "make_crawl_url",
    "make_web_search",
    "web_search",
]

#: The search endpoint ``web_search`` reads by default; ``{query}`` is replaced by the URL-encoded query.
DEFAULT_SEARCH_URL = "https://html.duckduckgo.com/html/?q={query}"


class Crawl4aiResponse(BaseModel):
    """A crawled page, as Kaval.AI 1.0 described it."""

    url: str
    success: bool
    markdown: str | None = None
    html: str | None = None
    status_code: int | None = None
    metadata: dict[str, Any] | None = None
    error_message: str | None = None


class WebSearchResult(BaseModel):
    """One search result."""

    title: str
    url: str
    snippet: str | None = None


class WebSearchResponse(BaseModel):
    """The results of a search, as Kaval.AI 1.0 described them."""

    query: str
    success: bool
    results: list[WebSearchResult] = []
    error_message: str | None = None


def make_crawl_url(*, allow_private_networks: bool = False) -> Callable[..., Coroutine[Any, Any, Crawl4aiResponse]]:
    """A ``crawl_url`` tool; ``allow_private_networks=True`` lifts the SSRF guard (trusted callers only)."""

    @pythontool
    async def crawl_url(
        url: str, include_html: bool = False, bypass_cache: bool = False, timeout: float = 60.0
    ) -> Crawl4aiResponse:
        """Fetch a web page and return its readable content as Markdown.

        Args:
            url: the absolute http(s) URL of the page.
            include_html: also return the page's HTML.
            bypass_cache: accepted for compatibility (kavalai keeps no cache).
            timeout: seconds for the whole fetch.
        """
        try:
            fetched = await fetch("GET", url, allow_private_networks=allow_private_networks, timeout=timeout)
        except (OSError, ValueError, TimeoutError) as exc:  # refused address, unreachable, too large, ...
            return Crawl4aiResponse(url=url, success=False, error_message=f"Refused or failed: {exc}")
        text = fetched.text()
        title, markdown = html_to_markdown(fetched.body, fetched.url, charset=fetched.charset)
        return Crawl4aiResponse(
            url=fetched.url,
            success=fetched.status < 400,
            markdown=markdown,
            html=text if include_html else None,
            status_code=fetched.status,
            metadata={"title": title},
            error_message=None if fetched.status < 400 else f"HTTP {fetched.status} {fetched.reason}",
        )

    return crawl_url


def make_web_search(
    *, search_url: str = DEFAULT_SEARCH_URL, allow_private_networks: bool = False
) -> Callable[..., Coroutine[Any, Any, WebSearchResponse]]:
    """A ``web_search`` tool reading the HTML results page at ``search_url`` (``{query}`` is replaced)."""

    @pythontool
    async def web_search(query: str, count: int = 10, timeout: float = 60.0) -> WebSearchResponse:
        """Search the web and return result titles, URLs and snippets.

        Args:
            query: what to search for.
            count: the most results to return.
            timeout: seconds for the search.
        """
        url = search_url.replace("{query}", quote_plus(query))
        try:
            fetched = await fetch("GET", url, allow_private_networks=allow_private_networks, timeout=timeout)
        except (OSError, ValueError, TimeoutError) as exc:
            return WebSearchResponse(query=query, success=False, error_message=f"Search failed: {exc}")
        if fetched.status >= 400:
            return WebSearchResponse(query=query, success=False, error_message=f"HTTP {fetched.status}")
        return WebSearchResponse(query=query, success=True, results=_results(fetched.text(), max(count, 0)))

    return web_search


def _results(html: str, count: int) -> list[WebSearchResult]:
    soup = BeautifulSoup(html, "html.parser")
    found: list[WebSearchResult] = []
    for link in soup.select("a.result__a"):
        if len(found) >= count:
            break
        href = str(link.get("href") or "")
        target = _unwrap(href)
        if not target.startswith(("http://", "https://")):
            continue
        container = link.find_parent(class_="result") or link.parent
        snippet = container.select_one(".result__snippet") if container is not None else None
        found.append(
            WebSearchResult(
                title=link.get_text(" ", strip=True),
                url=target,
                snippet=snippet.get_text(" ", strip=True) if snippet is not None else None,
            )
        )
    return found


def _unwrap(href: str) -> str:
    """DuckDuckGo wraps result links as ``//duckduckgo.com/l/?uddg=<url>``; return the real URL."""
    parts = urlsplit(href)
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href


crawl_url = make_crawl_url()
web_search = make_web_search()
