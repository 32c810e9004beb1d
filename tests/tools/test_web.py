"""``web.fetch`` against a real local server: HTML to readable Markdown, through the SSRF guard."""

from __future__ import annotations

import math
from typing import Any

import pytest
from tests.tools.conftest import LocalServer, StaticResolver

from kavalai import ConfigurationError, FunctionKernel, ToolExecutionError
from kavalai.tools import web
from kavalai.tools.web import html_to_markdown

FETCH = "python://web.fetch"


@pytest.fixture
def open_kernel(kernel: FunctionKernel) -> FunctionKernel:
    """A kernel whose web group may reach the loopback test server."""
    web.register(kernel, allow_private_networks=True, max_response_bytes=32 * 1024, max_chars=5000)
    return kernel


async def fetch(kernel: FunctionKernel, **arguments: Any) -> Any:
    return await kernel.call_tool(FETCH, arguments=arguments)


async def test_register_returns_the_uri(kernel: FunctionKernel) -> None:
    assert web.register(kernel) == [FETCH]


async def test_a_local_html_page_becomes_markdown(open_kernel: FunctionKernel, server: LocalServer) -> None:
    page = await fetch(open_kernel, url=server.url("/page.html"))
    assert page.status == 200
    assert page.title == "Guarded Fetching"
    assert page.url == server.url("/page.html")
    assert page.content_type == "text/html"
    assert page.truncated is False
    markdown = page.markdown
    assert markdown.startswith("# Fetching pages safely")
    assert "## Steps" in markdown
    assert "The guard checks **every** address" in markdown
    assert f"[the guard docs]({server.url('/docs/guard')})" in markdown
    assert "- resolve the host\n- check the address" in markdown
    assert "no script links" in markdown
    assert "javascript:" not in markdown
    for noise in ("SCRIPT-NOISE", "NAV-NOISE", "FOOTER-NOISE", "FORM-NOISE", "color: red"):
        assert noise not in markdown


async def test_the_final_url_after_a_redirect_is_reported(open_kernel: FunctionKernel, server: LocalServer) -> None:
    page = await fetch(open_kernel, url=server.url("/redirect?to=/page.html"))
    assert page.url == server.url("/page.html")
    assert page.title == "Guarded Fetching"


async def test_max_chars_cuts_the_markdown(open_kernel: FunctionKernel, server: LocalServer) -> None:
    page = await fetch(open_kernel, url=server.url("/page.html"), max_chars=10)
    assert page.markdown == "# Fetching"
    assert page.truncated is True


async def test_a_text_page_is_returned_as_it_is(open_kernel: FunctionKernel, server: LocalServer) -> None:
    page = await fetch(open_kernel, url=server.url("/text"))
    assert page.markdown == "caf\u00e9 au lait"
    assert page.title == ""
    json_page = await fetch(open_kernel, url=server.url("/json"))
    assert '"items":[1,2,3]' in json_page.markdown


async def test_binary_content_is_refused(open_kernel: FunctionKernel, server: LocalServer) -> None:
    with pytest.raises(ToolExecutionError, match="is application/octet-stream, not a web page") as caught:
        await fetch(open_kernel, url=server.url("/binary"))
    assert isinstance(caught.value.__cause__, ValueError)


async def test_a_page_over_the_size_cap_is_refused(open_kernel: FunctionKernel, server: LocalServer) -> None:
    with pytest.raises(ToolExecutionError, match="larger than the 32768-byte limit"):
        await fetch(open_kernel, url=server.url("/stream?size=40000"))


async def test_the_guard_refuses_local_addresses_by_default(kernel: FunctionKernel, server: LocalServer) -> None:
    web.register(kernel)
    before = len(server.hits)
    with pytest.raises(ToolExecutionError, match="PermissionError: Refused .* is a loopback address") as caught:
        await fetch(kernel, url=server.url("/page.html"))
    assert isinstance(caught.value.__cause__, PermissionError)
    assert len(server.hits) == before


async def test_the_guard_checks_resolved_names_and_redirects(kernel: FunctionKernel, server: LocalServer) -> None:
    resolver = StaticResolver({"news.example.com": ["127.0.0.1"], "docs.example.com": ["192.168.0.10"]})
    web.register(kernel, allowed_networks=["127.0.0.1"], resolver=resolver)
    page = await fetch(kernel, url=f"http://news.example.com:{server.port}/page.html")
    assert page.title == "Guarded Fetching"
    with pytest.raises(ToolExecutionError, match=r"resolves to refused addresses: 192\.168\.0\.10"):
        await fetch(kernel, url=server.url(f"/redirect?to=http://docs.example.com:{server.port}/page.html"))


def test_html_to_markdown_prefers_the_article_and_keeps_headings() -> None:
    html = (
        "<html><head><meta property='og:title' content='OG title'></head><body>"
        "<header role='banner'>BANNER</header><article><h2>Inside</h2><p>Text <em>here</em>.</p>"
        "<img src='/a.png' alt='pic'><img src='data:image/png;base64,AAAA' alt='inline'></article>"
        "<aside>ASIDE</aside></body></html>"
    )
    title, markdown = html_to_markdown(html.encode(), "https://site.test/x/")
    assert title == "OG title"
    assert markdown.startswith("## Inside")
    assert "Text *here*." in markdown
    assert "![pic](https://site.test/a.png)" in markdown
    assert "data:" not in markdown
    assert "BANNER" not in markdown
    assert "ASIDE" not in markdown


def test_html_to_markdown_reads_the_meta_charset() -> None:
    html = "<html><head><meta charset='iso-8859-1'><title>Caf\u00e9</title></head><body>na\u00efve</body></html>"
    title, markdown = html_to_markdown(html.encode("latin-1"), "https://site.test/")
    assert title == "Caf\u00e9"
    assert markdown == "na\u00efve"


@pytest.mark.parametrize("text", ["https://example.com/page", "just words", "  "])
def test_html_without_markup_is_returned_as_text(text: str) -> None:
    assert html_to_markdown(text, "https://site.test/") == ("", text.strip())


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"max_chars": 0}, "max_chars must be a whole number above 0, got 0"),
        ({"max_chars": math.nan}, "max_chars must be a whole number above 0, got nan"),
        ({"max_chars": True}, "max_chars must be a whole number above 0, got True"),
        ({"max_response_bytes": -1}, "max_response_bytes must be a whole number above 0, got -1"),
        ({"max_response_bytes": "5"}, "max_response_bytes must be a whole number above 0, got '5'"),
    ],
)
def test_bad_settings_are_refused_at_registration(options: dict[str, Any], why: str) -> None:
    kernel = FunctionKernel()
    with pytest.raises(ConfigurationError, match=f"Cannot register the web tools: {why}"):
        web.register(kernel, **options)
    assert kernel.list_tools() == []


def test_a_deeply_nested_page_still_gives_its_text() -> None:
    # markdownify recurses once per level; past Python's recursion limit the page falls back to its plain text.
    depth = 3000
    html = f"<title>Deep</title><main><h1>Top</h1>{'<div>' * depth}<p>inner</p>{'</div>' * depth}</main>"
    title, markdown = html_to_markdown(html, "https://site.test/")
    assert title == "Deep"
    assert markdown.split() == ["Top", "inner"]
