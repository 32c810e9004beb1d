"""McpServer configuration: the two kinds, clear errors, secrets kept out of reprs; registration."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kavalai import FunctionKernel, McpServer, ToolNotFoundError, ToolRegistrationError


def test_stdio_and_http_kinds() -> None:
    stdio = McpServer(name="files", command="uvx", args=["mcp-server-files", "/data"])
    http = McpServer(name="search", url="https://search.example/mcp")
    sse = McpServer(name="old", url="https://old.example/sse", transport="sse")
    assert (stdio.kind, http.kind, sse.kind) == ("stdio", "streamable-http", "sse")
    assert stdio.target == "uvx mcp-server-files /data"
    assert http.target == "https://search.example/mcp"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "neither a command nor a url"),
        ({"command": "x", "url": "http://h/mcp"}, "both a command and a url"),
        ({"command": "x", "transport": "sse"}, "its transport is 'stdio'"),
        ({"url": "http://h/mcp", "transport": "stdio"}, "not 'stdio'"),
        ({"url": "ftp://h/mcp"}, "http:// or https://"),
        ({"url": "http://h/mcp", "args": ["-v"]}, "apply only to a command"),
        ({"command": "x", "headers": {"A": "b"}}, "headers apply only to a url"),
        ({"command": " "}, "empty command"),
        ({"command": "x", "timeout": 0}, "timeout: Input should be greater than 0"),
        ({"command": "x", "crash_limit": 0}, "crash_limit: Input should be greater than 0"),
        ({"command": "x", "crash_window": -1}, "crash_window: Input should be greater than 0"),
        ({"command": "x", "bogus": 1}, "bogus: not a setting of this server (misspelt?)"),
    ],
)
def test_invalid_configuration_is_a_clear_error(options: dict[str, Any], message: str) -> None:
    # pydantic's ValidationError, as for any model and as Kaval.AI 1.0 raised; one message of ours inside.
    with pytest.raises(ValidationError, match="'broken'") as info:
        McpServer(name="broken", **options)
    assert message in str(info.value)
    assert [e["type"] for e in info.value.errors()] == ["kavalai_configuration"]
    assert isinstance(info.value, ValueError)  # `except ValueError` catches it and ConfigurationError alike


@pytest.mark.parametrize(
    ("options", "upstream"),
    [
        ({"command": "x", "url": "http://h/mcp"}, "Cannot specify both stdio (command/command_env) and HTTP"),
        ({}, "Either stdio (command/command_env) or HTTP (url/url_env) must be specified"),
        ({"command": "x", "command_env": "X"}, "Only one of 'command' or 'command_env' can be specified for stdio"),
        ({"url": "http://h", "url_env": "X"}, "Only one of 'url' or 'url_env' can be specified for HTTP"),
    ],
)
def test_messages_start_with_kaval_wording(options: dict[str, Any], upstream: str) -> None:
    with pytest.raises(ValidationError) as info:
        McpServer(name="m", **options)
    assert f"MCP server 'm': {upstream}" in str(info.value)


def test_values_never_appear_in_the_error() -> None:
    with pytest.raises(ValidationError) as info:
        McpServer(name="m", command="x", headers={"Authorization": "Bearer sekrit-42"}, env={"K": "sekrit-43"})
    assert "sekrit" not in str(info.value)
    assert "sekrit" not in repr(info.value.errors())


def test_bad_name_is_a_configuration_error() -> None:
    with pytest.raises(ValidationError, match="name: String should match pattern"):
        McpServer(name="has.dot", command="x")


def test_secrets_never_appear_in_repr() -> None:
    stdio = McpServer(name="a", command="x", env={"API_TOKEN": "tok-123456"})
    http = McpServer(
        name="b", url="https://user:pw-999@h.example/mcp?key=k-777", headers={"Authorization": "Bearer zz-1"}
    )
    text = repr(stdio) + str(stdio) + repr(http) + str(http) + http.target
    for secret in ("tok-123456", "pw-999", "k-777", "zz-1"):
        assert secret not in text
    assert "API_TOKEN" in repr(stdio)
    assert "Authorization" in repr(http)
    assert "https://h.example/mcp" in repr(http)


def test_register_records_only_and_rejects_duplicates() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(McpServer(name="x", command="does-not-exist-kavalai"))
    assert kernel.list_tools("mcp://*") == []
    state = kernel.get_mcp_server_state("x")
    assert (state.status, state.transport, state.tools, state.connects) == ("registered", "stdio", (), 0)
    with pytest.raises(ToolRegistrationError, match="already registered"):
        kernel.register_mcp_server(McpServer(name="x", url="http://127.0.0.1:1/mcp"))
    with pytest.raises(ToolRegistrationError, match="takes an McpServer"):
        kernel.register_mcp_server({"name": "y", "command": "z"})  # type: ignore[arg-type]
    with pytest.raises(ToolNotFoundError, match="No MCP server named 'nope'"):
        kernel.get_mcp_server_state("nope")
    assert [s.name for s in kernel.mcp_server_states()] == ["x"]


async def test_command_env_and_url_env_are_read_at_connect(
    kernel: FunctionKernel, monkeypatch: pytest.MonkeyPatch, http_url: str
) -> None:
    import sys

    monkeypatch.delenv("KT_MCP_CMD", raising=False)
    monkeypatch.setenv("KT_MCP_URL", http_url)
    kernel.register_mcp_server(McpServer(name="later", command_env="KT_MCP_CMD", args=["-c", "pass"]))
    kernel.register_mcp_server(McpServer(name="web", url_env="KT_MCP_URL"))
    assert kernel.get_mcp_server_state("later").status == "registered"  # registration reads nothing
    with pytest.raises(Exception, match="Command for MCP server 'later' not found: environment variable KT_MCP_CMD"):
        await kernel.call_tool("mcp://later.anything")
    assert (await kernel.call_tool("mcp://web.add", {"a": 1, "b": 2})).model_dump() == {"result": 3}
    with pytest.raises(ValidationError, match="Only one of 'command' or 'command_env'"):
        McpServer(name="x", command=sys.executable, command_env="KT_MCP_CMD")


def test_fastmcp_names_of_the_handlers_are_accepted() -> None:
    async def model(request: object) -> str:
        return "ok"

    server = McpServer(name="s", command="x", sampling_handler=model, elicitation_handler="caller")
    assert (server.sampling, server.elicitation) == (model, "caller")
    with pytest.raises(ValidationError, match="sampling_handlr: not a setting of this server"):
        McpServer(name="s", command="x", sampling_handlr=model)
