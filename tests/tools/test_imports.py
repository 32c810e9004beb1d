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


def test_the_groups_are_reachable_from_the_package_on_first_use() -> None:
    code = (
        "import sys, kavalai.tools\n"
        "assert not [m for m in sys.modules if m.startswith('kavalai.tools.')], 'a group was imported early'\n"
        "assert kavalai.tools.fs.register.__module__ == 'kavalai.tools.fs'\n"
        "assert kavalai.tools.time.register.__module__ == 'kavalai.tools.time'\n"
        "assert 'aiohttp' not in sys.modules\n"
        "try:\n"
        "    kavalai.tools.nope\n"
        "except AttributeError as exc:\n"
        "    assert \"has no attribute 'nope'\" in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False)
    assert result.returncode == 0, result.stderr
