"""``kavalai run workflow.yaml --input ...``: JSON on stdout, progress on stderr, exit status."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kavalai.cli._run import add_run_parser, run_command

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRIAGE = str(EXAMPLES / "support_triage.yaml")


def _run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kavalai")
    add_run_parser(parser.add_subparsers(dest="command", required=True))
    out, err = io.StringIO(), io.StringIO()
    code = run_command(parser.parse_args(list(argv)), stdout=out, stderr=err)
    return code, out.getvalue(), _own(err.getvalue())


#: What ``kavalai run`` says first when the process already has a tracer provider: in this process, one an earlier
#: test set (tests/test_tracing.py); the CLI's tracing is tested in tests/cli/test_run_tracing.py.
_PROVIDER_SET = "kavalai run: tracing with the tracer provider already set"


def _own(err: str) -> str:
    """``err`` without the line saying an earlier test's tracer provider is used: the checks hold either way."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith(_PROVIDER_SET))


def test_prints_the_output_as_json_and_progress_on_stderr() -> None:
    code, out, err = _run("run", TRIAGE, "--input", '{"message": "Security breach on the admin page"}')
    assert code == 0, err
    output = json.loads(out)
    assert output["priority"] == "high"
    assert output["queue"] == "on-call"
    lines = err.splitlines()
    assert lines[0].startswith("run support-triage (")
    assert "  -> triage (agent)" in lines
    assert any(line.startswith("  ok triage in ") and line.endswith(", 1 tool calls") for line in lines)
    assert lines[-1].startswith("run succeeded in ")


def test_input_file_trace_and_quiet(tmp_path: Path) -> None:
    source = tmp_path / "input.yaml"
    source.write_text("message: hello there\ncustomer: Bo\n", encoding="utf-8")
    code, out, err = _run("run", TRIAGE, "--input-file", str(source), "--trace", "-q")
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result["status"] == "succeeded"
    assert result["output"]["queue"] == "support"
    assert [step["node"] for step in result["trace"]] == ["start", "size", "triage", "route", "queue", "done"]
    assert result["trace"][2]["tool_calls"][0]["tool"] == "python://urgent_terms"


def test_input_that_does_not_fit_the_workflow_exits_2_naming_the_node() -> None:
    code, out, err = _run("run", TRIAGE, "--input", '{"message": ""}')
    assert (code, out) == (2, "")  # invalid input is the caller's to fix, as docs/workflows.md says
    assert "  FAILED start: Node 'start': the workflow input does not fit type 'Message'" in err
    assert "kavalai run: invalid input: Node 'start'" in err
    missing, _, missing_err = _run("run", TRIAGE, "--input", "{}")  # a missing input field: 2 as well
    assert missing == 2
    assert "invalid input" in missing_err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "{oops"], "kavalai run: --input is not valid JSON: Expecting property name"),
        (["--input-file", "/no/such/input.json"], "kavalai run: cannot read --input-file '/no/such/input.json'"),
    ],
)
def test_bad_input_exits_2(argv: list[str], message: str) -> None:
    code, out, err = _run("run", TRIAGE, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(message)


def test_invalid_workflow_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ninput: object\noutput: object\nnodes:\n  - {id: end, kind: end}\n", encoding="utf-8")
    code, _, err = _run("run", str(path))
    assert code == 2
    assert f"kavalai run: invalid workflow {path}: The workflow has no start node" in err


def test_unreachable_server_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(
        "name: m\ninput: object\noutput: object\n"
        "mcp_servers: [{name: gone, command: kavalai-no-such-command-xyz}]\n"
        "nodes:\n  - {id: start, kind: start, next: end}\n  - {id: end, kind: end}\n",
        encoding="utf-8",
    )
    code, _, err = _run("run", str(path))
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == "connecting 1 MCP server: gone"  # said before the wait, not after
    assert lines[-1].startswith("kavalai run: ")
    assert "gone" in lines[-1]


def test_progress_says_which_servers_it_waits_for(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    demo = f"{{command: {sys.executable}, args: [-m, kavalai.demo.mcp_server]}}"
    path.write_text(
        "name: m\ninput: object\noutput: object\n"
        f"mcp_servers:\n  - {{name: one, {demo[1:]}\n  - {{name: two, {demo[1:]}\n"
        "nodes:\n  - {id: start, kind: start, next: end}\n  - {id: end, kind: end}\n",
        encoding="utf-8",
    )
    code, _, err = _run("run", str(path))
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == "connecting 2 MCP servers: one, two"
    connected = sorted(line.split(" (")[0] for line in lines[1:3])
    assert connected == ["  one: 3 tools", "  two: 3 tools"]
    quiet_code, _, quiet = _run("run", str(path), "--quiet")
    assert (quiet_code, quiet) == (0, "")


@pytest.mark.parametrize(
    ("example", "run_input", "expected"),
    [
        ("document_report.yaml", '{"path": "release-notes.md"}', {"words": 88, "minutes": 1}),
        ("support_triage.yaml", '{"message": "the service is down"}', {"priority": "high", "queue": "on-call"}),
    ],
)
def test_examples_run_with_the_kavalai_command_on_a_fresh_checkout(
    tmp_path: Path, example: str, run_input: str, expected: dict[str, object]
) -> None:
    # Nothing started by hand, run from another directory: the engine starts the MCP server and the REST app.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run(
        [sys.executable, "-m", "kavalai.cli.main", "run", str(EXAMPLES / example), "--input", run_input],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    assert {key: output[key] for key in expected} == expected
    assert completed.stderr.splitlines()[-1].startswith("run succeeded in ")


def test_a_tool_the_kernel_lacks_is_found_on_connect_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(
        "name: t\ninput: object\noutput: object\ntools: [{group: time}]\nnodes:\n"
        "  - {id: start, kind: start, next: now}\n"
        "  - {id: now, kind: function, tool: 'python://time.nw', next: end}\n"
        "  - {id: end, kind: end}\n",
        encoding="utf-8",
    )
    code, out, err = _run("run", str(path))
    assert (code, out) == (2, "")
    assert err == (
        f"kavalai run: invalid workflow {path}: Node 'now': field 'tool': Unknown tool 'python://time.nw'. "
        "Did you mean 'python://time.now'?\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--timeout", "0"], "'0': give a positive number of seconds"),
        # hostile review 36e: nan passed the check and was then blamed on the workflow file ("invalid workflow")
        (["--timeout", "nan"], "'nan': give a positive number of seconds"),
        (["--timeout", "-0"], "'-0': give a positive number of seconds"),
        (["--timeout", "5s"], "'5s' is not a number of seconds"),
        (["--max-visits", "x"], "'x' is not a"),
    ],
)
def test_limits_on_the_command_line_must_be_positive(argv: list[str], message: str) -> None:
    parser = argparse.ArgumentParser(prog="kavalai")
    add_run_parser(parser.add_subparsers(dest="command", required=True))
    err = io.StringIO()
    with pytest.raises(SystemExit) as caught, contextlib.redirect_stderr(err):
        parser.parse_args(["run", TRIAGE, *argv])
    assert caught.value.code == 2
    assert message in err.getvalue()
