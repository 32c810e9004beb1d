"""``kavalai runs`` and ``kavalai answer`` on Temporal when the server cannot be reached or has no such namespace:
one line on stderr naming the server (and the namespace), nothing on stdout, exit status 1 (docs/operations.md), for
every action. Before, a wrong namespace read as "no run 'r1' on the temporal runner" (every call failed
``NOT_FOUND``)."""

from __future__ import annotations

import pytest

from kavalai.cli.main import main

pytestmark = pytest.mark.timeout(240)

COMMANDS = [
    ["runs", "show", "r1"],
    ["runs", "list"],
    ["runs", "cancel", "r1"],
    ["runs", "resolve", "r1", "2", "--done"],
    ["answer", "r1"],
    ["answer", "r1", "approve-1", "allow"],
]


def one_line(capsys: pytest.CaptureFixture[str], command: list[str], *engine: str) -> str:
    status = main([*command, *engine])
    out, err = capsys.readouterr()
    assert status == 1, (command, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, (command, err)
    assert lines[0].startswith(f"kavalai {command[0]}: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_an_unreachable_temporal_server_is_one_line_and_exit_1(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line(capsys, command, "--engine", "temporal", "--address", "127.0.0.1:1")
    assert "cannot reach the Temporal server at 127.0.0.1:1" in line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_a_namespace_the_temporal_server_has_not_is_one_line_and_exit_1(
    command: list[str], capsys: pytest.CaptureFixture[str], temporal_address: str
) -> None:
    line = one_line(capsys, command, "--address", temporal_address, "--namespace", "no-such-namespace")
    assert f"the Temporal server at {temporal_address} has no namespace 'no-such-namespace'" in line
