"""The tools package and its fs and time groups import without aiohttp."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["kavalai.tools", "kavalai.tools.fs", "kavalai.tools.time"])
def test_light_groups_do_not_import_aiohttp(module: str) -> None:
    code = (
        "import sys, kavalai.kernel, importlib\n"
        f"importlib.import_module({module!r})\n"
        "assert 'aiohttp' not in sys.modules, 'aiohttp was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False)
    assert result.returncode == 0, result.stderr
