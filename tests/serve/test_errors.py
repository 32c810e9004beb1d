"""The gateway's own errors pass the secret gate (``src/kavalai/serve/_errors.py``): every JSON-RPC error it
answers a host with and every refusal it gives a backend is built there, and its message redacted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from kavalai import FunctionKernel, pythontool
from kavalai.secrets import MASK, register_secret
from kavalai.serve import build_mcp_server
from kavalai.serve._errors import protocol_error, refusal

SERVE = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "serve"
BUILDERS = {"MCPError", "ErrorData"}  # the errors the gateway could build: a host's and a backend's


def _built_errors(path: Path) -> list[str]:
    """Where ``path`` builds an error itself (``MCPError(...)``, ``types.ErrorData(...)``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in BUILDERS:
                found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_every_error_of_the_gateway_is_built_by_the_gate() -> None:
    built = {path.name: _built_errors(path) for path in sorted(SERVE.glob("*.py"))}
    assert built.pop("_errors.py") != []  # the gate itself builds them: the scan sees such calls
    assert [where for found in built.values() for where in found] == []


def test_the_gate_redacts_what_it_words() -> None:
    register_secret("hunter2-serve-errors-0451")
    assert str(protocol_error(-32602, "Unknown tool: hunter2-serve-errors-0451")) == f"Unknown tool: {MASK}"
    assert refusal("token hunter2-serve-errors-0451 refused").message == f"token {MASK} refused"


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_hosts_error_carries_no_secret(era: str) -> None:
    register_secret("sk-serve-errors-secret-7731")

    kernel = FunctionKernel()
    kernel.register_python_tool("echo", _echo)
    async with Client(build_mcp_server(kernel), mode=era) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("sk-serve-errors-secret-7731", {})
    assert raised.value.error.message == f"Unknown tool: {MASK}"


@pythontool
def _echo(text: str) -> str:
    """Echo."""
    return text
