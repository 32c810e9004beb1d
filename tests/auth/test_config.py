"""The OAuth setting, the identity context, and OAuth on McpServer and RestServer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pydantic
import pytest

from kavalai import McpServer, RestServer
from kavalai.auth import DEFAULT_IDENTITY, FileTokenStore, MemoryTokenStore, OAuth, current_identity, identity
from kavalai.config import KernelConfig, build_kernel


def test_identity_blocks_nest_and_reach_tasks() -> None:
    assert current_identity() is None
    with identity("alice"):
        assert current_identity() == "alice"
        with identity("bob"):
            assert current_identity() == "bob"
        assert current_identity() == "alice"

        async def in_a_task() -> str | None:
            return current_identity()

        async def main() -> str | None:
            return await asyncio.create_task(in_a_task())

        assert asyncio.run(main()) == "alice"
    assert current_identity() is None


@pytest.mark.parametrize("bad", ["", "   ", "a\nb", "x" * 257, 42])
def test_an_identity_is_a_short_printable_name(bad: object) -> None:
    with pytest.raises(ValueError, match="identity"), identity(bad):  # type: ignore[arg-type]
        pass
    with pytest.raises(pydantic.ValidationError, match="identity"):
        OAuth(identity=bad)  # type: ignore[arg-type]


def test_defaults_and_copies_share_the_store_and_flows() -> None:
    oauth = OAuth()
    assert (oauth.grant, oauth.identity, oauth.redirect_host, oauth.redirect_port) == (
        "authorization_code",
        DEFAULT_IDENTITY,
        "127.0.0.1",
        0,
    )
    assert isinstance(oauth.store, MemoryTokenStore)
    alice = oauth.for_identity("alice")
    assert alice.identity == "alice"
    assert alice.store is oauth.store
    assert alice.listener() is oauth.listener()
    assert oauth.for_identity(DEFAULT_IDENTITY) is oauth
    assert OAuth().store is not oauth.store  # each setting has a store of its own unless given one


def test_a_path_is_a_file_store(tmp_path: Path) -> None:
    oauth = OAuth(store=str(tmp_path / "t.json"))
    assert isinstance(oauth.store, FileTokenStore)
    assert oauth.store.path == tmp_path / "t.json"
    with pytest.raises(pydantic.ValidationError, match="store must be a TokenStore"):
        OAuth(store=42)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"client_secret": "s3cret-value"}, "needs the client_id"),
        ({"client_id": "c", "client_secret": "s3cret-value"}, "needs issuer="),
        ({"client_id": "c", "client_secret": "s", "client_secret_env": "X", "issuer": "http://a"}, "not both"),
        ({"grant": "client_credentials", "client_id": "c"}, "needs client_id, client_secret"),
        ({"client_metadata_url": "http://app.example/client.json"}, "https:// URL with a path"),
        ({"client_metadata_url": "https://app.example/"}, "https:// URL with a path"),
        ({"client_id": "c", "client_metadata_url": "https://app.example/c.json"}, "not both"),
        ({"issuer": "ftp://as"}, "http(s) issuer URL"),
        ({"on_authorize": "open"}, "on_authorize must be a function"),
        ({"redirect_path": "callback"}, "redirect_path"),
    ],
)
def test_contradictory_settings_are_refused_without_showing_secrets(options: dict[str, object], problem: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=problem.replace("(", r"\(").replace(")", r"\)")) as caught:
        OAuth(**options)  # type: ignore[arg-type]
    assert "s3cret-value" not in str(caught.value)


def test_client_credentials_and_the_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    oauth = OAuth(grant="client_credentials", client_id="svc", client_secret_env="KT_OAUTH_SECRET", issuer="http://a")
    monkeypatch.setenv("KT_OAUTH_SECRET", "from-the-env-123")
    assert oauth.client_secret_value() == "from-the-env-123"
    monkeypatch.delenv("KT_OAUTH_SECRET")
    with pytest.raises(Exception, match="KT_OAUTH_SECRET") as caught:
        oauth.client_secret_value()
    assert type(caught.value).__name__ == "ConfigurationError"


def test_the_repr_shows_no_secret() -> None:
    oauth = OAuth(client_id="app", client_secret="very-secret-999", issuer="http://as.example")
    assert "very-secret-999" not in repr(oauth)
    assert "very-secret-999" not in repr(McpServer(name="m", url="http://x/mcp", auth=oauth))
    assert "very-secret-999" not in repr(RestServer(name="r", url="http://x/api", auth=oauth))


def test_oauth_on_an_mcp_server_needs_a_url_and_no_authorization_header() -> None:
    assert McpServer(name="m", url="http://x/mcp", auth=OAuth()).auth is not None
    with pytest.raises(ValueError, match="applies only to a url"):
        McpServer(name="m", command="srv", auth=OAuth())
    with pytest.raises(ValueError, match="both auth and an Authorization header"):
        McpServer(name="m", url="http://x/mcp", headers={"authorization": "Bearer x"}, auth=OAuth())


def test_oauth_on_a_rest_server_loads_from_data() -> None:
    server = RestServer.model_validate(
        {"name": "r", "url": "http://x/api", "auth": {"type": "oauth", "grant": "authorization_code"}}
    )
    assert isinstance(server.auth, OAuth)
    assert server.resolve().headers == {}  # no fixed credentials: tokens go per request and identity
    with pytest.raises(ValueError, match="or an Authorization header, not both"):
        RestServer(name="r", url="http://x/api", headers={"Authorization": "Bearer x"}, auth=OAuth())


def test_oauth_in_a_configuration_file(tmp_path: Path) -> None:
    (tmp_path / "kernel.yaml").write_text(
        f"""
mcp_servers:
  - name: files
    url: http://127.0.0.1:9/mcp
    auth: {{type: oauth, store: {tmp_path}/tokens.json, identity: ops}}
rest_servers:
  - name: api
    url: http://127.0.0.1:9/api
    auth: {{type: oauth, grant: client_credentials, client_id: etl, client_secret_env: ETL_SECRET, issuer: "http://as/"}}
"""
    )
    kernel = build_kernel(KernelConfig.from_file(tmp_path / "kernel.yaml"))
    files = kernel.adapter("mcp").connection("files").config.auth  # type: ignore[attr-defined]
    assert isinstance(files, OAuth)
    assert isinstance(files.store, FileTokenStore)
    assert (files.store.path, files.identity) == (tmp_path / "tokens.json", "ops")
    api = kernel.adapter("rest").server("api").auth  # type: ignore[attr-defined]
    assert isinstance(api, OAuth)
    assert (api.grant, api.client_id, api.client_secret_env) == ("client_credentials", "etl", "ETL_SECRET")
