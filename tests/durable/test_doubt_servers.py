"""A server's doubt policy without ``@pythontool``: ``RestServer``/``McpServer`` ``on_doubt`` and ``tools_on_doubt``
(in Python and in a configuration file). The journal is held locked right after the shop made charge B, so B's result
is not recorded; the resume applies the policy, and MCP tool annotations (``idempotentHint``) still let a step be
replayed. Counted at a local shop that ignores idempotency keys (each request an effect), behind a real REST server
and a real MCP server process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, McpServer, RestServer
from kavalai.config import ConfigFieldError, KernelConfig, build_kernel
from kavalai.durable import DbosRunner, retry_allowed
from kavalai.durable.dbos import DbosClient
from kavalai.errors import ConfigurationError, RunInterruptedError, ServerConnectionError
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import ROOT, fetch
from tests.durable.test_journal_io import Locker, orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(240)

CHARGE_SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}}


def rest_kernel(shop: str, **policy: Any) -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url=shop, **policy))
    kernel.register_rest_tool("shop", "charge", "POST", CHARGE_SCHEMA, path="/charge")
    return kernel


def openapi_spec(**marks: Any) -> dict[str, Any]:
    """An OpenAPI document of the shop's ``POST /charge`` (operation ``charge``), with ``marks`` on the operation;
    ``parameters`` among them document its headers."""
    body = {"required": True, "content": {"application/json": {"schema": CHARGE_SCHEMA}}}
    operation = {"operationId": "charge", "requestBody": body, "responses": {"200": {"description": "charged"}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "shop", "version": "1"},
        "paths": {"/charge": {"post": {**operation, **marks}}},
    }


def openapi_kernel(shop: str, *, marks: dict[str, Any], **policy: Any) -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url=shop, **policy))
    kernel.register_openapi("shop", openapi_spec(**marks))
    return kernel


KEY_HEADER = {"parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}]}


def mcp_kernel(shop: str, **policy: Any) -> FunctionKernel:
    kernel = FunctionKernel()
    command = [sys.executable, "-m", "tests.servers.mcp_shop"]
    server = McpServer(name="pay", command=command[0], args=command[1:], cwd=str(ROOT), env={"SHOP_URL": shop})
    kernel.register_mcp_server(server.model_copy(update=policy))
    return kernel


def engine(kernel: FunctionKernel, runner: DbosRunner, tool: str) -> WorkflowEngine:
    """Three charges (A, B, C) through ``tool``."""
    builder = WorkflowBuilder("charges", input=dict, output=dict).start(next="a")
    for node, after in (("a", "b"), ("b", "c"), ("c", "done")):
        inputs = {"order": {"expr": f"'{node.upper()}'"}, "amount": {"expr": "1"}}
        if tool.startswith("mcp://"):
            inputs.pop("amount")
        builder = builder.function(node, tool=tool, inputs=inputs, next=after)
    workflow = builder.end("done", outputs={"n": {"expr": "[a.result.charge, b.result.charge, c.result.charge]"}})
    return WorkflowEngine(workflow.build(), kernel, durable=runner)


CASES = {
    # name: (kernel, its policy, tool, B sent again on resume)
    "rest, server says fail": (rest_kernel, {"on_doubt": "fail"}, "rest://shop.charge", False),
    "rest, tool says replay": (
        rest_kernel,
        {"on_doubt": "fail", "tools_on_doubt": {"charge": "replay"}},
        "rest://shop.charge",
        True,
    ),
    # The operation's own word (the server's policy says it does not honour keys in general).
    "openapi, x-idempotent": (
        openapi_kernel,
        {"on_doubt": "fail", "marks": {"x-idempotent": True}},
        "rest://shop.charge",
        True,
    ),
    "openapi, Idempotency-Key header": (
        openapi_kernel,
        {"on_doubt": "fail", "marks": KEY_HEADER},
        "rest://shop.charge",
        True,
    ),
    "openapi, no mark": (openapi_kernel, {"on_doubt": "fail", "marks": {}}, "rest://shop.charge", False),
    "mcp, server says fail": (mcp_kernel, {"on_doubt": "fail"}, "mcp://pay.charge", False),
    "mcp, idempotentHint": (mcp_kernel, {"on_doubt": "fail"}, "mcp://pay.settle", True),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_servers_doubt_policy_decides_a_step_found_sent(tmp_path: Path, case: str) -> None:
    make, policy, tool, again = CASES[case]
    path = tmp_path / "journal.sqlite"
    locker = Locker(path)
    runner = DbosRunner(f"sqlite:///{path}", busy_timeout=0.05, journal_outage=0.3)
    try:
        with serve(create_app(on_charge=locker.at_first("B"), honour_keys=False)) as shop:
            kernel = make(shop, **policy)
            try:
                with pytest.raises(RunInterruptedError):
                    await engine(kernel, runner, tool).run({}, run_id="server-doubt")
                locker.release()
                result = await engine(kernel, runner, tool).run({}, run_id="server-doubt")
            finally:
                await kernel.close()
            requests, effects = orders(fetch(f"{shop}/requests")), orders(fetch(f"{shop}/effects"))
        if again:
            assert result.ok, result.error
            assert requests == effects == ["A", "B", "B", "C"]  # sent again: the policy (or the tool's hint) allows it
            return
        assert not result.ok
        assert str(result.error).startswith("Node 'b': Outcome unknown: check before retrying.")
        assert requests == effects == ["A", "B"]  # B happened once, and nothing after it ran
        client = DbosClient(f"sqlite:///{path}")
        try:
            shown = client.describe("server-doubt").in_doubt
        finally:
            client.close()
        assert shown == [{"position": 2, "name": f"b#1/tool {tool}#1", "state": "in_doubt"}]
    finally:
        locker.release()
        await runner.aclose()


def test_a_configuration_file_gives_servers_their_doubt_policy(tmp_path: Path) -> None:
    document = {
        "rest_servers": [
            {
                "name": "shop",
                "url": "http://127.0.0.1:9",
                "on_doubt": "ask",
                "tools_on_doubt": {"refund": "fail"},
                "rest_tools": [
                    {"name": "charge", "method": "POST", "path": "/charge"},
                    {"name": "refund", "method": "POST", "path": "/refund"},
                    {"name": "order", "method": "GET", "path": "/order"},
                ],
            }
        ]
    }
    kernel = build_kernel(KernelConfig.from_dict(document, base_dir=tmp_path))
    charge, refund, order = (kernel.registry.get(f"rest://shop.{name}") for name in ("charge", "refund", "order"))
    assert (charge.metadata["on_doubt"], refund.metadata["on_doubt"]) == ("ask", "fail")
    assert not retry_allowed(charge)
    assert not retry_allowed(refund)
    assert retry_allowed(order)  # a GET may repeat, whatever the server's policy


def test_an_openapi_operations_own_word_on_repeats_is_its_tools(tmp_path: Path) -> None:
    """``x-idempotent`` and a documented ``Idempotency-Key`` header decide a step's repeat; ``x-idempotent: false``
    overrides an idempotent method; a mark that is not a boolean is refused, naming the operation."""
    spec = openapi_spec(**KEY_HEADER)
    spec["paths"]["/charge"]["put"] = {"operationId": "replace", "x-idempotent": False, "responses": {}}
    spec["paths"]["/charge"]["delete"] = {"operationId": "remove", "responses": {}}
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url="http://127.0.0.1:9", on_doubt="fail"))
    kernel.register_openapi("shop", spec)
    charge, replace, remove = (kernel.registry.get(f"rest://shop.{name}") for name in ("charge", "replace", "remove"))
    assert (charge.metadata["honours_key"], replace.metadata["idempotent"]) == (True, False)
    assert retry_allowed(charge)  # a POST whose server documents the key
    assert not retry_allowed(replace)  # a PUT that says a repeat is not harmless
    assert retry_allowed(remove)  # a DELETE that says nothing: its method
    bad = openapi_spec(**{"x-idempotent": "yes"})
    with pytest.raises(ConfigurationError, match=r"OpenAPI operation POST /charge: x-idempotent must be true or false"):
        kernel.register_openapi("shop", bad, replace=True)


def test_a_tools_on_doubt_key_naming_no_tool_is_a_configuration_error(tmp_path: Path) -> None:
    """Once a server's tools are known: a configuration file's REST server (its tools and a spec file), and an MCP
    server at its first listing; the error names the key and the tool it may have meant."""
    document = {
        "rest_servers": [
            {
                "name": "shop",
                "url": "http://127.0.0.1:9",
                "tools_on_doubt": {"refnud": "fail"},
                "rest_tools": [{"name": "refund", "method": "POST", "path": "/refund"}],
            }
        ]
    }
    with pytest.raises(ConfigFieldError) as refused:
        build_kernel(KernelConfig.from_dict(document, base_dir=tmp_path))
    assert refused.value.field == "rest_servers[0].tools_on_doubt"
    assert "tools_on_doubt names 'refnud' (did you mean 'refund'?), not a tool of this server" in str(refused.value)
    (tmp_path / "shop.json").write_text(json.dumps(openapi_spec()), encoding="utf-8")
    document["rest_servers"][0].update(rest_tools=[], openapi="shop.json", tools_on_doubt={"charge": "ask"})
    kernel = build_kernel(KernelConfig.from_dict(document, base_dir=tmp_path))  # the spec's tool: named rightly
    assert kernel.registry.get("rest://shop.charge").metadata["on_doubt"] == "ask"


async def test_a_rest_servers_tools_on_doubt_is_checked_once_its_spec_at_a_url_is_imported() -> None:
    """The shop (FastAPI) serves its own OpenAPI document, whose operation is ``charge_charge_post``."""
    with serve(create_app()) as shop:
        for policy, refused in (({"charge": "fail"}, True), ({"charge_charge_post": "fail"}, False)):
            kernel = FunctionKernel()
            kernel.register_rest_server(RestServer(name="shop", url=shop, tools_on_doubt=policy))
            kernel.register_openapi("shop", "/openapi.json")
            try:
                if refused:
                    with pytest.raises(ConfigurationError) as error:
                        await kernel.connect()
                    assert not isinstance(error.value, ServerConnectionError)
                    assert (
                        "tools_on_doubt names 'charge', not a tool of this server (its tools: charge_charge_post"
                        in str(error.value)
                    )
                else:
                    await kernel.connect()
                    assert kernel.registry.metadata_of("rest://shop.charge_charge_post")["on_doubt"] == "fail"
            finally:
                await kernel.close()


async def test_an_mcp_servers_tools_on_doubt_is_checked_at_its_first_listing() -> None:
    kernel = mcp_kernel("http://127.0.0.1:9", tools_on_doubt={"setle": "replay"})
    try:
        with pytest.raises(ConfigurationError) as refused:
            await kernel.connect()
        assert not isinstance(refused.value, ServerConnectionError)
        assert "MCP server 'pay': tools_on_doubt names 'setle' (did you mean 'settle'?)" in str(refused.value)
    finally:
        await kernel.close()
    kernel = mcp_kernel("http://127.0.0.1:9", tools_on_doubt={"settle": "replay"})
    try:
        await kernel.connect()
        assert kernel.registry.metadata_of("mcp://pay.settle")["on_doubt"] == "replay"
    finally:
        await kernel.close()


async def test_a_tools_on_doubt_key_is_checked_when_a_durable_run_first_calls_its_server(tmp_path: Path) -> None:
    """In Python, tools are registered after their server, one by one: no registration can tell a key naming no
    tool. The first call of a durable run to one of the server's tools checks the keys against the tools registered
    then, and is refused, nothing sent; named rightly, the run goes on."""
    runner = DbosRunner(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        with serve(create_app()) as shop:
            mistaken = rest_kernel(shop, on_doubt="fail", tools_on_doubt={"chrage": "ask"})
            result = await engine(mistaken, runner, "rest://shop.charge").run({}, run_id="keys-1")
            assert not result.ok
            assert "tools_on_doubt names 'chrage' (did you mean 'charge'?), not a tool of this server" in str(
                result.error
            )
            assert fetch(f"{shop}/requests") == []  # refused before anything was sent
            right = rest_kernel(shop, on_doubt="fail", tools_on_doubt={"charge": "ask"})
            result = await engine(right, runner, "rest://shop.charge").run({}, run_id="keys-2")
            assert result.ok, result.error
            assert orders(fetch(f"{shop}/requests")) == ["A", "B", "C"]
    finally:
        await runner.aclose()
