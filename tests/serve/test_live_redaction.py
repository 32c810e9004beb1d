"""Serve's handler redaction seen by a real host: the MCP SDK's client on ``kavalai serve`` (a subprocess over stdio)
in front of a real MCP server whose resource read and prompt fail with the API token it was started with (a
``${VAR}`` of the configuration, so registered with the secret gate in the serve process). The JSON-RPC errors the
host receives carry the backend's words with the token masked, never the token. And a Python tool whose result
cannot be shown (its ``repr`` raises while serve turns it into the call's result) makes serve's own handler raise
a foreign exception: the host reads a fixed message, never its text (without the redacting middleware the SDK
would send that text as the error's message)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from kavalai.secrets import MASK

TOKEN = "kv-live-redaction-7c1f2e9a44d0"
BACKEND = '''
import sys

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

token = sys.argv[sys.argv.index("--token") + 1]
server = MCPServer("vault", log_level="WARNING")


@server.resource("vault://key", name="key", description="The vault's key.")
def key() -> str:
    raise MCPError(-32602, f"token {token} may not read vault://key", {"token": token})


@server.prompt(description="Unlock the vault.")
def unlock() -> str:
    raise RuntimeError(f"handler-private-detail: cannot unlock with {token}")


@server.tool()
def status() -> str:
    """The vault's status."""
    return "sealed"


if __name__ == "__main__":
    server.run("stdio")
'''
TOOLS = '''
from typing import Any


class Sealed:
    def __repr__(self) -> str:
        raise RuntimeError("handler-private-detail: the seal cannot be shown")


def seal() -> Any:
    """Seal the vault."""
    return Sealed()
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "vault_server.py").write_text(BACKEND, encoding="utf-8")
    (tmp_path / "vault_tools.py").write_text(TOOLS, encoding="utf-8")
    document = {
        "python_functions": [{"function": "vault_tools.seal", "name": "vault.seal"}],
        "mcp_servers": [
            {"name": "vault", "command": sys.executable, "args": ["vault_server.py", "--token", "${KV_API_TOKEN}"]}
        ],
    }
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # a 2026-07-28 host; a handshake-era host (the SDK's legacy
# path sends an escaping exception's text as the error's message)
async def test_a_backends_failure_reaches_the_host_with_the_token_masked(config: Path, mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kavalai.cli._serve", str(config)],
        cwd=str(config.parent),
        env={**os.environ, "KV_API_TOKEN": TOKEN},
    )
    with (config.parent / "stdio.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            assert (await client.call_tool("mcp_vault_status", {})).content[0].text == "sealed"  # the token works
            [resource] = (await client.list_resources()).resources
            with pytest.raises(MCPError) as read:
                await client.read_resource(str(resource.uri))
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt("mcp_vault_unlock")
            with pytest.raises(MCPError) as sealed:
                await client.call_tool("python_vault_seal", {})
    # a protocol error of the backend: its words reach the host, the token masked, its data (holding it) dropped
    assert f"token {MASK} may not read vault://key" in read.value.error.message
    assert read.value.error.data is None
    # a handler's own exception: its text reaches the host in no part
    assert "handler-private-detail" not in prompt.value.error.message
    assert "cannot unlock" not in prompt.value.error.message
    # serve's own handler raised a foreign exception: the host reads a fixed message naming its type alone
    assert sealed.value.error.message == "kavalai serve failed internally (RuntimeError)"
    shown = json.dumps([error.value.error.model_dump() for error in (read, prompt, sealed)])
    assert "handler-private-detail" not in shown
    assert TOKEN not in shown
    assert TOKEN not in (config.parent / "stdio.log").read_text()  # nor in what kavalai serve wrote on stderr
