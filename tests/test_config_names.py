"""A tool's name is an identifier, not a secret (issue 34, 34l part 1): a REST tool's name read from a secret variable
(``rest_tools: [{name: ${TOKEN}}]``), the name an OpenAPI operation gets from its operationId or from its path, or a
Python function's configured name, was registered as a secret yet shown whole in the tool listings, URIs and errors a
model and a gateway's host read. Each is refused at load, naming the configuration field, by the one rule
servers' names already followed (``kavalai.adapters._settings.public_name``)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, RestServer
from kavalai.config import ConfigFieldError, KernelConfig, build_kernel
from kavalai.errors import ToolRegistrationError
from kavalai.secrets import MASK

SECRET = "tool-name-secret-34l-7c2e"
URL = "http://127.0.0.1:1/"  # never reached: nothing connects while a configuration loads


def _spec(paths: dict[str, Any]) -> dict[str, Any]:
    return {"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": paths}


OK = {"get": {"operationId": "ok", "responses": {"200": {"description": "ok"}}}}


@pytest.mark.parametrize(
    ("server", "field"),
    [
        ({"rest_tools": [{"name": "send${KV_BOT_TOKEN}", "path": "/send"}]}, "rest_servers[0].rest_tools[0]"),
        (
            {"openapi": _spec({"/ok": OK, "/send": {"post": {"operationId": "${KV_BOT_TOKEN}", "responses": {}}}})},
            "rest_servers[0].openapi",
        ),
    ],
    ids=["rest_tools name", "operationId"],
)
def test_a_rest_tool_named_by_a_secret_variable_is_refused_naming_the_field(server: dict[str, Any], field: str) -> None:
    section = {"rest_servers": [{"name": "api", "url": URL, **server}]}
    with pytest.raises(ConfigFieldError) as caught:
        build_kernel(KernelConfig.from_dict(section), env={"KV_BOT_TOKEN": SECRET})
    assert caught.value.field == field
    assert "holds the value of a secret variable" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_python_function_named_by_a_secret_variable_is_refused_naming_the_field() -> None:
    section = {"python_functions": [{"function": "os.path.basename", "name": "base${KV_BOT_TOKEN}"}]}
    with pytest.raises(ConfigFieldError) as caught:
        build_kernel(KernelConfig.from_dict(section), env={"KV_BOT_TOKEN": SECRET})
    assert caught.value.field == "python_functions[0]"
    assert "holds the value of a secret variable" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_secret_in_a_path_is_still_a_path_and_a_public_variable_still_a_name() -> None:
    """What is no name is not refused: a token in a REST tool's path (a bot's URL) is sent and masked; a variable
    that is no secret names a tool as it always did."""
    section = {
        "rest_servers": [
            {"name": "api", "url": URL, "rest_tools": [{"name": "send", "path": "/bot${KV_BOT_TOKEN}/send"}]},
            {"name": "shop", "url": URL, "rest_tools": [{"name": "${KV_SHOP_TOOL}", "path": "/books"}]},
        ]
    }
    kernel = build_kernel(KernelConfig.from_dict(section), env={"KV_BOT_TOKEN": SECRET, "KV_SHOP_TOOL": "books"})
    assert sorted(kernel.registry.names_of("rest", "api")) == ["rest://api.send"]
    assert sorted(kernel.registry.names_of("rest", "shop")) == ["rest://shop.books"]


def test_a_tool_name_holding_a_registered_secret_is_refused_in_python_too() -> None:
    from kavalai.secrets import register_secret

    register_secret(SECRET)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="api", url=URL))
    with pytest.raises(ToolRegistrationError) as caught:
        kernel.register_rest_tool("api", f"x{SECRET}", "GET", path="/x")
    assert MASK in str(caught.value)
    assert SECRET not in str(caught.value)
    # an operation without an operationId is named by its method and path (a configuration expands no key: Python)
    with pytest.raises(ToolRegistrationError) as caught:
        kernel.register_openapi("api", _spec({f"/bot{SECRET}/send": {"post": {"responses": {}}}}))
    assert "named by its path" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert kernel.registry.names_of("rest", "api") == []


def _named(call: ast.Call, name: str) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == name


def _builds_uri(call: ast.Call) -> bool:
    """``ToolURI.build(...)``, or ``ToolURI.parse(f"...")`` of a text put together here."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "ToolURI"):
        return False
    put_together = bool(call.args) and isinstance(call.args[0], ast.JoinedStr)
    return func.attr == "build" or (func.attr == "parse" and put_together)


def test_every_tool_uri_built_from_a_configured_name_crosses_public_name() -> None:
    """The enumeration: each function of the adapters that builds a tool URI (``ToolURI.build``, ``ToolURI.parse``
    of an f-string) checks the name with ``public_name`` first, or is listed here with why it need not."""
    source = Path(__file__).resolve().parents[1] / "src" / "kavalai"
    exempt = {
        # an MCP server's tool names are the server's words, not configuration: its name is a ServerName
        "adapters/mcp/_connection.py",
        # the gateway's catalog keys prompts by the names of servers and tools registered already
        "serve/_catalog.py",
    }
    building: list[str] = []
    for path in sorted(source.rglob("*.py")):
        where = str(path.relative_to(source))
        text = path.read_text(encoding="utf-8")
        if where.startswith("kernel/") or where in exempt or "ToolURI." not in text:
            continue  # only a module naming ToolURI can build one
        for function in ast.walk(ast.parse(text)):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
            if any(_builds_uri(call) for call in calls) and not any(_named(call, "public_name") for call in calls):
                building.append(f"{where}:{function.name}")
    assert building == []
