"""Kaval.AI 1.0's bundled tools under their names and fields, against a local server (the SSRF guard lifted for
loopback only through the factories, never by default)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import anyio.to_thread
import pytest
from aiohttp import web

from kavalai import FunctionKernel, ToolExecutionError
from kavalai.tools.rss import Feed, get_rss_feed, make_get_rss_feed
from kavalai.tools.webtools.crawl4ai import crawl_url, make_crawl_url, make_web_search
from kavalai.tools.webtools.http_client import http_request, make_http_request

RSS = """<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>
<item><title>One</title><link>http://example.org/1</link><description>First &amp;amp; best</description></item>
<item><link>http://example.org/2</link></item>
<item><title>Three</title></item></channel></rss>"""

RESULTS = """<html><body>
<div class="result"><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fpython.org%2F">Python</a>
<a class="result__snippet">The official home</a></div>
<div class="result"><a class="result__a" href="https://docs.python.org/">Docs</a></div>
</body></html>"""


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    async def echo(request: web.Request) -> web.Response:
        body = await request.text()
        return web.json_response(
            {
                "method": request.method,
                "query": dict(request.query),
                "body": body,
                "auth": request.headers.get("Authorization"),
            }
        )

    def fixed(status: int, text: str, content_type: str = "text/plain") -> object:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(status=status, text=text, content_type=content_type)

        return handler

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/missing", (fixed(404, "nope")))
    app.router.add_get(
        "/page",
        fixed(200, "<html><head><title>T</title></head><body><h1>Hi</h1><p>Text</p></body></html>", "text/html"),
    )
    app.router.add_get("/feed", (fixed(200, RSS, "application/rss+xml")))
    app.router.add_get(
        "/empty",
        (fixed(200, "<rss version='2.0'><channel></channel></rss>", "application/rss+xml")),
    )
    app.router.add_get("/search", (fixed(200, RESULTS, "text/html")))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_http_request_with_kaval_fields(base_url: str) -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("http_request", make_http_request(allow_private_networks=True))
    result = await kernel.call_tool(
        "python://http_request",
        {
            "method": "post",
            "url": f"{base_url}/echo",
            "params": {"q": 1},
            "json_body": {"a": 1},
            "auth_user": "u",
            "auth_password": "p",
        },
    )
    assert result.status_code == 200  # type: ignore[attr-defined]
    data = result.json_data  # type: ignore[attr-defined]
    assert (data["method"], data["query"], json.loads(data["body"])) == ("POST", {"q": "1"}, {"a": 1})
    assert data["auth"] == "Basic " + base64.b64encode(b"u:p").decode()
    missing = await kernel.call_tool("python://http_request", {"method": "GET", "url": f"{base_url}/missing"})
    assert (missing.status_code, missing.text) == (404, "nope")  # type: ignore[attr-defined]


async def test_the_default_tools_refuse_private_addresses(base_url: str) -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("http_request", http_request)
    with pytest.raises(ToolExecutionError, match="Refused"):
        await kernel.call_tool("python://http_request", {"method": "GET", "url": f"{base_url}/echo"})
    page = await crawl_url(f"{base_url}/page")
    assert page.success is False
    assert "Refused" in (page.error_message or "")
    with pytest.raises(Exception, match="Error parsing feed"):
        await anyio.to_thread.run_sync(get_rss_feed, f"{base_url}/feed")


async def test_crawl_url_returns_markdown(base_url: str) -> None:
    page = await make_crawl_url(allow_private_networks=True)(f"{base_url}/page", include_html=True)
    assert page.success is True
    assert page.status_code == 200
    assert "# Hi" in (page.markdown or "")
    assert (page.metadata or {}).get("title") == "T"
    assert "<h1>Hi</h1>" in (page.html or "")


async def test_web_search_reads_the_results_page(base_url: str) -> None:
    search = make_web_search(search_url=f"{base_url}/search?q={{query}}", allow_private_networks=True)
    found = await search("python docs", count=5)
    assert found.success is True
    assert [(r.title, r.url, r.snippet) for r in found.results] == [
        ("Python", "https://python.org/", "The official home"),
        ("Docs", "https://docs.python.org/", None),
    ]
    assert len((await search("x", count=1)).results) == 1


async def test_get_rss_feed_is_sync_and_fills_the_defaults(base_url: str) -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("get_rss_feed", make_get_rss_feed(allow_private_networks=True))
    feed = await kernel.call_tool("python://get_rss_feed", {"url": f"{base_url}/feed", "max_results": 3})
    assert feed.title == "News"  # type: ignore[attr-defined]
    assert [(i.title, i.link, i.summary) for i in feed.items] == [  # type: ignore[attr-defined]
        ("One", "http://example.org/1", "First & best"),
        ("No Title", "http://example.org/2", "No summary available."),
        ("Three", "No Link", "No summary available."),
    ]
    # Sync, as in Kaval.AI: called from a thread here, since the test's own server runs on this event loop.
    empty = await anyio.to_thread.run_sync(make_get_rss_feed(allow_private_networks=True), f"{base_url}/empty")
    assert empty == Feed()
