"""A server's doubt policy without ``@pythontool``: ``RestServer``/``McpServer`` ``on_doubt`` and ``tools_on_doubt``
(in Python and in a configuration file). The journal is held locked right after the shop made charge B, so B's result
is not recorded; the resume applies the policy, and MCP tool annotations (``idempotentHint``) still let a step be
replayed. Counted at a local shop that ignores idempotency keys (each request an effect), behind a real REST server
and a real MCP server process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, McpServer, RestServer
from kavalai.config import KernelConfig, build_kernel
from kavalai.durable import DbosRunner, retry_allowed
from kavalai.durable.dbos import DbosClient
from kavalai.errors import RunInterruptedError
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
