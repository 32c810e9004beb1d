"""The bundled ``web`` tool group: ``web.fetch`` returns a page's readable text as Markdown.

It fetches through the same SSRF guard, pooling and limits as :mod:`kavalai.tools.http`, then keeps the page's
main content (``<main>``, else a single ``<article>``, else ``<body>``), drops scripts, styles, navigation,
forms and other noise, makes links absolute and converts the rest with ``markdownify``::

    from kavalai.tools import web
    web.register(kernel)                        # -> ["python://web.fetch"]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Final
from urllib.parse import urljoin

import anyio.to_thread
from aiohttp.abc import AbstractResolver
from bs4 import BeautifulSoup, Tag
from markdownify import MarkdownConverter
from pydantic import BaseModel, Field

from kavalai.adapters.python import pythontool
from kavalai.tools._fetch import DEFAULT_USER_AGENT, Fetched, open_client, parse_url
from kavalai.tools._register import check_limits, default_timeout_of, register_all

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["WebPage", "html_to_markdown", "register"]

_NOISE_TAGS: Final = (
    "script", "style", "noscript", "template", "iframe", "svg", "canvas", "object", "embed",
    "nav", "footer", "aside", "form", "button", "input", "select", "textarea", "dialog",
)  # fmt: skip
_NOISE_SELECTOR: Final = (
    '[role="navigation"], [role="banner"], [role="contentinfo"], [role="search"], [aria-hidden="true"], [hidden]'
)
_ACCEPT: Final = {"Accept": "text/html,application/xhtml+xml;q=0.9,text/*;q=0.8,*/*;q=0.5"}
_HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES: Final = frozenset({"application/json", "application/xml", "application/javascript"})
_XML_DECLARATION: Final = re.compile(r"^\s*<\?xml[^>]*>", re.IGNORECASE)
_BLANK_RUNS: Final = re.compile(r"\n{3,}")
_SPACES: Final = re.compile(r"\s+")


class WebPage(BaseModel):
    """A fetched page as Markdown."""

    url: str = Field(description="The final URL, after any redirects.")
    status: int = Field(description="The HTTP status code of the page.")
    title: str = Field(description="The page title ('' when it has none).")
    markdown: str = Field(description="The readable content as Markdown (plain text for text pages).")
    content_type: str = Field(description="The response's media type, e.g. 'text/html'.")
    truncated: bool = Field(description="Whether `markdown` was cut at `max_chars`.")


def register(
    kernel: FunctionKernel,
    *,
    prefix: str = "web",
    allow_private_networks: bool = False,
    allowed_networks: Iterable[str] = (),
    resolver: AbstractResolver | None = None,
    max_redirects: int = 5,
    max_response_bytes: int = 5 * 1024 * 1024,
    max_chars: int = 100_000,
    default_timeout: float = 30.0,
    user_agent: str = DEFAULT_USER_AGENT,
) -> list[str]:
    """Register ``python://<prefix>.fetch`` on ``kernel`` and return its URI in a list.

    Args:
        kernel: the kernel to register on; its ``close()`` closes the group's pooled HTTP session.
        prefix: the tool-name prefix.
        allow_private_networks: lift the SSRF guard so loopback and private addresses can be reached.
        allowed_networks: networks (``"10.1.0.0/16"``) reachable despite the guard.
        resolver: the aiohttp DNS resolver to dial through (the guard still judges its answers).
        max_redirects: redirects followed per fetch.
        max_response_bytes: the largest page accepted, in bytes; a larger one is refused.
        max_chars: the default and the ceiling of the tool's ``max_chars`` argument.
        default_timeout: the default of the tool's ``timeout`` argument, in seconds (at most 600: more is clamped).
        user_agent: the ``User-Agent`` header sent.

    Raises:
        ConfigurationError: an ``allowed_networks`` entry that is not a network, or a size limit not above 0.
        ValueError: ``default_timeout`` is not a positive number of seconds, ``None`` included (one above 600 is
            clamped to 600).
        ToolRegistrationError: the tool's name is taken (use another ``prefix``).
    """
    check_limits(prefix, max_chars=max_chars)
    default_timeout = default_timeout_of(default_timeout, group=prefix)
    client = open_client(
        prefix,
        allow_private_networks=allow_private_networks,
        allowed_networks=allowed_networks,
        resolver=resolver,
        max_redirects=max_redirects,
        max_response_bytes=max_response_bytes,
        user_agent=user_agent,
    )
    ceiling = max_chars

    @pythontool
    async def fetch(
        url: Annotated[str, Field(description="The absolute http:// or https:// URL of the page.")],
        max_chars: Annotated[
            int, Field(gt=0, description="Cut the Markdown after this many characters (capped by the group).")
        ] = ceiling,
        timeout: Annotated[float, Field(gt=0, le=600, description="Seconds for the whole fetch.")] = default_timeout,
    ) -> WebPage:
        """Fetch a web page and return its readable content as Markdown, with its title and final URL.

        Scripts, styles, navigation and forms are dropped; links are made absolute. Text pages (plain text,
        JSON, XML) are returned as they are; binary content is refused. Private and local addresses are
        refused.
        """
        fetched = await client.request("GET", parse_url(url), headers=_ACCEPT, timeout=timeout)
        title, text = await _readable(fetched)
        limit = min(max_chars, ceiling)
        return WebPage(
            url=fetched.url,
            status=fetched.status,
            title=title,
            markdown=text[:limit],
            content_type=fetched.content_type,
            truncated=len(text) > limit,
        )

    uris = register_all(kernel, prefix, {"fetch": fetch})
    kernel.on_close(client.aclose)  # the pooled session opens on first use; close() closes it
    return uris


async def _readable(fetched: Fetched) -> tuple[str, str]:
    kind = fetched.content_type
    if kind in _HTML_TYPES or (kind in ("", "application/octet-stream") and _sniff_html(fetched.body)):
        convert = functools.partial(html_to_markdown, fetched.body, fetched.url, charset=fetched.charset)
        return await anyio.to_thread.run_sync(convert)
    if kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return "", fetched.text()
    raise ValueError(
        f"{fetched.url} is {kind or 'of an unknown type'}, not a web page; web.fetch returns text only. "
        "Use http.request for other content."
    )


def _sniff_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def html_to_markdown(html: bytes | str, base_url: str, *, charset: str | None = None) -> tuple[str, str]:
    """Convert an HTML document to ``(title, markdown)`` keeping only its readable content.

    Args:
        html: the document, as bytes (its charset is detected from ``charset`` or its ``<meta>``) or text.
        base_url: the URL it came from, against which relative links are made absolute.
        charset: the charset the server declared, if any.
    """
    if isinstance(html, bytes):
        html = html.decode(charset or "utf-8", errors="replace") if charset else _decode_sniffed(html)
    if "<" not in html:  # no markup at all (bs4 would also warn that it looks like a file name or URL)
        return "", html.strip()
    soup = BeautifulSoup(_XML_DECLARATION.sub("", html, count=1), "html.parser")
    title = _title(soup)
    base = soup.find("base", href=True)
    if isinstance(base, Tag):
        base_url = urljoin(base_url, str(base["href"]))
    root = _main_content(soup)
    _drop_noise(root)
    _absolutize(root, base_url)
    try:
        markdown = MarkdownConverter(heading_style="ATX", bullets="-", escape_misc=False).convert_soup(root)
    except RecursionError:  # markdownify recurses once per nesting level; the text is still worth having
        markdown = root.get_text("\n")
    lines = (line.rstrip() for line in markdown.splitlines())
    return title, _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _decode_sniffed(body: bytes) -> str:
    # bs4 would sniff <meta charset> itself, but decoding here keeps its warnings about guessed encodings away.
    match = re.search(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", body[:4096], re.IGNORECASE)
    encoding = match.group(1).decode("ascii") if match else "utf-8"
    try:
        return body.decode(encoding, errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _title(soup: BeautifulSoup) -> str:
    candidates: list[str] = []
    if soup.title is not None:
        candidates.append(soup.title.get_text())
    meta = soup.find("meta", attrs={"property": "og:title"})
    if isinstance(meta, Tag):
        candidates.append(str(meta.get("content") or ""))
    heading = soup.find("h1")
    if heading is not None:
        candidates.append(heading.get_text())
    for text in candidates:
        if cleaned := _SPACES.sub(" ", text).strip():
            return cleaned
    return ""


def _main_content(soup: BeautifulSoup) -> Tag:
    main = soup.find("main")
    if isinstance(main, Tag):
        return main
    articles = soup.find_all("article")
    if len(articles) == 1 and isinstance(articles[0], Tag):
        return articles[0]
    return soup.body if soup.body is not None else soup


def _drop_noise(root: Tag) -> None:
    for tag in [*root.find_all(_NOISE_TAGS), *root.select(_NOISE_SELECTOR)]:
        if isinstance(tag, Tag) and not tag.decomposed:
            tag.decompose()
    for image in root.find_all("img"):
        if isinstance(image, Tag) and str(image.get("src", "")).startswith("data:"):
            image.decompose()


def _absolutize(root: Tag, base_url: str) -> None:
    for link in root.find_all("a", href=True):
        href = str(link["href"]).strip()
        if href.lower().startswith(("javascript:", "data:", "vbscript:")):
            link.unwrap()
        else:
            link["href"] = urljoin(base_url, href)
    for image in root.find_all("img", src=True):
        if isinstance(image, Tag):
            image["src"] = urljoin(base_url, str(image["src"]))
