"""Our own format: a mapping shaped like a binding is bound or refused, never handed to a tool as data.

Before, ``{type: context, value: input.pond}`` in one of our ``inputs`` was a literal mapping, and a tool taking
``Any`` silently received it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine


@pythontool
def echo(value: Any) -> Any:
    """Returns what it was given."""
    return value


def ours(binding: Any) -> dict[str, Any]:
    return {
        "name": "ours",
        "input": {"type": "object", "properties": {"pond": {"type": "string"}}},
        "output": "any",
        "nodes": [
            {"id": "s", "kind": "start", "next": "call"},
            {"id": "call", "kind": "function", "tool": "python://echo", "inputs": {"value": binding}, "next": "e"},
            {"id": "e", "kind": "end"},
        ],
    }


async def run(binding: Any) -> Any:
    kernel = FunctionKernel()
    kernel.register_python_tool("echo", echo)
    result = await WorkflowEngine.from_dict(ours(binding), kernel=kernel).run({"pond": "mill"})
    result.raise_for_status()
    return result.output


async def test_an_upstream_context_binding_is_bound() -> None:
    assert await run({"type": "context", "value": "input.pond"}) == {"result": "mill"}


async def test_an_upstream_literal_binding_is_unwrapped() -> None:
    assert await run({"type": "literal", "value": [1, 2]}) == {"result": [1, 2]}


async def test_plain_mappings_are_still_data() -> None:
    assert await run({"type": "pond", "depth": 3}) == {"result": {"type": "pond", "depth": 3}}
    assert await run({"literal": {"type": "context", "value": "input.pond"}}) == {
        "result": {"type": "context", "value": "input.pond"}
    }


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        ({"type": "history", "value": "order.id"}, "needs the Kaval.AI format"),
        ({"type": "context", "value": 3}, "looks like a binding"),
        ({"expr": "input.pond", "default": "x"}, "looks like a binding"),
        ({"literal": 1, "note": "x"}, "looks like a binding"),
        ({"type": "context", "value": "inptu.pond"}, "Did you mean 'input'"),
    ],
)
def test_a_binding_shape_that_cannot_be_bound_is_refused(binding: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message) as caught:
        WorkflowEngine.from_dict(ours(binding))
    assert caught.value.node == "call"
    assert caught.value.field == "inputs.value"
