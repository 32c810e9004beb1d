"""Pages of ``kavalai serve``'s listings (tools, resources, templates, prompts): a listing longer than
:data:`PAGE_SIZE` items is answered in pages, each with the ``nextCursor`` of the next; a host that sends a cursor the
gateway did not give is told so (``-32602``). The cursor is the offset of the page's first item, so a listing that
changes between pages may repeat or skip an item, as with most servers.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, Final, TypeVar

import mcp_types as types

from kavalai.serve._errors import protocol_error

__all__ = ["PAGE_SIZE", "page"]

#: The most items one listing page holds.
PAGE_SIZE: Final = 500

T = TypeVar("T")


def page(items: Sequence[T], params: Any, *, size: int = PAGE_SIZE) -> tuple[list[T], str | None]:
    """The page of ``items`` that ``params`` (the request's, with its ``cursor``) asks for, and the next cursor."""
    cursor = getattr(params, "cursor", None)
    start = 0 if not cursor else _offset(cursor, len(items))
    end = start + size
    return list(items[start:end]), (_cursor(end) if end < len(items) else None)


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"kavalai:{offset}".encode()).decode()


def _offset(cursor: str, total: int) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        prefix, _, number = text.partition(":")
        offset = int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        offset = -1
        prefix = ""
    if prefix != "kavalai" or not 0 <= offset <= total:
        raise protocol_error(types.INVALID_PARAMS, f"Unknown cursor: {cursor[:100]}")
    return offset
