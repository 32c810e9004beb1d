"""The outbound gate against hostile servers on 127.0.0.1: OAuth metadata that names a metadata address, an
IPv4-mapped one, or another loopback host as its authorization server, token or registration endpoint is refused
before any connect, naming the server and the field; a client secret is never sent there; a REST redirect to a
metadata address is refused. Plus the gate's own rules (configured hosts trusted, learned ones judged)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver
from yarl import URL

from kavalai import FunctionKernel, McpServer, RestServer, ServerConnectionError
from kavalai.auth import OAuth
from kavalai.errors import OutboundRefusedError
from kavalai.http import Outbound, aiohttp_session, httpx_client, parse_networks

METADATA = "http://169.254.169.254"
MAPPED = "http://[::ffff:169.254.169.254]"
SECRET = "hostile-client-secret-98765"


class Hostile:
    """A protected resource whose OAuth metadata is whatever the test says; it records every request it gets."""

    def __init__(self, metadata: Callable[[str], dict[str, Any]], resource: Callable[[str], list[str]]) -> None:
        self.metadata = metadata
        self.resource = resource
        self.seen: list[str] = []
        self.base = ""
        self.path = "/mcp"  # the protected resource: the MCP endpoint, or a REST API's base URL ("")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/mcp", self._protected)
        app.router.add_route("*", "/api/{tail:.*}", self._protected)
        app.router.add_get("/.well-known/oauth-protected-resource{tail:.*}", self._prm)
        app.router.add_get("/.well-known/oauth-authorization-server{tail:.*}", self._asm)
        app.router.add_get("/.well-known/openid-configuration{tail:.*}", self._asm)
        app.router.add_route("*", "/{tail:.*}", self._other)
        return app

    async def _protected(self, request: web.Request) -> web.Response:
        self.seen.append(f"{request.method} {request.path}")
        challenge = f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource"'
        return web.Response(status=401, headers={"WWW-Authenticate": challenge})

    async def _prm(self, request: web.Request) -> web.Response:
        self.seen.append(f"GET {request.path}")
        return web.json_response(
            {"resource": f"{self.base}{self.path}", "authorization_servers": self.resource(self.base)}
        )

    async def _asm(self, request: web.Request) -> web.Response:
        self.seen.append(f"GET {request.path}")
        return web.json_response(self.metadata(self.base))

    async def _other(self, request: web.Request) -> web.Response:
        self.seen.append(f"{request.method} {request.path} {await request.text()}")
        return web.Response(status=404)


@asynccontextmanager
async def serving(app: web.Application, host: str = "127.0.0.1") -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


def _as_metadata(base: str, **urls: str) -> dict[str, Any]:
    return {
        "issuer": base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "registration_endpoint": f"{base}/register",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        **urls,
    }


async def _connect_error(hostile: Hostile, oauth: Callable[[str], OAuth], *, rest: bool = False) -> BaseException:
    async with serving(hostile.app()) as base:
        hostile.base = base
        async with FunctionKernel() as kernel:
            if rest:
                hostile.path = ""
                kernel.register_rest_server(RestServer(name="api", url=base, auth=oauth(base)))
                kernel.register_rest_tool("api", "ping", "GET", path="/api/ping")
                uri = "rest://api.ping"
            else:
                kernel.register_mcp_server(McpServer(name="m", url=f"{base}/mcp", auth=oauth(base), connect_timeout=10))
                uri = "mcp://m.anything"
            with pytest.raises(ServerConnectionError) as caught:
                await kernel.call_tool(uri)
    return caught.value


async def _never_signs_in(url: str, identity: str) -> None:
    raise AssertionError(f"the user was sent to {url}")


@pytest.mark.parametrize("address", [METADATA, MAPPED])
@pytest.mark.parametrize("rest", [False, True], ids=["mcp", "rest"])
async def test_an_authorization_server_at_a_metadata_address_is_refused(address: str, rest: bool) -> None:
    hostile = Hostile(lambda base: _as_metadata(base), lambda base: [f"{address}/"])
    error = await _connect_error(hostile, lambda base: OAuth(on_authorize=_never_signs_in), rest=rest)
    assert isinstance(error, OutboundRefusedError)
    assert error.server == ("api" if rest else "m")
    assert error.field.startswith("authorization_servers[0] of the metadata at http://127.0.0.1:")
    assert "metadata address" in str(error)
    assert f"{'REST' if rest else 'MCP'} server '{error.server}'" in str(error)


@pytest.mark.parametrize("rest", [False, True], ids=["mcp", "rest"])
async def test_a_client_secret_never_goes_to_a_token_endpoint_at_a_metadata_address(rest: bool) -> None:
    hostile = Hostile(lambda base: _as_metadata(base, token_endpoint=f"{METADATA}/token"), lambda base: [base])

    def oauth(base: str) -> OAuth:
        return OAuth(grant="client_credentials", client_id="bot", client_secret=SECRET, issuer=base)

    error = await _connect_error(hostile, oauth, rest=rest)
    assert isinstance(error, OutboundRefusedError)
    assert error.field.startswith("token_endpoint of the metadata at http://127.0.0.1:")
    assert "169.254.169.254" in str(error)
    assert SECRET not in str(error)
    assert not any(SECRET in line for line in hostile.seen)


async def test_a_registration_endpoint_at_a_mapped_metadata_address_is_refused() -> None:
    hostile = Hostile(lambda base: _as_metadata(base, registration_endpoint=f"{MAPPED}/register"), lambda b: [b])
    error = await _connect_error(hostile, lambda base: OAuth(on_authorize=_never_signs_in))
    assert isinstance(error, OutboundRefusedError)
    assert error.field.startswith("registration_endpoint of the metadata")
    assert "IPv4-mapped" in str(error)


def _loopback_two_available() -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.2", 0))
        except OSError:
            return False
    return True


async def test_another_loopback_host_is_reached_only_when_allowed() -> None:
    if not _loopback_two_available():  # pragma: no cover - Linux routes all of 127/8 to lo
        pytest.fail("127.0.0.2 is not bindable on this machine")
    reached: list[str] = []

    async def record(request: web.Request) -> web.Response:
        reached.append(request.path)
        return web.json_response({}, status=404)

    other_app = web.Application()
    other_app.router.add_route("*", "/{tail:.*}", record)
    async with serving(other_app, "127.0.0.2") as other:
        hostile = Hostile(lambda base: _as_metadata(base), lambda base: [f"{other}/"])
        error = await _connect_error(hostile, lambda base: OAuth(on_authorize=_never_signs_in))
        assert "a loopback address" in str(error)
        assert reached == []  # refused before any connect
        allowed = OAuth(on_authorize=_never_signs_in, allowed_networks=("127.0.0.2/32",))
        await _connect_error(hostile, lambda base: allowed)
        assert reached != []  # the user allowed it: discovery went there


async def test_a_rest_redirect_to_a_metadata_address_is_refused() -> None:
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{METADATA}/latest/meta-data/")

    app = web.Application()
    app.router.add_get("/go", redirect)
    async with serving(app) as base, FunctionKernel() as kernel:
        kernel.register_rest_server(RestServer(name="api", url=base))
        kernel.register_rest_tool("api", "go", "GET")
        with pytest.raises(OutboundRefusedError, match="metadata address") as caught:
            await kernel.call_tool("rest://api.go")
        assert caught.value.server == "api"


def test_configured_hosts_are_trusted_and_learned_ones_judged() -> None:
    gate = Outbound("s", ["http://127.0.0.1:8000/mcp", None], kind="MCP server")
    gate.check(URL("http://127.0.0.1:9/anything"))  # the host the user configured, any port
    gate.learn("http://10.1.2.3/token", "token_endpoint of the metadata")
    with pytest.raises(OutboundRefusedError, match="token_endpoint of the metadata") as caught:
        gate.check(URL("http://10.1.2.3/token"))
    assert caught.value.field == "token_endpoint of the metadata"
    assert "MCP server 's'" in str(caught.value)
    with pytest.raises(OutboundRefusedError, match="only http and https"):
        gate.check(URL("file:///etc/passwd"))
    with pytest.raises(OutboundRefusedError, match="resolves to 169.254.169.254"):
        gate.check_addresses("evil.example", ["93.184.216.34", "169.254.169.254"])
    gate.check_addresses("example.com", ["93.184.216.34"])
    private = Outbound("s", [], allowed_networks=parse_networks(["10.0.0.0/8"]))
    private.check(URL("http://10.1.2.3/token"))
    with pytest.raises(OutboundRefusedError):
        private.check(URL("http://169.254.169.254/"))


class _Rebinding(AbstractResolver):
    """A DNS answer that changed since the URL was checked: the learned name now resolves to a metadata address."""

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        answer = {"hostname": host, "host": "169.254.169.254", "port": port, "family": socket.AF_INET}
        return [{**answer, "proto": 0, "flags": 0}]

    async def close(self) -> None:
        return None


async def test_a_learned_name_is_judged_again_by_the_address_it_resolves_to_at_connect() -> None:
    gate = Outbound("s", ["http://127.0.0.1:1/"], kind="MCP server", resolver=_Rebinding())
    gate.check(URL("http://rebound.example/token"))  # the name alone passes
    async with httpx_client(gate) as client:
        with pytest.raises(OutboundRefusedError, match="resolves to 169.254.169.254"):
            await client.get("http://rebound.example/token")
    session, resolver = aiohttp_session(gate)
    async with session:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await session.get("http://rebound.example/token")
    assert isinstance(caught.value.os_error, PermissionError)
    assert "resolves to 169.254.169.254" in str(caught.value.os_error)
    assert resolver is not None
    await resolver.close()
