"""An ``httpx2`` transport around an ``httpcore2`` pool kavalai builds itself, so the pool dials through the outbound
gate's network backend: ``httpx2.AsyncHTTPTransport`` takes no backend, and putting one into the pool it made would
reach into its private attributes (tests/test_foreign_private_reads.py). Requests and responses cross as
``httpx2``'s own transport maps them, with ``httpcore2``'s errors raised as the ``httpx2`` errors of the same name."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2
import httpx2

__all__ = ["DialledTransport"]


class DialledTransport(httpx2.AsyncBaseTransport):
    """Sends each request through ``pool`` (an ``httpcore2`` connection pool or HTTP proxy pool), which it owns."""

    def __init__(self, pool: httpcore2.AsyncConnectionPool | httpcore2.AsyncHTTPProxy) -> None:
        self.pool = pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _mapped():
            answer = await self.pool.handle_async_request(sent)
        stream = answer.stream
        if not isinstance(stream, AsyncIterable):  # pragma: no cover - an async pool answers with an async stream
            raise httpx2.TransportError("the connection pool answered with a stream that is not asynchronous")
        return httpx2.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(stream),
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


class _Body(httpx2.AsyncByteStream):
    """A response's body as it arrives, its read errors raised as ``httpx2``'s."""

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self.stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for part in self.stream:
                yield part

    async def aclose(self) -> None:
        close: Any = getattr(self.stream, "aclose", None)
        if close is not None:
            with _mapped():
                await close()


@contextmanager
def _mapped() -> Iterator[None]:
    """An ``httpcore2`` error raised as the ``httpx2`` error of its name (the most specific its class has), as
    ``httpx2``'s own transport raises it; anything else as it is."""
    try:
        yield
    except Exception as exc:
        for kind in type(exc).__mro__:
            if kind.__module__.split(".")[0] != "httpcore2":
                continue
            mapped = getattr(httpx2, kind.__name__, None)
            if isinstance(mapped, type) and issubclass(mapped, httpx2.TransportError):
                raise mapped(str(exc)) from exc
        raise
