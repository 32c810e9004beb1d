"""Each auth kind, given directly and by environment variable, checked by the real server."""

from __future__ import annotations

import logging
import traceback

import pytest
from tests.servers.rest_app import API_KEY, BASIC_PASSWORD, BASIC_USER, BEARER_TOKEN, create_app
from tests.servers.uvicorn_server import serve

from kavalai import ConfigurationError, FunctionKernel, HTTPStatusError, RestServer, ToolExecutionError
from kavalai.adapters.rest import ApiKeyAuth, BasicAuth, BearerAuth
from kavalai.adapters.rest._auth import Auth

CASES: list[tuple[str, Auth, Auth, dict[str, str]]] = [
    (
        "basic",
        BasicAuth(username=BASIC_USER, password=BASIC_PASSWORD),
        BasicAuth(username_env="KT_USER", password_env="KT_SECRET"),
        {"KT_USER": BASIC_USER, "KT_SECRET": BASIC_PASSWORD},
    ),
    ("bearer", BearerAuth(token=BEARER_TOKEN), BearerAuth(token_env="KT_SECRET"), {"KT_SECRET": BEARER_TOKEN}),
    (
        "header-key",
        ApiKeyAuth(key=API_KEY, name="X-API-Key"),
        ApiKeyAuth(key_env="KT_SECRET"),
        {"KT_SECRET": API_KEY},
    ),
    (
        "query-key",
        ApiKeyAuth(key=API_KEY, name="api_key", location="query"),
        ApiKeyAuth(key_env="KT_SECRET", name="api_key", location="query"),
        {"KT_SECRET": API_KEY},
    ),
]
IDS = [case[0] for case in CASES]


async def _call(kernel: FunctionKernel, url: str, endpoint: str, auth: Auth | None) -> object:
    kernel.register_rest_server(RestServer(name="api", url=url, auth=auth), replace=True)
    kernel.register_rest_tool("api", "check", "GET", path=f"/auth/{endpoint}", replace=True)
    return (await kernel.call_tool("rest://api.check")).result  # type: ignore[attr-defined]


@pytest.mark.parametrize(("endpoint", "direct", "from_env", "env"), CASES, ids=IDS)
async def test_direct_credentials_are_accepted(
    kernel: FunctionKernel, shop_url: str, endpoint: str, direct: Auth, from_env: Auth, env: dict[str, str]
) -> None:
    result = await _call(kernel, shop_url, endpoint, direct)
    assert result in ({"user": BASIC_USER}, {"auth": endpoint})


@pytest.mark.parametrize(("endpoint", "direct", "from_env", "env"), CASES, ids=IDS)
async def test_credentials_from_the_environment_are_accepted(
    kernel: FunctionKernel,
    shop_url: str,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    direct: Auth,
    from_env: Auth,
    env: dict[str, str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = await _call(kernel, shop_url, endpoint, from_env)
    assert result in ({"user": BASIC_USER}, {"auth": endpoint})


@pytest.mark.parametrize(("endpoint", "direct", "from_env", "env"), CASES, ids=IDS)
async def test_wrong_or_missing_credentials_get_401_without_leaking(
    kernel: FunctionKernel,
    shop_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    endpoint: str,
    direct: Auth,
    from_env: Auth,
    env: dict[str, str],
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("KT_USER", BASIC_USER)
    monkeypatch.setenv("KT_SECRET", "wrong-secret-value")
    for auth in (None, from_env):
        with pytest.raises(HTTPStatusError) as info:
            await _call(kernel, shop_url, endpoint, auth)
        assert info.value.status_code == 401
        assert "credentials missing or wrong" in info.value.body
        assert "wrong-secret-value" not in str(info.value)
    assert "wrong-secret-value" not in caplog.text


async def test_a_server_echoing_credentials_has_them_redacted(kernel: FunctionKernel, shop_url: str) -> None:
    with pytest.raises(HTTPStatusError) as info:
        await _call(kernel, shop_url, "echo-secret", BearerAuth(token=BEARER_TOKEN))
    assert info.value.status_code == 403
    assert info.value.body == "denied for Bearer ***"
    assert BEARER_TOKEN not in str(info.value)


LONG_TOKEN = "tok-long-" + "0123456789abcdef" * 3 + "0123456"  # 64 characters


@pytest.mark.parametrize(("pad", "fill"), [(983, "\N{GRINNING FACE}"), (930, "a")], ids=["4-byte", "ascii"])
async def test_an_error_body_cut_through_a_credential_shows_no_piece_of_it(
    kernel: FunctionKernel, shop_url: str, pad: int, fill: str
) -> None:
    """Hostile round 10, cases 7 and 8: the body is read by bytes (4,000) and shown by characters (1,000); 983
    four-byte characters and ``Bearer <token>`` put the read's end inside the token while the excerpt still shows
    its first characters: a piece the mask does not recognise showed (``Bearer tok-long-0``)."""
    kernel.register_rest_server(RestServer(name="api", url=shop_url, auth=BearerAuth(token=LONG_TOKEN)))
    schema = {"type": "object", "properties": {"pad": {"type": "integer"}, "fill": {"type": "string"}}}
    kernel.register_rest_tool("api", "check", "GET", schema, path="/auth/echo-secret-after")
    with pytest.raises(HTTPStatusError) as info:
        await kernel.call_tool("rest://api.check", {"pad": pad, "fill": fill})
    shown = f"{info.value} {info.value.body}"
    assert info.value.status_code == 500
    assert "Bearer" in shown or fill == "a"  # the 4-byte case shows up to the token; the ASCII one cuts before it
    assert not any(LONG_TOKEN[:size] in shown for size in range(4, len(LONG_TOKEN) + 1))


async def test_a_rotated_variable_is_read_at_the_next_request(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KT_SECRET", "stale-token")
    with pytest.raises(HTTPStatusError):
        await _call(kernel, shop_url, "bearer", BearerAuth(token_env="KT_SECRET"))
    monkeypatch.setenv("KT_SECRET", BEARER_TOKEN)  # the same session: no close() needed
    assert (await kernel.call_tool("rest://api.check")).result == {"auth": "bearer"}  # type: ignore[attr-defined]
    monkeypatch.setenv("KT_SECRET", "revoked-token")
    with pytest.raises(HTTPStatusError) as info:
        await kernel.call_tool("rest://api.check")
    assert info.value.status_code == 401
    assert "revoked-token" not in str(info.value)


async def test_a_variable_unset_after_registration_fails_the_call_not_silently(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KT_SECRET", BEARER_TOKEN)
    assert await _call(kernel, shop_url, "bearer", BearerAuth(token_env="KT_SECRET")) == {"auth": "bearer"}
    monkeypatch.delenv("KT_SECRET")  # read again at the next request, on the same session
    with pytest.raises(
        ConfigurationError, match="'api': environment variable KT_SECRET .bearer token. is not set"
    ) as info:
        await kernel.call_tool("rest://api.check")
    assert info.value.uri == "rest://api.check"


async def test_a_server_echoing_a_credential_read_per_request_has_it_redacted(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KT_SECRET", BEARER_TOKEN)
    with pytest.raises(HTTPStatusError) as info:
        await _call(kernel, shop_url, "echo-secret", BearerAuth(token_env="KT_SECRET"))
    assert info.value.body == "denied for Bearer ***"
    assert BEARER_TOKEN not in str(info.value)


async def test_a_credential_read_per_request_does_not_follow_a_redirect_to_another_origin(
    kernel: FunctionKernel, shop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KT_SECRET", API_KEY)
    kernel.register_rest_server(RestServer(name="api", url=shop_url, auth=ApiKeyAuth(key_env="KT_SECRET")))
    kernel.register_rest_tool("api", "go", "GET", {"properties": {"to": {"type": "string"}}}, path="/redirect")
    same = (await kernel.call_tool("rest://api.go", {"to": f"{shop_url}/echo/headers"})).result  # type: ignore[attr-defined]
    assert same["x-api-key"] == API_KEY
    with serve(create_app()) as other_url:
        away = (await kernel.call_tool("rest://api.go", {"to": f"{other_url}/echo/headers"})).result  # type: ignore[attr-defined]
    assert "x-api-key" not in away


async def test_credential_headers_do_not_follow_a_redirect_to_another_origin(
    kernel: FunctionKernel, shop_url: str
) -> None:
    server = RestServer(
        name="api",
        url=shop_url,
        headers={"X-Session-Token": "session-secret", "X-Client": "tests"},
        auth=ApiKeyAuth(key=API_KEY),
    )
    kernel.register_rest_server(server)
    kernel.register_rest_tool("api", "go", "GET", {"properties": {"to": {"type": "string"}}}, path="/redirect")
    same = (await kernel.call_tool("rest://api.go", {"to": f"{shop_url}/echo/headers"})).result  # type: ignore[attr-defined]
    assert (same["x-api-key"], same["x-session-token"], same["x-client"]) == (API_KEY, "session-secret", "tests")
    with serve(create_app()) as other_url:
        away = (await kernel.call_tool("rest://api.go", {"to": f"{other_url}/echo/headers"})).result  # type: ignore[attr-defined]
    assert "x-api-key" not in away
    assert "x-session-token" not in away
    assert away["x-client"] == "tests"


async def test_a_foreign_error_holding_a_query_key_is_not_kept_as_the_cause(
    kernel: FunctionKernel, shop_url: str
) -> None:
    # aiohttp's TooManyRedirects names the first URL, API key query parameter included.
    auth = ApiKeyAuth(key=API_KEY, name="api_key", location="query")
    kernel.register_rest_server(RestServer(name="api", url=shop_url, auth=auth))
    kernel.register_rest_tool("api", "loop", "GET")
    with pytest.raises(ToolExecutionError, match=r"rest://api\.loop: GET /loop failed: TooManyRedirects") as info:
        await kernel.call_tool("rest://api.loop")
    shown = "".join(traceback.format_exception(info.value))
    assert "api_key=***" in str(info.value)
    assert API_KEY not in shown
    assert info.value.__cause__ is None
