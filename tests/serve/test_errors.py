"""The gateway's own errors pass the secret gate (``src/kavalai/serve/_errors.py``): every JSON-RPC error it
answers a host with and every refusal it gives a backend is built there, and its message redacted; every message
it sends a host of its own accord (a notification, a backend's request put to the host) crosses ``for_host``."""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from kavalai import FunctionKernel, pythontool
from kavalai.secrets import MASK, register_secret
from kavalai.serve import build_mcp_server
from kavalai.serve._errors import for_host, protocol_error, refusal

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


# Where the gateway sends a host something of its own accord, and the gate each crossing passes.
SENDS = {"send_notification", "send_request", "report_progress", "ask"}
GATES = {"for_host", "redact_data"}


def test_every_message_to_a_host_crosses_the_secret_gate() -> None:
    """The enumeration of the sends: each call that sends a host a message (``send_notification``,
    ``send_request``, ``report_progress``, a round's ``ask``) is in a function that passes it through ``for_host``
    (or ``redact_data`` for a bare text); a new send fails here until it does, and the list names each one."""
    crossings: dict[tuple[str, int], str] = {}  # a nested function is walked after the one around it: kept
    for path in sorted(SERVE.glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
            names = {getattr(call.func, "attr", getattr(call.func, "id", "")) for call in calls}
            for call in calls:
                if isinstance(call.func, ast.Attribute) and call.func.attr in SENDS:
                    assert names & GATES, f"{path.name}:{call.lineno} {call.func.attr} without the secret gate"
                    crossings[path.name, call.lineno] = f"{path.name}:{function.name}:{call.func.attr}"
    assert sorted(crossings.values()) == [
        "_hosts.py:_ask_roots:send_request",
        "_hosts.py:_put:ask",
        "_hosts.py:_put:send_request",
        "_hosts.py:_send:send_notification",
        "_progress.py:report:report_progress",
    ]


def test_for_host_masks_every_text_of_a_message() -> None:
    register_secret("hunter2-serve-relay-0452")
    params = types.LoggingMessageNotificationParams(
        level="info", logger="x-hunter2-serve-relay-0452", data={"k": ["hunter2-serve-relay-0452"]}
    )
    notification = types.LoggingMessageNotification(params=params)
    masked = for_host(notification)
    assert masked.params.logger == f"x-{MASK}"
    assert masked.params.data == {"k": [MASK]}
    plain = types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams(level="info", data="ok"))
    assert for_host(plain) is plain  # nothing to mask: the same message, not a copy


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


async def test_a_hosts_value_echoed_in_an_error_is_bounded() -> None:
    """Hostile round 10 (E1, found running case 29): ``tools/call`` of a 1,000,000-character tool name was answered
    with "Unknown tool: <the whole name>", a 1 MB error, where the other unknown names are quoted bounded. Every
    JSON-RPC error the gateway words crosses ``protocol_error``, which masks, then cuts; a secret across the cut shows
    no piece."""
    register_secret("sk-serve-errors-cut-5512")
    kernel = FunctionKernel()
    kernel.register_python_tool("echo", _echo)
    name = "n" * 1_984 + "sk-serve-errors-cut-5512" + "n" * 1_000_000
    async with Client(build_mcp_server(kernel), mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(name, {})
    message = raised.value.error.message
    assert message.startswith("Unknown tool: nnn")
    assert len(message) <= 2_000
    assert "sk-serve" not in message


@pythontool
def _echo(text: str) -> str:
    """Echo."""
    return text
