"""OAuth for an MCP server over streamable HTTP, against a real authorization server and a protected MCP server on
127.0.0.1 (the MCP SDK's server pieces): the interactive flow driven by a test browser, refresh, client
credentials, client ID metadata documents, identities, and failures."""

from __future__ import annotations

import logging
import socket
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning

from kavalai import AuthenticationError, FunctionKernel, McpServer, ServerConnectionError, ToolExecutionError
from kavalai._listen import listening_socket
from kavalai.adapters.mcp import McpLogMessage
from kavalai.auth import FileTokenStore, MemoryTokenStore, OAuth, OAuthRecord, StoredTokens, identity
from kavalai.demo.oauth import DemoOAuth
from tests.auth.conftest import DemoFactory, all_secrets, wait_until_expired
from tests.serve.test_serve import wait_until


async def _whoami(kernel: FunctionKernel, server: str = "files") -> str:
    answer = (await kernel.call_tool(f"mcp://{server}.whoami")).model_dump()
    return answer["result"]["user"]  # type: ignore[no-any-return]


async def test_authorization_code_with_pkce_discovery_and_registration(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    oauth = OAuth(on_authorize=demo.sign_in)
    kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
    with identity("alice"):
        assert await _whoami(kernel) == "alice"
        assert await _whoami(kernel) == "alice"  # the token is kept: no second sign-in
        assert kernel.get_mcp_server_state("files").status == "connected"
    assert demo.server.events == ["register", "sign-in:alice", "token:authorization_code"]

    (url,) = demo.visits
    query = {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
    assert url.startswith(f"{demo.issuer.rstrip('/')}/authorize?")  # found by discovery, not configured
    assert query["code_challenge_method"] == "S256"  # PKCE
    assert len(query["code_challenge"]) == 43
    assert query["resource"] == demo.mcp_url  # RFC 8707: the token is for this server only
    assert query["redirect_uri"].startswith("http://127.0.0.1:")
    assert query["scope"] == "demo"
    record = await oauth.store.load(demo.mcp_url, "alice")
    assert record is not None
    assert record.tokens is not None
    assert record.authorization_server == demo.issuer
    assert record.server_metadata is not None
    assert record.client is not None
    assert record.client["redirect_uris"] == [query["redirect_uri"]]


async def test_two_identities_never_share_tokens_or_connections(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    oauth = OAuth(on_authorize=demo.sign_in)
    kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
    results: dict[str, list[str]] = {"alice": [], "bob": []}

    async def calls(who: str) -> None:
        with identity(who):
            for _ in range(5):
                results[who].append(await _whoami(kernel))

    async with anyio.create_task_group() as tg:  # interleaved, concurrently
        tg.start_soon(calls, "alice")
        tg.start_soon(calls, "bob")
    assert results == {"alice": ["alice"] * 5, "bob": ["bob"] * 5}
    assert sorted(e for e in demo.server.events if e.startswith("sign-in")) == ["sign-in:alice", "sign-in:bob"]

    alice = await oauth.store.load(demo.mcp_url, "alice")
    bob = await oauth.store.load(demo.mcp_url, "bob")
    assert alice is not None
    assert alice.tokens is not None
    assert bob is not None
    assert bob.tokens is not None
    assert alice.tokens.access_token in demo.server.tokens_of("alice")
    assert bob.tokens.access_token in demo.server.tokens_of("bob")
    assert alice.tokens.access_token != bob.tokens.access_token

    with identity("alice"):
        alice_state = kernel.get_mcp_server_state("files")
    with identity("bob"):
        bob_state = kernel.get_mcp_server_state("files")
    assert (alice_state.status, bob_state.status, alice_state.connects, bob_state.connects) == (
        "connected",
        "connected",
        1,
        1,
    )
    # Outside any identity block a call is the setting's identity's ("default"): it signs in on its own.
    assert kernel.get_mcp_server_state("files").status == "registered"
    assert await _whoami(kernel) == "default"
    await kernel.close()
    with identity("bob"):
        assert kernel.get_mcp_server_state("files").status == "closed"


async def test_tokens_survive_a_restart_in_a_file_store_and_are_refreshed(
    demo_with: DemoFactory, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.json"
    async with demo_with(access_token_lifetime=1) as demo:
        async with FunctionKernel() as kernel:
            oauth = OAuth(on_authorize=demo.sign_in, store=FileTokenStore(path))
            kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
            with identity("alice"):
                assert await _whoami(kernel) == "alice"
                first = await wait_until_expired(oauth.store, demo.mcp_url, "alice")
                assert await _whoami(kernel) == "alice"  # refreshed at the token endpoint, no new sign-in
            second = await oauth.store.load(demo.mcp_url, "alice")
            assert second is not None
            assert second.tokens is not None
            assert first.tokens is not None
            assert second.tokens.access_token != first.tokens.access_token
        assert demo.server.events.count("token:refresh_token") == 1

        # A new process: a new kernel and setting over the same file. The stored token has expired again; it is
        # refreshed at the authorization server recorded with it, and nobody signs in again.
        await wait_until_expired(FileTokenStore(path), demo.mcp_url, "alice")
        async with FunctionKernel() as kernel:
            oauth = OAuth(on_authorize=demo.sign_in, store=FileTokenStore(path))
            kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
            with identity("alice"):
                assert await _whoami(kernel) == "alice"
        assert demo.server.events.count("sign-in:alice") == 1
        assert demo.server.events.count("register") == 1  # the registration was kept too
        assert demo.server.events.count("token:refresh_token") == 2
        assert len(demo.visits) == 1


async def test_client_credentials(demo_with: DemoFactory) -> None:
    async with demo_with(clients={"report-bot": "bot-secret-123456"}) as demo, FunctionKernel() as kernel:
        oauth = OAuth(
            grant="client_credentials", client_id="report-bot", client_secret="bot-secret-123456", issuer=demo.issuer
        )
        kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
        assert await _whoami(kernel) == "report-bot"
        assert demo.server.events == ["token:client_credentials"]
        assert demo.visits == []

        # A wrong secret: the token endpoint refuses, and the call fails naming the server, not the secret.
        kernel.register_mcp_server(
            McpServer(
                name="wrong",
                url=demo.mcp_url,
                auth=OAuth(
                    grant="client_credentials",
                    client_id="report-bot",
                    client_secret="not-it-654321",
                    issuer=demo.issuer,
                ),
            )
        )
        with pytest.raises(AuthenticationError) as caught:
            await _whoami(kernel, "wrong")
        assert caught.value.server == "wrong"
        assert "MCP server 'wrong'" in str(caught.value)
        assert "not-it-654321" not in str(caught.value)
        assert "bot-secret-123456" not in str(caught.value)


async def test_client_credentials_go_to_the_named_issuer_only(demo_with: DemoFactory) -> None:
    async with demo_with(clients={"bot": "bot-secret-123456"}) as demo, FunctionKernel() as kernel:
        oauth = OAuth(
            grant="client_credentials", client_id="bot", client_secret="bot-secret-123456", issuer="http://127.0.0.1:9/"
        )
        kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
        with pytest.raises(AuthenticationError, match="issuer") as caught:
            await _whoami(kernel)
        assert "bot-secret-123456" not in str(caught.value)
        assert demo.server.events == []  # the secret never reached the server the MCP server named


async def test_a_client_id_metadata_document_instead_of_registration(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    document = "https://app.example/kavalai-client.json"
    demo.server.publish_client_document(document, redirect_uris=[f"http://127.0.0.1:{port}/callback"])
    oauth = OAuth(on_authorize=demo.sign_in, client_metadata_url=document, redirect_port=port)
    kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
    with identity("alice"):
        assert await _whoami(kernel) == "alice"
    assert "register" not in demo.server.events
    assert parse_qs(urlsplit(demo.visits[0]).query)["client_id"] == [document]


async def test_a_declined_sign_in_is_an_authentication_error(demo_with: DemoFactory) -> None:
    async with demo_with(deny=["mallory"]) as demo, FunctionKernel() as kernel:
        kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=OAuth(on_authorize=demo.sign_in)))
        with identity("mallory"), pytest.raises(AuthenticationError) as caught:
            await _whoami(kernel)
    error = caught.value
    assert isinstance(error, ServerConnectionError)
    assert (error.server, error.identity, error.uri) == ("files", "mallory", "mcp://files.whoami")
    assert "MCP server 'files'" in str(error)
    assert "identity 'mallory'" in str(error)
    assert "access_denied" in str(error)


async def test_a_wrong_token_and_no_way_to_sign_in(
    demo: DemoOAuth, kernel: FunctionKernel, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryTokenStore()
    bogus = OAuthRecord(tokens=StoredTokens(access_token="bogus-token-0123456789", refresh_token="bogus-refresh-99"))
    await store.save(demo.mcp_url, "alice", bogus)
    asked: list[str] = []

    def no_browser(url: str, who: str) -> None:
        asked.append(who)
        raise RuntimeError("there is no browser here")

    kernel.register_mcp_server(
        McpServer(name="files", url=demo.mcp_url, auth=OAuth(store=store, on_authorize=no_browser))
    )
    with caplog.at_level(logging.DEBUG), identity("alice"), pytest.raises(AuthenticationError) as caught:
        await _whoami(kernel)
    assert asked == ["alice"]  # the server refused the token, so the user was asked to sign in
    message = str(caught.value)
    assert "MCP server 'files'" in message
    assert "RuntimeError: there is no browser here" in message
    for secret in ("bogus-token-0123456789", "bogus-refresh-99"):
        assert secret not in message
        assert secret not in caplog.text


async def test_nobody_signs_in_in_time(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    shown: list[str] = []

    async def show(url: str, who: str) -> None:
        shown.append(url)  # the user never opens it

    kernel.register_mcp_server(
        McpServer(name="files", url=demo.mcp_url, auth=OAuth(on_authorize=show, login_timeout=0.2))
    )
    with pytest.raises(AuthenticationError, match=r"nobody signed in within 0\.2 s \(login_timeout"):
        await _whoami(kernel)
    assert len(shown) == 1


async def test_revoked_tokens_sign_the_user_in_again(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=OAuth(on_authorize=demo.sign_in)))
    with identity("alice"):
        assert await _whoami(kernel) == "alice"
        demo.server.revoke_all()  # the server forgot every token (and refresh token)
        assert await _whoami(kernel) == "alice"
    assert demo.server.events.count("sign-in:alice") == 2


async def test_no_credential_in_logs(demo: DemoOAuth, kernel: FunctionKernel, caplog: pytest.LogCaptureFixture) -> None:
    oauth = OAuth(on_authorize=demo.sign_in)
    kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
    with caplog.at_level(logging.DEBUG), identity("alice"):
        assert await _whoami(kernel) == "alice"
        await kernel.close()
    record = await oauth.store.load(demo.mcp_url, "alice")
    secrets = all_secrets(record)
    assert len(secrets) >= 2
    for secret in secrets:
        assert secret not in caplog.text


async def test_the_legacy_sse_transport(demo_with: DemoFactory) -> None:
    async with demo_with(sse=True) as demo, FunctionKernel() as kernel:
        assert demo.sse_url is not None
        oauth = OAuth(on_authorize=demo.sign_in)
        kernel.register_mcp_server(McpServer(name="files", url=demo.sse_url, transport="sse", auth=oauth))
        with identity("alice"):
            assert await _whoami(kernel) == "alice"
            assert kernel.get_mcp_server_state("files").transport == "sse"
        with identity("bob"):
            assert await _whoami(kernel) == "bob"
        assert [e for e in demo.server.events if e.startswith("sign-in")] == ["sign-in:alice", "sign-in:bob"]


def leak_token() -> str:
    """Fails, echoing the caller's access token (a careless server)."""
    token = get_access_token()
    raise ToolError(f"cannot use token {token.token if token else None}")


async def test_a_token_echoed_in_an_error_is_masked(demo_with: DemoFactory) -> None:
    async with demo_with(mcp_tools=[leak_token]) as demo, FunctionKernel() as kernel:
        oauth = OAuth(on_authorize=demo.sign_in)
        kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
        with identity("alice"), pytest.raises(ToolExecutionError) as caught:
            await kernel.call_tool("mcp://files.leak_token")
        record = await oauth.store.load(demo.mcp_url, "alice")
        assert record is not None
        assert record.tokens is not None
        assert record.tokens.access_token not in str(caught.value)
        assert "cannot use token ***" in str(caught.value)


async def say_hello(ctx: Context) -> str:
    """Logs a warning: what a gateway relays to its host."""
    with warnings.catch_warnings():  # logging is deprecated by the 2026-07-28 era, which still sends it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await ctx.warning("hello from the server")
    return "said"


class _Recorder:
    """A relay (kavalai serve's role) recording the log messages it is handed."""

    def __init__(self) -> None:
        self.logs: list[McpLogMessage] = []

    async def log(self, message: McpLogMessage) -> None:
        self.logs.append(message)

    async def changed(self, change: Any) -> None:
        """Not used here."""


async def test_every_identitys_connection_hands_what_its_server_sends_to_the_relay(demo_with: DemoFactory) -> None:
    async with demo_with(mcp_tools=[say_hello]) as demo, FunctionKernel() as kernel:
        kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=OAuth(on_authorize=demo.sign_in)))
        recorder = _Recorder()
        kernel.adapter("mcp").relay_to(recorder)  # type: ignore[attr-defined]
        for who in ("alice", "bob"):  # not the setting's identity ("default"): their connections are made on use
            with identity(who):
                await kernel.call_tool("mcp://files.say_hello")
        await wait_until(lambda: len(recorder.logs) == 2)
    assert [(m.server, m.data) for m in recorder.logs] == [("files", "hello from the server")] * 2


async def test_a_redirect_port_that_is_taken(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    with listening_socket("127.0.0.1", 0) as other:
        port = other.getsockname()[1]
        oauth = OAuth(on_authorize=demo.sign_in, redirect_port=port)
        kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, auth=oauth))
        with pytest.raises(AuthenticationError, match=f"cannot listen for the redirect on http://127.0.0.1:{port}/"):
            await _whoami(kernel)
    assert demo.visits == []  # nobody was sent to sign in with nowhere to come back to


async def test_without_auth_the_401_and_its_challenge_are_named_with_the_fix(
    demo_with: DemoFactory, kernel: FunctionKernel
) -> None:
    async with demo_with(sse=True) as demo:
        assert demo.sse_url is not None
        for name, url in (("files", demo.mcp_url), ("old", demo.sse_url)):  # streamable HTTP, then SSE found by url=
            kernel.register_mcp_server(McpServer(name=name, url=url))
            with pytest.raises(ServerConnectionError) as caught:
                await kernel.call_tool(f"mcp://{name}.whoami")
            message = str(caught.value)
            assert f"MCP server {name!r}" in message
            assert "HTTP 401 Unauthorized (WWW-Authenticate: Bearer" in message
            assert "/.well-known/oauth-protected-resource" in message.split("its resource metadata: ")[1]
            assert "give the McpServer auth=OAuth(...) (from kavalai.auth) to sign in" in message
            assert "Server returned an error response" not in message


async def test_a_refused_authorization_header_is_named(demo: DemoOAuth, kernel: FunctionKernel) -> None:
    kernel.register_mcp_server(McpServer(name="files", url=demo.mcp_url, headers={"Authorization": "Bearer nope-1234"}))
    with pytest.raises(
        ServerConnectionError, match=r"HTTP 401 Unauthorized .*the Authorization header given was refused"
    ):
        await kernel.call_tool("mcp://files.whoami")
