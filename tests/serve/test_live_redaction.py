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
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from kavalai.secrets import MASK

TOKEN = "kv-live-redaction-7c1f2e9a44d0"
BACKEND = '''
import sys
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve, Sample
from mcp.shared.exceptions import MCPError
from mcp_types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel

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


class Unlock(BaseModel):
    code: str


def ask_code() -> Elicit[Unlock]:
    return Elicit(f"elicitation holds {token}", Unlock)


def ask_model() -> Sample:
    message = SamplingMessage(role="user", content=TextContent(text=f"sampling holds {token}"))
    return Sample([message], max_tokens=5, system_prompt=f"system holds {token}")


@server.tool()
async def chatter(
    ctx: Context,
    code: Annotated[Unlock, Resolve(ask_code)],
    answer: Annotated[CreateMessageResult, Resolve(ask_model)],
) -> str:
    """Tell the host the token every way a backend can: a log message, progress, an elicitation, a sampling."""
    await ctx.warning(f"log holds {token}", logger_name=f"log-{token}")
    await ctx.report_progress(1, 2, f"progress holds {token}")
    return "told"


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


def _serve(config: Path) -> StdioServerParameters:
    """``kavalai serve`` of ``config`` over stdio, the token in its environment."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kavalai.cli._serve", str(config)],
        cwd=str(config.parent),
        env={**os.environ, "KV_API_TOKEN": TOKEN},
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # a 2026-07-28 host; a handshake-era host (the SDK's legacy
# path sends an escaping exception's text as the error's message)
async def test_a_backends_failure_reaches_the_host_with_the_token_masked(config: Path, mode: str) -> None:
    params = _serve(config)
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


async def test_what_a_backend_tells_a_host_reaches_it_with_the_token_masked(config: Path) -> None:
    """On main a backend's log message (its data and logger name), progress message, elicitation and sampling
    request reached the host with the configured token whole: only errors crossed the secret gate."""
    told: list[str] = []

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        told.append(params.model_dump_json())

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        told.append(f"progress {message}")

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        told.append(params.model_dump_json())
        return types.ElicitResult(action="accept", content={"code": "1234"})

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        told.append(params.model_dump_json())
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="ok"), model="m")

    params = _serve(config)
    with (config.parent / "stdio.log").open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            mode="legacy",
            logging_callback=log,
            elicitation_callback=elicit,
            sampling_callback=sample,
        ) as client:
            await client.session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level="debug")), types.EmptyResult
            )
            result = await client.call_tool("mcp_vault_chatter", {}, progress_callback=progress)
    assert result.content[0].text == "told"  # type: ignore[union-attr]
    kinds = ["log holds", "progress holds", "elicitation holds", "sampling holds", "system holds"]
    assert [kind for kind in kinds if any(kind in text for text in told)] == kinds  # each reached the host
    assert all(TOKEN not in text for text in told), told
    assert f"log holds {MASK}" in "".join(told)
