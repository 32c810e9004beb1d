"""Issue 40: the gateway's HTTP server keeps an idle connection longer than the clients do, so a client never
sends a request on a connection the server is closing in that instant (node's ``fetch`` saw ``ECONNRESET`` at 128
sessions when uvicorn's 5 s idle timeout was the server's). The timeout is ``kavalai._listen.KEEP_ALIVE``, given to
uvicorn by ``serve_http`` and ``--keep-alive SECONDS``, workers included: a short one shows it reaches the server
(the server, not the client, ends the idle connection), never a clock bound.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import math
from pathlib import Path

import pytest
from tests.serve.test_scale_out import replica

from kavalai._listen import KEEP_ALIVE
from kavalai.cli._run import EXIT_USAGE
from kavalai.cli._serve import build_serve_parser, serve_command
from kavalai.serve import serve_http
from kavalai.serve._transports import uvicorn_config

pytestmark = pytest.mark.timeout(180)

#: Seconds an idle connection is kept by the clients and balancers in front of the gateway, by default.
CLIENTS_IDLE = {"node fetch (undici)": 4, "httpx": 5, "aiohttp": 15, "AWS ALB": 60, "Go net/http": 90}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "idle_tools.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n", encoding="utf-8")
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"python_functions": [{"function": "idle_tools.add", "name": "add"}]}), "utf-8")
    return path


def test_the_server_keeps_an_idle_connection_longer_than_every_common_client() -> None:
    longest = max(CLIENTS_IDLE.values())
    assert longest < KEEP_ALIVE
    assert uvicorn_config(_app).timeout_keep_alive == KEEP_ALIVE
    assert inspect.signature(serve_http).parameters["keep_alive"].default == KEEP_ALIVE
    args = build_serve_parser().parse_args(["tools.yaml", "--transport", "http"])
    assert args.keep_alive == KEEP_ALIVE


@pytest.mark.parametrize("seconds", [0, -5, math.nan, math.inf, True, "60"])
def test_a_keep_alive_not_a_whole_second_or_more_is_refused(seconds: object) -> None:
    with pytest.raises(ValueError, match=f"keep_alive must be 1 second or more, not {seconds}"):
        uvicorn_config(_app, keep_alive=seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [[], ["--stateless", "--workers", "2"]], ids=["one process", "workers"])
@pytest.mark.parametrize("seconds", ["0", "-5"])
def test_the_cli_refuses_a_keep_alive_under_a_second_before_anything_starts(
    config: Path, options: list[str], seconds: str
) -> None:
    """A usage error (exit 2, one line), not a kernel built then a ``ValueError`` (one traceback per worker)."""
    args = build_serve_parser().parse_args([str(config), "--transport", "http", f"--keep-alive={seconds}", *options])
    err = io.StringIO()
    assert serve_command(args, stderr=err) == EXIT_USAGE
    assert err.getvalue() == f"kavalai serve: --keep-alive {seconds}: give 1 second or more\n"


@pytest.mark.parametrize("options", [[], ["--stateless", "--workers", "2"]], ids=["one process", "workers"])
async def test_keep_alive_reaches_the_server_that_then_ends_the_idle_connection(
    config: Path, options: list[str]
) -> None:
    """With ``--keep-alive 1``, a connection left idle after one answer is ended by the server (the client reads
    the end of the stream without having closed anything)."""
    async with replica(config, "keep-alive.log", "--keep-alive", "1", *options) as (url, _):
        host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            await writer.drain()
            answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\nok"), 60)
            assert answer.startswith(b"HTTP/1.1 200")
            assert await asyncio.wait_for(reader.read(), 60) == b""  # the server closed the idle connection
        finally:
            writer.close()


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("never called")
