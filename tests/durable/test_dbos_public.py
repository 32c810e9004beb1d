"""kavalai takes DBOS's names from its public modules only: the two cancel exceptions through ``dbos.error``, the
alias DBOS exports (``dbos.__all__``) for its exception module."""

from __future__ import annotations

import ast
from pathlib import Path

import dbos

ROOT = Path(__file__).resolve().parents[2]


def test_no_module_imports_a_private_dbos_module() -> None:
    found = []
    for path in sorted((ROOT / "src" / "kavalai").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(name.startswith("dbos._") for name in names):
                found.append(path.relative_to(ROOT).as_posix())
    assert found == []


def test_the_cancel_exceptions_kavalai_catches_are_public_names_of_dbos() -> None:
    assert "error" in dbos.__all__
    for name in ("DBOSWorkflowCancelledError", "DBOSAwaitedWorkflowCancelledError"):
        assert issubclass(getattr(dbos.error, name), BaseException), name
