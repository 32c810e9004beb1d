"""RestServer, auth settings and registration rules (no requests sent)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kavalai import ConfigurationError, FunctionKernel, RestServer, ToolNotFoundError, ToolRegistrationError
from kavalai.adapters.rest import ApiKeyAuth, BasicAuth, BearerAuth

ITEM_SCHEMA = {"type": "object", "properties": {"item_id": {"type": "integer"}}, "required": ["item_id"]}


def test_a_server_needs_exactly_one_of_url_and_url_env() -> None:
    with pytest.raises(ValidationError, match="REST server 's': Either 'url' or 'url_env' must be specified"):
        RestServer(name="s")
    with pytest.raises(ValidationError, match="REST server 's': Only one of 'url' or 'url_env' can be specified"):
        RestServer(name="s", url="http://h", url_env="URL")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://h", "http:// or https://"),
        ("localhost:8000", "http:// or https://"),
        ("http://user:pw@h", "must not hold credentials"),
        ("http://h/?key=1", "must not have a query"),
    ],
)
def test_bad_base_urls_are_refused(url: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem) as info:
        RestServer(name="s", url=url)
    assert "pw" not in str(info.value).replace("password", "")


def test_server_names_follow_the_uri_rules() -> None:
    with pytest.raises(ValidationError, match="name"):
        RestServer(name="has.dot", url="http://h")


def test_invalid_settings_are_configuration_errors_that_hide_the_values() -> None:
    with pytest.raises(ValidationError, match=r"\n  Invalid REST server configuration 's': timeout: .*greater than 0"):
        RestServer(name="s", url="http://h", timeout=-1)
    with pytest.raises(ConfigurationError, match=r"^Invalid ApiKeyAuth: location: Input should be 'header' or 'query'"):
        ApiKeyAuth(key="hidden-key-1", location="cookie")  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as failed:
        RestServer.model_validate({"name": "s", "url": "http://h", "auth": {"type": "nope", "token": "hidden-2"}})
    assert "Invalid REST server configuration 's': auth: Input tag 'nope'" in str(failed.value)
    assert "hidden" not in str(failed.value) + repr(failed.value.errors())
    with pytest.raises(ValidationError, match=r"\n  REST server configuration 's': Invalid BearerAuth: give exactly"):
        RestServer.model_validate({"name": "s", "url": "http://h", "auth": {"type": "bearer"}})
    assert failed.value.__cause__ is None  # pydantic's first error, which may show inputs, is not kept


def test_reprs_hide_secrets_and_header_values() -> None:
    server = RestServer(
        name="s",
        url="http://h",
        headers={"X-Custom-Token": "header-secret-1"},
        auth=BasicAuth(username="u", password="basic-secret-2"),
    )
    shown = repr(server) + str(server) + repr(server.auth) + repr(server.resolve())
    assert "X-Custom-Token" in shown
    assert "header-secret-1" not in shown
    assert "basic-secret-2" not in shown
    assert "token-3" not in repr(BearerAuth(token="token-3"))
    assert "key-4" not in repr(ApiKeyAuth(key="key-4"))


def test_auth_loads_from_plain_dicts_by_type() -> None:
    server = RestServer.model_validate(
        {"name": "s", "url": "http://h", "auth": {"type": "api_key", "key_env": "K", "location": "query"}}
    )
    assert isinstance(server.auth, ApiKeyAuth)
    assert server.auth.location == "query"


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        (lambda: BearerAuth(), "exactly one of token or token_env"),
        (lambda: BearerAuth(token="t", token_env="T"), "exactly one of token or token_env"),
        (lambda: BasicAuth(username="u"), "exactly one of password or password_env"),
        (lambda: ApiKeyAuth(key_env="K", location="cookie"), "location"),
    ],
)
def test_incomplete_auth_is_refused(factory: object, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        factory()  # type: ignore[operator]


def test_resolved_credentials_for_each_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_USER", "bob")
    monkeypatch.setenv("T_PASS", "pw")
    basic = RestServer(name="s", url="http://h", auth=BasicAuth(username_env="T_USER", password_env="T_PASS")).resolve()
    assert basic.headers["Authorization"] == "Basic Ym9iOnB3"  # base64("bob:pw")
    query = RestServer(name="s", url="http://h", auth=ApiKeyAuth(key="k1", name="token", location="query"))
    assert query.resolve().query == (("token", "k1"),)
    header = RestServer(name="s", url="http://h/api/", auth=ApiKeyAuth(key="k2")).resolve()
    assert header.headers == {"X-API-Key": "k2"}
    assert header.base_url == "http://h/api"
    assert header.redact("got k2 here") == "got *** here"


async def test_registration_records_configuration_and_a_missing_variable_fails_the_first_call(
    kernel: FunctionKernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAVALAI_TEST_MISSING_TOKEN", raising=False)
    server = RestServer(name="s", url="http://h", auth=BearerAuth(token_env="KAVALAI_TEST_MISSING_TOKEN"))
    kernel.register_rest_server(server)  # registration only records the configuration (read at first use)
    kernel.register_rest_tool("s", "t", "GET")
    with pytest.raises(ConfigurationError, match=r"'s': environment variable KAVALAI_TEST_MISSING_TOKEN") as info:
        await kernel.call_tool("rest://s.t")
    assert info.value.uri == "rest://s.t"


def test_an_empty_credential_variable_is_missing_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAVALAI_TEST_EMPTY_KEY", "")
    server = RestServer(name="s", url="http://h", auth=ApiKeyAuth(key_env="KAVALAI_TEST_EMPTY_KEY"))
    with pytest.raises(ConfigurationError, match="API key"):
        server.resolve()


def test_the_base_url_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAVALAI_TEST_URL", "http://127.0.0.1:9/base/")
    assert RestServer(name="s", url_env="KAVALAI_TEST_URL").resolve().base_url == "http://127.0.0.1:9/base"
    monkeypatch.setenv("KAVALAI_TEST_URL", "not a url")
    with pytest.raises(ConfigurationError, match="KAVALAI_TEST_URL: the base URL must be"):
        RestServer(name="s", url_env="KAVALAI_TEST_URL").resolve()


def test_servers_register_once_unless_replaced(kernel: FunctionKernel) -> None:
    kernel.register_rest_server(RestServer(name="s", url="http://h"))
    with pytest.raises(ToolRegistrationError, match="'s' is already registered.*replace=True"):
        kernel.register_rest_server(RestServer(name="s", url="http://other"))
    kernel.register_rest_server(RestServer(name="s", url="http://other"), replace=True)
    assert kernel._rest().server("s").url == "http://other"


def test_a_replaced_servers_tools_follow_it_where_their_effect_goes_and_its_doubt_policy(
    kernel: FunctionKernel,
) -> None:
    """A durable step judges a resume by the origin and doubt policy in its tool's metadata: a server replaced in
    the same process must not leave its tools naming the old ones."""
    kernel.register_rest_server(RestServer(name="s", url="http://old-shop:8000", on_doubt="fail"))
    kernel.register_rest_tool("s", "charge", "POST", path="/charge")
    kernel.register_rest_tool("s", "refund", "POST", path="/refund", timeout=7)
    kernel.register_rest_server(
        RestServer(name="s", url="http://new-shop:9000", timeout=3, tools_on_doubt={"charge": "ask"}), replace=True
    )
    charge = kernel.get_tool_definition("rest://s.charge")
    refund = kernel.get_tool_definition("rest://s.refund")
    assert charge.metadata["origin"] == refund.metadata["origin"] == "http://new-shop:9000"
    assert charge.metadata["on_doubt"] == "ask"
    assert "on_doubt" not in refund.metadata  # the new server gives it no policy: the old one's is gone
    assert (charge.timeout, refund.timeout) == (3, 7)  # a tool's own timeout stays its own


def test_register_rest_server_takes_a_rest_server(kernel: FunctionKernel) -> None:
    with pytest.raises(ToolRegistrationError, match="takes a RestServer, not dict"):
        kernel.register_rest_server({"name": "s", "url": "http://h"})  # type: ignore[arg-type]


def test_a_tool_needs_a_registered_server(kernel: FunctionKernel) -> None:
    with pytest.raises(ConfigurationError, match=r"No REST server named 'nope'.*register_rest_server"):
        kernel.register_rest_tool("nope", "t", "GET")


def test_tool_registration_rules(kernel: FunctionKernel) -> None:
    kernel.register_rest_server(RestServer(name="s", url="http://h"))
    uri = kernel.register_rest_tool("s", "get_item", "get", ITEM_SCHEMA, None, "Get one item.", path="items/{item_id}")
    assert uri == "rest://s.get_item"
    definition = kernel.get_tool_definition(uri)
    assert definition.description == "Get one item."
    assert definition.metadata == {
        "server": "s",
        "method": "GET",
        "qualifier": "GET",
        "path": "/items/{item_id}",
        "origin": "http://h:80",  # where its effect goes, as a durable step's sent mark records it
        "own_timeout": False,
    }
    assert definition.timeout == 30.0
    assert definition.get_input_schema() == ITEM_SCHEMA
    with pytest.raises(ToolRegistrationError, match=r"already registered at rest://s\.get_item"):
        kernel.register_rest_tool("s", "get_item", "GET", ITEM_SCHEMA)
    kernel.register_rest_tool("s", "get_item", "GET", ITEM_SCHEMA, timeout=2, replace=True)
    assert kernel.get_tool_definition(uri).timeout == 2
    assert kernel.get_tool_definition(uri).description == "GET /get_item on REST server 's'."


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        (("s", "t", "FETCH"), {}, "unknown HTTP method 'FETCH'"),
        (("s", "bad name", "GET"), {}, "may not contain spaces"),
        (("s", "t", "GET", {"type": "object", "properties": {}}), {"path": "/x/{id}"}, "placeholders 'id'"),
        (("s", "t", "GET"), {"timeout": 0}, "timeout must be positive"),
        (
            ("s", "t", "GET", '{"type": "object"}'),
            {},
            r"input_schema must be a JSON schema object \(a dict\) or None, not str",
        ),
        (("s", "t", "GET", None, ["string"]), {}, r"rest://s\.t: output_schema must be a JSON schema object"),
    ],
)
def test_bad_tool_registrations_say_what_is_wrong(
    kernel: FunctionKernel, args: tuple[object, ...], kwargs: dict[str, object], problem: str
) -> None:
    kernel.register_rest_server(RestServer(name="s", url="http://h"))
    with pytest.raises(ToolRegistrationError, match=problem):
        kernel.register_rest_tool(*args, **kwargs)  # type: ignore[arg-type]


def test_not_found_hints_name_the_server_or_its_tools(kernel: FunctionKernel) -> None:
    kernel.register_rest_server(RestServer(name="s", url="http://h"))
    with pytest.raises(ToolNotFoundError, match="REST server 's' has no tools yet"):
        kernel.get_tool_definition("rest://s.x")
    kernel.register_rest_tool("s", "list", "GET")
    with pytest.raises(ToolNotFoundError, match=r"REST server 's' has: list\. Did you mean 'rest://s\.list'"):
        kernel.get_tool_definition("rest://s.lst")
    with pytest.raises(ToolNotFoundError, match="No REST server named 'other'"):
        kernel.get_tool_definition("rest://other.x")


def test_importing_kavalai_does_not_import_aiohttp() -> None:
    code = "import sys, kavalai; kavalai.RestServer; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_an_unreadable_ca_bundle_fails_registration(kernel: FunctionKernel, tmp_path: Path) -> None:
    missing = tmp_path / "missing-ca.pem"
    with pytest.raises(ConfigurationError, match=r"REST server 's': cannot load the CA bundle .*missing-ca\.pem"):
        kernel.register_rest_server(RestServer(name="s", url="https://h", verify=str(missing)))
