"""Totals of a paginated listing (``tools/list``, ``resources/list``, ``prompts/list``) across all its pages.

Each page is bounded by ``max_message_bytes``; the pages together were bounded only by their count, so a server that
paginates for ever, 2,000 new tools a page, grew the client to gigabytes before ``connect_timeout`` stopped it. A
:class:`ListingTotals` counts the items and an over-estimate of their bytes as each page arrives, on connect and on
every refresh, and refuses the listing once either total passes its limit, before the next page is asked for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel

from kavalai.errors import ServerConnectionError

__all__ = ["MAX_LISTED_BYTES", "MAX_LISTED_ITEMS", "ListingTotals", "all_pages"]

#: The most items (tools, resources, prompts) one listing may hold across its pages.
MAX_LISTED_ITEMS: Final = 50_000
#: The most bytes (estimated from the items' texts) one listing may hold across its pages.
MAX_LISTED_BYTES: Final = 64 * 2**20


class ListingTotals:
    """The running totals of one listing, refused past :data:`MAX_LISTED_ITEMS` or :data:`MAX_LISTED_BYTES`.

    Args:
        server: the server's name, for the error.
        what: the request (``"tools/list"``).
    """

    __slots__ = ("bytes", "items", "max_bytes", "max_items", "server", "what")

    def __init__(
        self, server: str | None, what: str, *, max_items: int = MAX_LISTED_ITEMS, max_bytes: int = MAX_LISTED_BYTES
    ) -> None:
        self.server, self.what = server, what
        self.max_items, self.max_bytes = max_items, max_bytes
        self.items = 0
        self.bytes = 0

    def add(self, page: Sequence[Any]) -> None:
        """Count one page's items; raise :class:`ServerConnectionError` when the listing is over a limit."""
        self.items += len(page)
        if self.items > self.max_items:
            self._refuse(f"more than {self.max_items:,} items")
        for item in page:
            self.bytes += _size(item, self.max_bytes - self.bytes)
            if self.bytes > self.max_bytes:
                self._refuse(f"more than {self.max_bytes:,} bytes")

    def _refuse(self, over: str) -> None:
        who = f"MCP server {self.server!r}" if self.server else "The MCP server"
        raise ServerConnectionError(
            f"{who} listed {over} in its {self.what} pages (the listing is refused; a server paginating for ever "
            "cannot exhaust memory).",
            server=self.server,
        )


def _size(value: Any, limit: int) -> int:
    """An over-estimate of the bytes of ``value`` as JSON, stopping once past ``limit``."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 3
        elif isinstance(item, BaseModel):
            stack.extend(item.__dict__.values())
            total += 2
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
            total += 2 + 2 * len(item)
        elif isinstance(item, list | tuple):
            stack.extend(item)
            total += 2 + len(item)
        else:
            total += 8
    return total


async def all_pages(
    list_page: Callable[[str | None], Awaitable[Any]], field: str, what: str, *, max_pages: int
) -> list[Any]:
    """Every item of a paginated listing: ``list_page(cursor)`` for each page (its items in ``field``), under one
    :class:`ListingTotals` and at most ``max_pages`` pages (a paginator that never ends cannot hang the caller)."""
    items: list[Any] = []
    cursor: str | None = None
    totals = ListingTotals(None, what)
    for _ in range(max_pages):
        page = await list_page(cursor)
        totals.add(getattr(page, field))
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items
