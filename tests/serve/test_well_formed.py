"""Hostile review round 9 (issue 34): what ``kavalai serve`` sends a host is well formed, whatever text a tool or a
backend holds. A file name that is not UTF-8 (``os.listdir`` gives a lone surrogate for it) in ``fs.ls``'s result
could not be written as JSON: over stdio the host read an error of code 0 ("Error serializing to JSON:
UnicodeEncodeError") and a traceback went to stderr; over HTTP the host was sent no answer at all. Every result
crosses ``well_formed_result`` in the gateway's innermost middleware (``kavalai.serve._errors.redacting``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)


def _exchange(folder: Path, messages: list[dict[str, Any]], ids: set[int]) -> tuple[list[dict[str, Any]], str]:
    """``messages`` sent to ``kavalai serve`` over stdio, one line each, its stdin held open until the answers to
    the requests ``ids`` came (in any order); its answers, and its stderr."""
    config = folder / "fs.yaml"
    config.write_text(f"tools:\n  - {{group: fs, root: {folder / 'd'}}}\n", encoding="utf-8")
    command = [sys.executable, "-m", "kavalai.cli.main", "serve", str(config)]
    served = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert served.stdin is not None
    assert served.stdout is not None
    answers: list[dict[str, Any]] = []
    try:
        served.stdin.write("".join(json.dumps(message) + "\n" for message in messages).encode())
        served.stdin.flush()
        for line in served.stdout:  # bounded by the test's timeout
            answers.append(json.loads(line))
            if ids <= {answer.get("id") for answer in answers}:
                break
    finally:
        served.stdin.close()  # the host goes: the gateway ends
        served.wait(timeout=60)
        assert served.stderr is not None
        stderr = served.stderr.read().decode(errors="replace")
        served.stdout.close()
        served.stderr.close()
    return answers, stderr


def test_a_file_name_that_is_not_utf8_reaches_the_host_in_a_result(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with open(os.path.join(os.fsencode(tmp_path / "d"), b"bad \xff name.txt"), "w") as file:
        file.write("x")
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    call = {"name": "python_fs_ls", "arguments": {"path": "."}}
    answers, stderr = _exchange(
        tmp_path,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        ],
        ids={1, 2, 3},
    )
    by_id = {answer.get("id"): answer for answer in answers}
    assert "error" not in by_id[2], by_id[2]
    assert by_id[2]["result"]["isError"] is False
    assert "bad \\udcff name.txt" in by_id[2]["result"]["content"][0]["text"]  # the escape, as text
    assert "result" in by_id[3]
    assert "Traceback" not in stderr, stderr


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"content": [{"type": "text", "text": "ok"}]}, {"content": [{"type": "text", "text": "ok"}]}),
        ({"a\udcff": ["b\ud800", {"c": "\udfff"}]}, {"a\\udcff": ["b\\ud800", {"c": "\\udfff"}]}),
        (None, None),
    ],
)
def test_a_result_with_a_lone_surrogate_is_written_as_its_escape(result: Any, expected: Any) -> None:
    from kavalai.serve._errors import well_formed_result

    assert well_formed_result(result) == expected
