"""DBOS's private names are taken in one module (:mod:`kavalai.durable._dbos_private`), against a pinned range of
DBOS releases."""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

from kavalai.durable._dbos_private import DBOS_RANGE

ROOT = Path(__file__).resolve().parents[2]


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def test_no_module_but_one_imports_a_private_dbos_module() -> None:
    found = []
    for path in sorted((ROOT / "src" / "kavalai").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(name.startswith("dbos._") for name in names):
                found.append(path.relative_to(ROOT).as_posix())
    assert found == ["src/kavalai/durable/_dbos_private.py"]


def test_the_installed_dbos_is_a_release_the_private_names_were_checked_against() -> None:
    lowest, below = DBOS_RANGE
    installed = importlib.metadata.version("dbos")
    assert _release(lowest) <= _release(installed) < _release(below), installed
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (requirement,) = [line for line in extras["dbos"] if line.startswith("dbos")]
    assert requirement == f"dbos>={lowest},<{below}"  # the extra installs no release outside the range
