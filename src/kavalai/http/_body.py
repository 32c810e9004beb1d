"""Reading a response body within a byte limit."""

from __future__ import annotations

from typing import Final

import aiohttp
from aiohttp import hdrs

__all__ = ["BodyTooLargeError", "read_limited"]

_CHUNK: Final = 256 * 1024


class BodyTooLargeError(ValueError):
    """A response body passed its byte limit; the caller turns it into its own error.

    Attributes:
        limit: the limit in bytes.
        declared: the ``Content-Length`` the server declared, when that alone gave it away.
        detail: how it was found out (``"it declares N bytes"`` or ``"the body kept coming"``).
    """

    def __init__(self, limit: int, declared: int | None = None) -> None:
        self.detail = f"it declares {declared} bytes" if declared is not None else "the body kept coming"
        super().__init__(f"the response is larger than the {limit}-byte limit ({self.detail})")
        self.limit = limit
        self.declared = declared


async def read_limited(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body of ``response``, or :class:`BodyTooLargeError` as soon as it passes ``limit`` bytes.

    The count is taken after decompression, as aiohttp inflates: a gzip bomb is refused while it inflates, not
    after. A ``Content-Length`` over the limit on an uncompressed body is refused before reading anything.
    """
    declared = response.content_length
    headers = response.headers
    if declared is not None and not headers.get(hdrs.CONTENT_ENCODING):  # aiohttp's names: no case folding per call
        if declared > limit:
            raise BodyTooLargeError(limit, declared)
        if hdrs.TRANSFER_ENCODING not in headers:  # the parser hands over exactly the declared bytes
            return await response.content.read()
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(limit)
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
