"""Every complete example in the docs and the README runs as written.

A fenced ``python`` block that calls ``asyncio.run(`` is a complete script: it is run in a fresh interpreter and
must exit 0. Other blocks are fragments (``text`` fences) and are not run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _examples() -> list[tuple[str, str]]:
    found = []
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        for number, match in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8")), start=1):
            code = match.group(1)
            if "asyncio.run(" in code:
                found.append((f"{page.relative_to(ROOT)}#{number}", code))
    return found


EXAMPLES = _examples()


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.timeout(330)  # the subprocess's own 300 s bound ends first, with the example's stderr in the failure
@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_example_runs(where: str, code: str, tmp_path: Path) -> None:
    # 300 s bounds a hang, not a speed: docs/durable.md's examples start workers and runs in processes of their own
    # (each bounded at 60 s inside the example), which took more than 50 s in all on a machine at load 15-20.
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{where} failed:\n{result.stderr[-3000:]}"
