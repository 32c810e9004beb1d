"""The idempotency key on the wire: in ``_meta`` of an MCP ``tools/call`` (a real stdio server), and the retry rule
engines derive from tool hints."""

from __future__ import annotations

import sys

from pydantic import BaseModel

from kavalai import FunctionKernel, McpServer
from kavalai.durable import MemoryRunner, retry_allowed, step_key
from kavalai.kernel import ToolDefinition, ToolURI, model_from_json_schema
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import ROOT


async def test_an_mcp_tool_call_of_a_durable_run_carries_its_key_in_meta() -> None:
    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(name="pay", command=sys.executable, args=["-m", "tests.servers.mcp_idempotent"], cwd=str(ROOT))
    )
    workflow = (
        WorkflowBuilder("mcp-pay", input=dict, output=dict)
        .start(next="a")
        .function("a", tool="mcp://pay.charge", inputs={"order": {"expr": "'A'"}}, next="done")
        .end("done", outputs={"key": "a.result"})
        .build()
    )
    try:
        plain = await kernel.call_tool("mcp://pay.charge", {"order": "A"})
        assert plain.result == ""  # type: ignore[attr-defined]  # no run, no key
        engine = WorkflowEngine(workflow, kernel, durable=MemoryRunner())
        result = await engine.run({}, run_id="mcp-1")
        assert result.ok, result.error
        payload = {"tool": "mcp://pay.charge", "arguments": {"order": "A"}}
        assert result.output == {"key": step_key("mcp-1", "a#1/tool mcp://pay.charge#1", payload)}
    finally:
        await kernel.close()


def definition(scheme: str, **metadata: object) -> ToolDefinition:
    async def invoke(args: BaseModel) -> None:
        return None

    model = model_from_json_schema({"type": "object", "properties": {}}, "In")
    uri = ToolURI.build(scheme, "s", "t") if scheme != "python" else ToolURI.parse("python://t")
    return ToolDefinition(
        uri=uri, description="", input_model=model, output_model=model, invoke=invoke, metadata=dict(metadata)
    )


def test_retries_follow_the_tool_hints() -> None:
    assert retry_allowed(definition("rest", qualifier="POST"))  # the key travels with it
    assert retry_allowed(definition("mcp"))
    assert retry_allowed(definition("rest", qualifier="GET"))
    assert not retry_allowed(definition("python"))  # a Python tool may ignore the key
    assert retry_allowed(definition("python", idempotent=True))
    assert retry_allowed(definition("python", annotations={"readOnlyHint": True}))
    assert not retry_allowed(definition("clock"))  # a scheme of one's own sends no key


def test_a_server_with_a_doubt_policy_is_not_trusted_with_its_key_but_its_hints_are() -> None:
    assert not retry_allowed(definition("rest", method="POST", on_doubt="fail"))
    assert not retry_allowed(definition("mcp", on_doubt="ask"))
    assert retry_allowed(definition("rest", method="PUT", on_doubt="fail"))
    # The MCP adapter keeps a tool's annotations as its server listed them.
    assert retry_allowed(definition("mcp", on_doubt="fail", listed={"annotations": {"idempotentHint": True}}))
    assert retry_allowed(definition("mcp", on_doubt="fail", listed={"annotations": {"readOnlyHint": True}}))
    assert not retry_allowed(definition("mcp", on_doubt="fail", listed={"annotations": {"destructiveHint": True}}))


async def test_a_rest_call_sends_a_non_ascii_key_in_one_header_safe_form_every_attempt() -> None:
    """Round 9's fault 13: a run id ``заказ-№1`` went out in ``Idempotency-Key`` as raw UTF-8 bytes (a field value
    is ASCII: the shop read it as latin-1). Now percent-encoded UTF-8, the same in every attempt (a second process
    of the run, its journal lost, sends the step again): the shop makes the charge once; ``unquote`` gives the key."""
    from urllib.parse import unquote

    from kavalai import RestServer
    from tests.durable.conftest import fetch
    from tests.servers.effects_app import create_app
    from tests.servers.uvicorn_server import serve

    run_id = "заказ-№1 100%"
    with serve(create_app()) as shop:
        for _ in range(2):  # two runners: the second knows nothing of the first's step, so sends it again
            kernel = FunctionKernel()
            kernel.register_rest_server(RestServer(name="shop", url=shop))
            schema = {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}}
            kernel.register_rest_tool("shop", "charge", "POST", schema, path="/charge")
            inputs = {"order": {"expr": "'A'"}, "amount": {"expr": "1"}}
            workflow = (
                WorkflowBuilder("rest-pay", input=dict, output=dict)
                .start(next="a")
                .function("a", tool="rest://shop.charge", inputs=inputs, next="done")
                .end("done", outputs={"charge": "a.result.charge"})
                .build()
            )
            try:
                result = await WorkflowEngine(workflow, kernel, durable=MemoryRunner()).run({}, run_id=run_id)
            finally:
                await kernel.close()
            assert result.ok, result.error
            assert result.output == {"charge": 1}
        requests, effects = fetch(f"{shop}/requests"), fetch(f"{shop}/effects")
    keys = [request["key"] for request in requests]
    assert len(keys) == 2
    assert keys[0] == keys[1]  # one form, every attempt
    assert keys[0].isascii(), keys[0]
    assert keys[0].isprintable(), keys[0]
    assert unquote(keys[0]).startswith(f"{run_id}.a#1/tool-rest://shop.charge#1."), keys[0]
    assert len(effects) == 1  # the shop told the repeat apart
