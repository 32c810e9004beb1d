"""Kaval.AI 1.0's REST behaviour (its ``test_call_rest_tool``), against a real local HTTP server: a call per method
by ``_call_rest_tool``, output mapped into a model, Basic auth from ``username_env``/``password_env`` read at every
request (unset: no auth, and the server's 401 surfaces), a missing server, and ``url_env``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel
from tests.servers.kaval_rest_app import KAVAL_PASSWORD, KAVAL_USER, create_app
from tests.servers.uvicorn_server import serve

from kavalai import ConfigurationError, FunctionKernel, HTTPStatusError, ToolNotFoundError
from kavalai.workflow.models import RestServer


class Item(BaseModel):
    name: str
    value: int


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(create_app()) as base_url:
        yield base_url


async def test_each_method_reaches_its_path_and_maps_the_output(kernel: FunctionKernel, url: str) -> None:
    kernel.register_rest_server(RestServer(name="test_server", url=url))
    assert await kernel._call_rest_tool("test_server", "get_item", {"id": 1}) == {"name": "item", "value": 100}
    created = await kernel._call_rest_tool(
        "test_server", "create_item", {"name": "new"}, method="post", output_type=Item
    )
    assert created == Item(name="new", value=100)
    assert await kernel._call_rest_tool("test_server", "update_item", {"id": 2}, method="put") == {
        "name": "updated",
        "value": 400,
    }
    assert await kernel._call_rest_tool("test_server", "patch_item", {"id": 1}, method="PATCH") == {
        "name": "patched",
        "value": 300,
    }
    assert await kernel._call_rest_tool("test_server", "delete_item", {"id": 7}, method="delete") == {
        "status": "deleted",
        "id": 7,
    }


async def test_env_credentials_are_read_per_request_and_a_401_surfaces_when_unset(
    kernel: FunctionKernel, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAVAL_TEST_USER", KAVAL_USER)
    monkeypatch.setenv("KAVAL_TEST_PASS", KAVAL_PASSWORD)
    server = RestServer(name="auth_server", url=url, username_env="KAVAL_TEST_USER", password_env="KAVAL_TEST_PASS")
    kernel.register_rest_server(server)
    assert await kernel._call_rest_tool("auth_server", "auth_check", {}) == {"status": "authenticated"}
    monkeypatch.delenv("KAVAL_TEST_USER")
    monkeypatch.delenv("KAVAL_TEST_PASS")
    with pytest.raises(HTTPStatusError) as info:  # the same kernel and session: no auth is sent now
        await kernel._call_rest_tool("auth_server", "auth_check", {})
    assert info.value.status_code == 401
    assert "credentials missing or wrong" in info.value.body
    monkeypatch.setenv("KAVAL_TEST_USER", KAVAL_USER)
    monkeypatch.setenv("KAVAL_TEST_PASS", "a-rotated-wrong-password")
    with pytest.raises(HTTPStatusError):
        await kernel._call_rest_tool("auth_server", "auth_check", {})
    monkeypatch.setenv("KAVAL_TEST_PASS", KAVAL_PASSWORD)
    assert await kernel._call_rest_tool("auth_server", "auth_check", {}) == {"status": "authenticated"}


async def test_a_missing_server_and_a_missing_url_variable(
    kernel: FunctionKernel, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ToolNotFoundError, match="REST server 'nope' not registered"):
        await kernel._call_rest_tool("nope", "get_item", {"id": 1})
    monkeypatch.delenv("KAVAL_TEST_URL", raising=False)
    kernel.register_rest_server(RestServer(name="env_server", url_env="KAVAL_TEST_URL"))
    with pytest.raises(ConfigurationError, match="URL for REST server 'env_server' not found"):
        await kernel._call_rest_tool("env_server", "get_item", {"id": 1})
    monkeypatch.setenv("KAVAL_TEST_URL2", url)
    kernel.register_rest_server(RestServer(name="env_server2", url_env="KAVAL_TEST_URL2"))
    assert await kernel._call_rest_tool("env_server2", "get_item", {"id": 3}) == {"name": "item", "value": 300}
