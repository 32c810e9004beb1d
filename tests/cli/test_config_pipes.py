"""A configuration path that is not a regular file (issue 34): process substitution (``-c <(cat tools.yaml)``,
a ``/dev/fd/N`` pipe) keeps working, and a FIFO nobody writes to ends with one line at the read's timeout instead
of waiting in ``open()`` for ever."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.test_boundary import HELPER, TOOLS

from kavalai.cli.main import main
from kavalai.documents import read_document


def test_tools_list_reads_a_process_substitution_pipe(tmp_path: Path) -> None:
    (tmp_path / "kt_boundary_tools.py").write_text(HELPER, encoding="utf-8")
    read_end, write_end = os.pipe()
    os.write(write_end, TOOLS.encode())
    os.close(write_end)
    try:
        command = [sys.executable, "-m", "kavalai.cli.main", "tools", "list", "-c", f"/dev/fd/{read_end}"]
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, pass_fds=(read_end,)
        )
    finally:
        os.close(read_end)
    assert result.returncode == 0, result.stderr
    assert "double" in result.stdout


def test_tools_list_on_a_fifo_nobody_writes_to_ends_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "tools.yaml"
    os.mkfifo(fifo)
    monkeypatch.setitem(read_document.__kwdefaults__, "timeout", 0.5)  # the CLI's read, with a short wait
    try:
        status = main(["tools", "list", "-c", str(fifo)])
    finally:
        with contextlib.suppress(OSError):  # release an open() still waiting (the bug)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1, err
    assert "not a regular file" in err
    assert "within 0.5 s" in err
