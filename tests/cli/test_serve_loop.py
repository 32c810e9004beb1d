"""Issue 40 (d): ``kavalai serve --loop uvloop`` serves on uvloop's event loop (the ``kavalai[fast]`` extra), the
default stays asyncio's, and a missing uvloop is a usage error saying how to install
it. Real ``kavalai serve`` processes, the SDK's client. (Workers are given the parent's ``--loop``: the enumeration
``tests/serve/test_scale_out.py::test_a_worker_is_given_every_option_of_its_parent_but_where_to_listen``.)"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from mcp.client import Client
from tests.serve.test_scale_out import replica

from kavalai.cli._run import EXIT_USAGE
from kavalai.cli._serve import build_serve_parser, serve_command

pytestmark = pytest.mark.timeout(180)

TOOLS = '''
import asyncio


async def loop_kind() -> str:
    """The module of the running event loop's class."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "loop_tools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"python_functions": [{"function": "loop_tools.loop_kind"}]}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((), "asyncio"),
        (("--loop", "asyncio"), "asyncio"),
        (("--loop", "uvloop"), "uvloop"),
    ],
)
async def test_the_server_runs_on_the_loop_asked_for(config: Path, options: tuple[str, ...], expected: str) -> None:
    pytest.importorskip("uvloop", reason="uvloop is the kavalai[fast] extra")
    async with replica(config, "loop.log", *options) as (url, _), Client(url) as client:
        result = await client.call_tool("python_loop_kind", {})
        assert not result.is_error, result.content
        assert result.structured_content == {"result": expected}


def test_uvloop_missing_is_a_usage_error_saying_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    args = build_serve_parser().parse_args(["tools.yaml", "--transport", "http", "--loop", "uvloop"])
    err = io.StringIO()
    assert serve_command(args, stderr=err) == EXIT_USAGE
    assert err.getvalue() == "kavalai serve: --loop uvloop: uvloop is not installed (pip install 'kavalai[fast]')\n"
