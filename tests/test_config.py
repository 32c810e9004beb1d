"""kavalai.config: our YAML's tool sections and the mcpServers JSON of MCP hosts, turned into a kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kavalai import ConfigurationError
from kavalai.config import KernelConfig, build_kernel

HOSTILE = Path(__file__).resolve().parent / "servers" / "mcp_hostile.py"

TOOLS_MODULE = '''
from kavalai import pythontool

@pythontool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()

def plain(n: int) -> int:
    return n + 1

NOT_A_FUNCTION = 3
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "cfg_tools.py").write_text(TOOLS_MODULE)
    return tmp_path


async def test_our_yaml_sections_build_a_kernel(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KT_PREFIX", "t")
    (folder / "data").mkdir()
    (folder / "data" / "a.txt").write_text("hi")
    (folder / "tools.yaml").write_text(
        """
python_functions:
  - cfg_tools.shout
  - {function: cfg_tools.plain, name: "${KT_PREFIX}.plain"}
tools:
  - {group: fs, root: data}
rest_servers:
  - name: api
    url: http://127.0.0.1:9
    rest_tools:
      - {name: items, method: GET}
mcp_servers:
  - {name: local, command: python3, args: ["-c", "pass"]}
"""
    )
    kernel = build_kernel(KernelConfig.from_file(folder / "tools.yaml"))
    assert kernel.list_tools() == [
        "python://fs.find",
        "python://fs.ls",
        "python://fs.read",
        "python://fs.stat",
        "python://shout",
        "python://t.plain",
        "rest://api.items",
    ]
    assert (await kernel.call_tool("python://shout", {"text": "a"})).result == "A"  # type: ignore[attr-defined]
    assert (await kernel.call_tool("python://t.plain", {"n": 1})).result == 2  # type: ignore[attr-defined]
    assert (await kernel.call_tool("python://fs.read", {"path": "a.txt"})).content == "hi"  # type: ignore[attr-defined]
    assert kernel.get_mcp_server_state("local").status == "registered"  # registration connects nothing
    await kernel.close()


async def test_claude_desktop_cursor_and_vscode_mcp_json(tmp_path: Path) -> None:
    server = str(HOSTILE)
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "demo": {"command": sys.executable, "args": [server, "ok"], "env": {"X": "1"}, "autoApprove": []},
                    "off": {"command": "nope", "disabled": True},
                    "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}},
                }
            }
        )
    )
    kernel = build_kernel(KernelConfig.from_file(claude))
    assert [s.name for s in kernel.mcp_server_states()] == ["demo", "remote"]
    assert kernel.get_mcp_server_state("remote").transport == "streamable-http"
    assert (await kernel.call_tool("mcp://demo.t0", {"x": "a"})).result == "fine"  # type: ignore[attr-defined]
    await kernel.close()
    vscode = tmp_path / "mcp.json"
    vscode.write_text(json.dumps({"servers": {"legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}))
    assert build_kernel(KernelConfig.from_file(vscode)).get_mcp_server_state("legacy").transport == "sse"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"python_functions": ["cfg_tools.NOT_A_FUNCTION"]}, r"'python_functions\[0\]'.*is not a function"),
        ({"python_functions": ["cfg_tools.missing"]}, "has no attribute 'missing'"),
        ({"tools": ["fss"]}, "no bundled tool group 'fss'"),
        ({"mcpServers": {"x": {"type": "websocket", "url": "ws://h"}}}, "unknown type 'websocket'"),
        ({"mcp_servers": [{"name": "x"}]}, r"'mcp_servers\[0\]'.*neither a command nor a url"),
        ({"rest_servers": [{"name": "r", "url": "ftp://h"}]}, r"'rest_servers\[0\]'"),
        ({"python_functions": ["${KT_UNSET_VAR}.x"]}, "KT_UNSET_VAR"),
        (["not", "a", "mapping"], "not a mapping"),
    ],
)
def test_errors_name_the_section_and_what_is_wrong(folder: Path, document: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build_kernel(KernelConfig.from_dict(document, base_dir=folder))


def test_a_yaml_bomb_configuration_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines))
    with pytest.raises(ConfigurationError, match="billion laughs"):
        KernelConfig.from_file(bomb)


def test_a_field_error_names_the_entry_and_the_reason(folder: Path) -> None:
    from kavalai.config import ConfigFieldError

    document = {"rest_servers": [{"name": "a", "url": "http://127.0.0.1:1", "rest_tools": [{"method": "GET"}]}]}
    with pytest.raises(ConfigFieldError) as caught:
        build_kernel(KernelConfig.from_dict(document, base_dir=folder))
    assert caught.value.field == "rest_servers[0].rest_tools[0]"
    assert caught.value.reason == "needs a 'name'"
    assert str(caught.value) == "Configuration field 'rest_servers[0].rest_tools[0]': needs a 'name'"


def test_a_module_next_to_the_file_is_loaded_once(folder: Path) -> None:
    from kavalai.config import import_dotted

    (folder / "kt_once_helpers.py").write_text("LOADS = []\nLOADS.append(1)\ndef f() -> int:\n    return 1\n")
    first = import_dotted("kt_once_helpers.f", folder)
    second = import_dotted("kt_once_helpers.LOADS", folder)
    assert first() == 1
    assert second == [1]  # the module body ran once
    with pytest.raises(ConfigurationError, match="module 'kt_once_helpers' has no attribute 'g'"):
        import_dotted("kt_once_helpers.g", folder)


@pytest.mark.parametrize(
    "section",
    [
        {"mcp_servers": [{"name": "${KV_NAME_TOKEN}", "command": "echo"}]},
        {"rest_servers": [{"name": "api${KV_NAME_TOKEN}", "url": "http://127.0.0.1:1/"}]},
    ],
)
def test_a_server_named_by_a_secret_variable_is_refused(section: dict[str, object]) -> None:
    """Hostile round 9 (``${VAR}`` in every field kind): a server's name read from a secret variable was registered
    as a secret, yet shown whole wherever a name is not masked: the tools' URIs and names a model and a gateway's
    host read (``rest://apinot-a-number-secret-42.a``). Refused by the settings' one ``ServerName``."""
    from kavalai.secrets import MASK

    secret = "name-secret-r9-3f1a"
    with pytest.raises(ConfigurationError) as caught:
        build_kernel(KernelConfig.from_dict(section), env={"KV_NAME_TOKEN": secret})
    assert "holds the value of a secret variable" in str(caught.value)
    assert secret not in str(caught.value)
    assert MASK in str(caught.value)
