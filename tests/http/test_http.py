"""The shared HTTP module: one session per loop, the per-hop origin guard (as a middleware and as a session's
request class), bounded body reads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import pytest
from yarl import URL

from kavalai.http import (
    BodyTooLargeError,
    HopRefusedError,
    LoopSession,
    origin_guard,
    read_limited,
)
from tests.servers.tools_app import create_app
from tests.servers.uvicorn_server import serve


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(create_app(), lifespan="off") as url:
        yield url


@pytest.fixture(scope="module")
def other_url() -> Iterator[str]:
    """A second server: another origin (another port of 127.0.0.1)."""
    with serve(create_app(), lifespan="off") as url:
        yield url


def _factory(
    opened: list[aiohttp.ClientSession], cleaned: list[int] | None = None
) -> Callable[[], tuple[aiohttp.ClientSession, Callable[[], Awaitable[None]] | None]]:
    def make() -> tuple[aiohttp.ClientSession, Callable[[], Awaitable[None]] | None]:
        session = aiohttp.ClientSession()
        opened.append(session)

        async def cleanup() -> None:
            assert cleaned is not None
            cleaned.append(len(opened))

        return session, (cleanup if cleaned is not None else None)

    return make


async def test_one_session_per_loop_reused_until_closed() -> None:
    opened: list[aiohttp.ClientSession] = []
    cleaned: list[int] = []
    pool = LoopSession(_factory(opened, cleaned))
    assert pool.current() is None
    assert pool.session is None
    first = await pool.get()
    assert await pool.get() is first
    assert pool.current() is first
    await pool.aclose()
    assert first.closed
    assert cleaned == [1]
    assert pool.session is None
    second = await pool.get()
    assert second is not first
    assert len(opened) == 2
    await pool.aclose()
    assert second.closed
    assert cleaned == [1, 2]


async def test_concurrent_first_uses_open_one_session() -> None:
    opened: list[aiohttp.ClientSession] = []
    pool = LoopSession(_factory(opened))
    sessions = await asyncio.gather(*(pool.get() for _ in range(20)))
    assert len({id(session) for session in sessions}) == 1
    assert len(opened) == 1
    await pool.aclose()


def test_a_session_is_reopened_in_another_loop_and_closed_when_each_loop_ends() -> None:
    opened: list[aiohttp.ClientSession] = []
    pool = LoopSession(_factory(opened))

    async def use() -> aiohttp.ClientSession:
        return await pool.get()

    first = asyncio.run(use())
    assert first.closed  # asyncio.run() finalised the async generator that owned it
    second = asyncio.run(use())
    assert second is not first
    assert second.closed
    assert len(opened) == 2


#: How a test puts the hop guard on: its form (the session's middleware or the request's), the home origin, and
#: origin_guard's options.
Guard = tuple[str, Any, dict[str, Any]]
FORMS = pytest.mark.parametrize("form", ["request middleware", "session middleware"])


async def _get(url: str, guard: Guard | None = None, **options: Any) -> tuple[int, Any]:
    """GET ``url`` (JSON answer) through a fresh session, every hop judged by ``guard`` (if given), in its form."""
    form, origin, guard_options = guard if guard is not None else ("request middleware", None, {})
    session_options: dict[str, Any] = {}
    if guard is not None and form == "session middleware":
        session_options["middlewares"] = (origin_guard(origin, **guard_options),)
    elif guard is not None:
        options["middlewares"] = (origin_guard(origin, **guard_options),)
    async with aiohttp.ClientSession(**session_options) as session, session.get(url, **options) as response:
        return response.status, await response.json()


@FORMS
async def test_the_guard_strips_credentials_on_every_hop_to_another_origin(
    form: str, base_url: str, other_url: str
) -> None:
    guard = (form, base_url, {"secret_headers": ["X-Api-Key"]})
    headers = {"Authorization": "Bearer t0ken", "X-Api-Key": "k3y", "Cookie": "a=b", "X-Plain": "kept"}
    # Home origin: everything is sent.
    _, home = await _get(f"{base_url}/echo", guard, headers=headers)
    assert home["headers"]["x-api-key"] == "k3y"
    assert home["headers"]["authorization"] == "Bearer t0ken"
    # Home -> other -> other: the credentials never reach the other origin, on any hop.
    target = f"{other_url}/redirect?to={other_url}/echo"
    _, away = await _get(f"{base_url}/redirect", guard, params={"to": target}, headers=headers)
    sent = away["headers"]
    assert "x-api-key" not in sent
    assert "authorization" not in sent
    assert "cookie" not in sent
    assert sent["x-plain"] == "kept"


@FORMS
async def test_a_guard_of_another_origin_strips_from_the_first_hop(form: str, base_url: str, other_url: str) -> None:
    guard = (form, other_url, {"secret_headers": ["X-Token"]})
    _, echoed = await _get(f"{base_url}/echo", guard, headers={"X-Token": "s3cret"})
    assert "x-token" not in echoed["headers"]


@FORMS
async def test_the_hop_check_refuses_a_redirect_before_it_is_sent(form: str, base_url: str, other_url: str) -> None:
    seen: list[str] = []

    def check(url: URL) -> None:
        seen.append(str(url))
        if url.port != URL(base_url).port:
            raise PermissionError(f"Refused {url}: not the home server")

    with pytest.raises(HopRefusedError, match="not the home server") as info:
        await _get(f"{base_url}/redirect", (form, base_url, {"check": check}), params={"to": f"{other_url}/echo"})
    assert not isinstance(info.value, OSError)  # aiohttp would have wrapped an OSError as ClientOSError
    assert seen[0].startswith(f"{base_url}/redirect")
    assert seen[1] == f"{other_url}/echo"
    assert len(seen) == 2  # the refused hop was never sent, so nothing followed it


async def test_the_session_middleware_judges_after_the_cookie_jar_is_applied(base_url: str, other_url: str) -> None:
    # aiohttp runs a session's middlewares on the request it built for the hop (session and request headers, the
    # jar's cookies, basic auth): what the guard strips is what would have been sent.
    jar = aiohttp.CookieJar(unsafe=True)  # 127.0.0.1 keeps cookies
    hops = (origin_guard(base_url),)
    async with aiohttp.ClientSession(middlewares=hops, cookie_jar=jar, cookies={"sid": "c00kie"}) as session:
        auth = {"Authorization": aiohttp.encode_basic_auth("user", "S3cretPw")}  # aiohttp 3.14's form of auth=
        async with session.get(f"{base_url}/echo", headers=auth) as response:
            home = (await response.json())["headers"]
        away_url = f"{base_url}/redirect?status=307&to={other_url}/echo"
        async with session.get(away_url, headers=auth) as response:
            away = (await response.json())["headers"]
    assert home["authorization"].startswith("Basic ")
    assert "sid=c00kie" in home["cookie"]
    assert "authorization" not in away
    assert "cookie" not in away


async def test_a_requests_own_middlewares_replace_the_sessions_guard(base_url: str, other_url: str) -> None:
    # aiohttp's rule the REST session relies on (and its enumeration test enforces): a request passing middlewares
    # of its own runs those instead of the session's, so a request of a guarded session must never pass any.
    seen: list[str] = []

    def check(url: URL) -> None:
        seen.append(str(url))

    async with aiohttp.ClientSession(middlewares=(origin_guard(base_url, check=check),)) as session:
        async with session.get(f"{base_url}/json") as response:
            assert response.status == 200
        assert seen == [f"{base_url}/json"]
        async with session.get(f"{other_url}/echo", headers={"Authorization": "t0ken"}, middlewares=()) as response:
            assert (await response.json())["headers"]["authorization"] == "t0ken"  # no guard ran
    assert seen == [f"{base_url}/json"]


async def _drop_every_second_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A keep-alive HTTP server that answers a connection's first request and drops the connection on its second."""
    try:
        for answered in (True, False):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"GET ")
            if answered:
                body = b'{"ok":true}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body)
                )
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def test_the_retry_of_a_dropped_keep_alive_request_is_judged_again() -> None:
    # aiohttp retries an idempotent request once when a reused connection drops it, with a request built anew:
    # the session's guard judges that hop too, as it does a redirect.
    server = await asyncio.start_server(_drop_every_second_request, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/x"
    seen: list[str] = []

    def check(hop: URL) -> None:
        seen.append(str(hop))

    try:
        async with aiohttp.ClientSession(middlewares=(origin_guard(url, check=check),)) as session:
            for _ in range(2):  # the second goes on the kept-alive connection, which the server drops: retried
                async with session.get(url) as response:
                    assert await response.json() == {"ok": True}
    finally:
        server.close()
        await server.wait_closed()
    assert seen == [url, url, url]


async def _read(url: str, limit: int) -> bytes:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await read_limited(response, limit)


async def test_a_body_within_the_limit_is_read_whole(base_url: str) -> None:
    assert await _read(f"{base_url}/stream?size=600000", 600_000) == b"x" * 600_000
    assert await _read(f"{base_url}/gzip?size=1000", 1000) == b"0" * 1000


async def test_a_declared_length_over_the_limit_is_refused_before_reading(base_url: str) -> None:
    with pytest.raises(BodyTooLargeError, match="1000-byte limit .it declares 5000 bytes") as info:
        await _read(f"{base_url}/sized?size=5000", 1000)
    assert (info.value.limit, info.value.declared) == (1000, 5000)


async def test_a_streamed_body_over_the_limit_is_refused(base_url: str) -> None:
    with pytest.raises(BodyTooLargeError, match="the body kept coming"):
        await _read(f"{base_url}/stream?size=300001", 300_000)


async def test_a_gzip_bomb_is_counted_after_decompression(base_url: str) -> None:
    # 64 MiB of zeros are about 64 KiB on the wire; the limit counts what aiohttp inflates.
    with pytest.raises(BodyTooLargeError, match="1048576-byte limit") as info:
        await _read(f"{base_url}/gzip?size={64 * 1024 * 1024}", 1024 * 1024)
    assert info.value.declared is None
