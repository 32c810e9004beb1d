"""OAuth for REST servers, against the demo authorization server and its protected aiohttp REST API on 127.0.0.1: a
pooled session per identity, refresh, client credentials, refusals, and tokens kept out of errors and other origins."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from aiohttp import web

from kavalai import AuthenticationError, FunctionKernel, HTTPStatusError, RestServer
from kavalai.auth import OAuth, identity
from kavalai.demo.oauth import DemoOAuth
from tests.auth.conftest import DemoFactory, wait_until_expired


def _register(kernel: FunctionKernel, demo: DemoOAuth, oauth: OAuth, *tools: str) -> None:
    kernel.register_rest_server(RestServer(name="api", url=demo.rest_url, auth=oauth))
    for tool in ("whoami", *tools):
        kernel.register_rest_tool("api", tool, "GET")


async def _call(kernel: FunctionKernel, tool: str = "whoami") -> dict[str, object]:
    return (await kernel.call_tool(f"rest://api.{tool}")).result  # type: ignore[attr-defined,no-any-return]


async def test_authorization_code_for_a_rest_api(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    oauth = OAuth(on_authorize=demo.sign_in)
    _register(kernel, demo, oauth)
    with identity("alice"):
        assert (await _call(kernel))["user"] == "alice"
        assert (await _call(kernel))["user"] == "alice"
    assert demo.server.events == ["register", "sign-in:alice", "token:authorization_code"]
    query = parse_qs(urlsplit(demo.visits[0]).query)
    assert query["resource"] == [demo.rest_url]
    assert query["code_challenge_method"] == ["S256"]


async def test_each_identity_has_its_own_session_and_tokens(demo: DemoOAuth) -> None:
    async with FunctionKernel() as kernel:
        oauth = OAuth(on_authorize=demo.sign_in)
        _register(kernel, demo, oauth)
        seen: dict[str, list[object]] = {"alice": [], "bob": []}

        async def calls(who: str) -> None:
            with identity(who):
                for _ in range(4):
                    seen[who].append((await _call(kernel))["user"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(calls, "alice")
            tg.start_soon(calls, "bob")
        assert seen == {"alice": ["alice"] * 4, "bob": ["bob"] * 4}
        assert sorted(e for e in demo.server.events if e.startswith("sign-in")) == ["sign-in:alice", "sign-in:bob"]
        alice = await oauth.store.load(demo.rest_url, "alice")
        bob = await oauth.store.load(demo.rest_url, "bob")
        assert alice is not None
        assert alice.tokens is not None
        assert bob is not None
        assert bob.tokens is not None
        assert alice.tokens.access_token != bob.tokens.access_token
        sessions = []
        for who in ("alice", "bob"):
            with identity(who):  # each identity's own aiohttp session: connection pool and cookie jar
                sessions.append(kernel.adapter("rest")._servers["api"].client_session)  # type: ignore[attr-defined]
        assert None not in sessions
        assert sessions[0] is not sessions[1]
        assert sessions[0].cookie_jar is not sessions[1].cookie_jar
    assert sessions[0].closed  # close() closed every identity's session
    assert sessions[1].closed


async def test_concurrent_first_calls_sign_in_once(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    _register(kernel, demo, OAuth(on_authorize=demo.sign_in))
    answers: list[object] = []

    async def call() -> None:
        answers.append(await _call(kernel))

    with identity("alice"):
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(call)
    assert [a["user"] for a in answers] == ["alice"] * 8
    assert demo.server.events.count("sign-in:alice") == 1
    assert len(demo.visits) == 1


async def test_an_expired_token_is_refreshed(demo_with: DemoFactory) -> None:
    async with demo_with(access_token_lifetime=1) as demo, FunctionKernel() as kernel:
        oauth = OAuth(on_authorize=demo.sign_in)
        _register(kernel, demo, oauth)
        with identity("alice"):
            assert (await _call(kernel))["user"] == "alice"
            await wait_until_expired(oauth.store, demo.rest_url, "alice")
            assert (await _call(kernel))["user"] == "alice"
        assert demo.server.events == [
            "register",
            "sign-in:alice",
            "token:authorization_code",
            "token:refresh_token",
        ]


async def test_client_credentials_for_a_rest_api(demo_with: DemoFactory) -> None:
    async with demo_with(clients={"etl": "etl-secret-abcdef"}) as demo, FunctionKernel() as kernel:
        oauth = OAuth(
            grant="client_credentials", client_id="etl", client_secret="etl-secret-abcdef", issuer=demo.issuer
        )
        _register(kernel, demo, oauth)
        assert (await _call(kernel))["user"] == "etl"
        assert demo.server.events == ["token:client_credentials"]


async def _echo(request: web.Request) -> web.Response:
    return web.Response(status=400, text=f"bad request with {request.headers['Authorization']}")


async def _refuse(request: web.Request) -> web.Response:
    raise web.HTTPUnauthorized(headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})


async def test_a_token_echoed_in_an_error_body_is_masked(demo_with: DemoFactory) -> None:
    async with demo_with(rest_routes=[web.get("/echo", _echo)]) as demo, FunctionKernel() as kernel:
        oauth = OAuth(on_authorize=demo.sign_in)
        _register(kernel, demo, oauth, "echo")
        with identity("alice"), pytest.raises(HTTPStatusError) as caught:
            await _call(kernel, "echo")
        record = await oauth.store.load(demo.rest_url, "alice")
        assert record is not None
        assert record.tokens is not None
        assert caught.value.status_code == 400
        assert record.tokens.access_token not in caught.value.body
        assert record.tokens.access_token not in str(caught.value)
        assert caught.value.body == "bad request with Bearer ***"


async def test_a_server_that_refuses_a_fresh_token(demo_with: DemoFactory) -> None:
    async with demo_with(rest_routes=[web.get("/refuse", _refuse)]) as demo, FunctionKernel() as kernel:
        _register(kernel, demo, OAuth(on_authorize=demo.sign_in), "refuse")
        with identity("alice"):
            assert (await _call(kernel))["user"] == "alice"
            with pytest.raises(AuthenticationError) as caught:
                await _call(kernel, "refuse")
        error = caught.value
        assert (error.server, error.identity, error.uri) == ("api", "alice", "rest://api.refuse")
        assert "REST server 'api' refused the OAuth access token of identity 'alice' (HTTP 401)" in str(error)
        assert demo.server.events.count("sign-in:alice") == 2  # a 401 means: sign in again, then it gives up


@contextlib.asynccontextmanager
async def _other_origin() -> AsyncIterator[tuple[str, list[str | None]]]:
    received: list[str | None] = []

    async def record(request: web.Request) -> web.Response:
        received.append(request.headers.get("Authorization"))
        return web.json_response({"user": "elsewhere"})

    app = web.Application()
    app.router.add_get("/landing", record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/landing", received
    finally:
        await runner.cleanup()


async def test_no_token_goes_to_another_origin_on_a_redirect(demo_with: DemoFactory) -> None:
    async with _other_origin() as (landing, received):

        async def away(request: web.Request) -> web.Response:
            raise web.HTTPFound(landing)

        async with demo_with(rest_routes=[web.get("/away", away)]) as demo, FunctionKernel() as kernel:
            _register(kernel, demo, OAuth(on_authorize=demo.sign_in), "away")
            with identity("alice"):
                assert (await _call(kernel, "away"))["user"] == "elsewhere"
    assert received == [None]
