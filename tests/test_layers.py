"""The layers, checked on the source: the kernel is a leaf, llm/ does not reach into agent/, and no package imports
another package's private modules. Every import counts, including those inside functions and TYPE_CHECKING blocks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "kavalai"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, with relative imports resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _package_imports(package: str) -> dict[str, set[str]]:
    root = SRC.joinpath(*package.split(".")[1:])
    files = [root.with_suffix(".py")] if root.with_suffix(".py").exists() else sorted(root.rglob("*.py"))
    return {_module_name(path): _imports(path) for path in files}


def _offenders(package: str, forbidden: list[str]) -> list[str]:
    return sorted(
        f"{module} imports {name}"
        for module, names in _package_imports(package).items()
        for name in names
        if any(name == bad or name.startswith(f"{bad}.") for bad in forbidden)
    )


def test_the_kernel_is_a_leaf() -> None:
    forbidden = [
        f"kavalai.{name}"
        for name in ("adapters", "tools", "llm", "agent", "workflow", "cli", "http", "config", "function_kernel")
    ]
    forbidden += ["mcp", "aiohttp", "httpx", "openai", "anthropic", "yaml", "jinja2"]
    assert _offenders("kavalai.kernel", forbidden) == []


def test_the_kernel_imports_nothing_of_kavalai_but_itself_and_the_errors() -> None:
    """Issue 36: no allowance. The kernel's only kavalai imports are its own modules, ``kavalai.errors`` and the
    secret gate ``kavalai.secrets`` (a leaf: its loggers mask secrets, test_secret_gate.py), which every path
    crosses (``kavalai._cancel`` lived outside the kernel and was its one violation)."""
    allowed = ("kavalai.kernel", "kavalai.errors", "kavalai.secrets")
    found = sorted(
        f"{module} imports {name}"
        for module, names in _package_imports("kavalai.kernel").items()
        for name in names
        if (name == "kavalai" or name.startswith("kavalai."))
        and not any(name == ok or name.startswith(f"{ok}.") for ok in allowed)
    )
    assert found == []


def test_the_kernel_owns_its_calls_instead_of_discovering_them() -> None:
    # Issue 24: no frame walks, no coroutine chains, no task scans, no taking back someone else's cancellation.
    # A scope takes back only its own cut: ``Task.uncancel()`` lives in kernel/_cancel.py and nowhere else.
    banned = ("_getframe", "f_locals", "cr_await", "all_tasks", "uncancel")
    found = [
        f"{path.relative_to(SRC)}: {word}"
        for path in sorted((SRC / "kernel").rglob("*.py"))
        for word in banned
        if word in path.read_text(encoding="utf-8") and not (word == "uncancel" and path.name == "_cancel.py")
    ]
    assert found == []
    outside = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if "uncancel(" in path.read_text(encoding="utf-8") and path != SRC / "kernel" / "_cancel.py"
    ]
    assert outside == []


def test_llm_does_not_import_the_agent() -> None:
    assert _offenders("kavalai.llm", ["kavalai.agent", "kavalai.workflow"]) == []


def test_the_http_module_and_the_secret_masker_are_leaves() -> None:
    above = [f"kavalai.{name}" for name in ("adapters", "tools", "llm", "agent", "workflow", "cli", "kernel")]
    assert _offenders("kavalai.http", [*above, "mcp", "httpx"]) == []
    assert _offenders("kavalai.secrets", [*above, "kavalai.http"]) == []


def test_auth_is_below_the_adapters() -> None:
    """The adapters use kavalai.auth (its public names); it knows nothing of them, nor of anything above them."""
    above = [f"kavalai.{name}" for name in ("adapters", "tools", "llm", "agent", "workflow", "cli", "config", "serve")]
    assert _offenders("kavalai.auth", above) == []


def test_rest_and_the_web_tools_share_one_http_module() -> None:
    """No second session owner, redirect guard or body reader: both import kavalai.http."""
    for package in ("kavalai.adapters.rest", "kavalai.tools"):
        names = {name for found in _package_imports(package).values() for name in found}
        assert any(name.startswith("kavalai.http.LoopSession") for name in names), package
        assert any(name.startswith("kavalai.http.read_limited") for name in names), package


def test_configuration_becomes_a_kernel_in_one_place() -> None:
    """Both workflow dialects (ours and Kaval.AI 1.0's) hand their tool sections to kavalai.config (build_document
    through the loader, or build_kernel), and neither registers tools itself."""
    hands_over = {
        SRC / "workflow" / "_document.py": "kavalai.config.build_document",
        SRC / "workflow" / "kaval" / "_translate.py": "kavalai.config.build_kernel",
    }
    for loader, gate in hands_over.items():
        assert gate in _imports(loader), loader
    for loader in (*hands_over, SRC / "workflow" / "_parts.py", SRC / "workflow" / "_load.py"):
        calls = {
            node.func.attr
            for node in ast.walk(ast.parse(loader.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }
        assert not calls & {"register_python_tool", "register_mcp_server", "register_rest_server"}, loader


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    sample = SRC / "kernel" / "_registry.py"
    assert "kavalai.errors.ToolRegistrationError" in _imports(sample)
    bad = ast.parse("def f():\n    from kavalai.adapters import rest\n")
    names = {n.module for n in ast.walk(bad) if isinstance(n, ast.ImportFrom)}
    assert names == {"kavalai.adapters"}


@pytest.mark.parametrize(
    "package", ["adapters", "agent", "auth", "cli", "llm", "tools", "workflow", "kernel", "http", "serve"]
)
def test_no_package_imports_another_packages_private_modules(package: str) -> None:
    own = f"kavalai.{package}"
    offenders = []
    for module, names in _package_imports(own).items():
        for name in names:
            parts = name.split(".")
            if parts[0] != "kavalai" or name.startswith(f"{own}.") or name == own:
                continue
            # kavalai.<pkg>._private, kavalai.<pkg>.<sub>._private: private to that package (names too).
            if any(part.startswith("_") and not part.startswith("__") for part in parts[2:]):
                offenders.append(f"{module} imports {name}")
    assert sorted(offenders) == []


def test_the_demo_servers_live_outside_the_cli_and_only_the_cli_imports_them() -> None:
    """The demo servers are examples to run (``python -m kavalai.demo.mcp_server``), not library code: only the
    CLI imports them, inside the functions of the commands that run them."""
    assert not list((SRC / "cli").glob("demo_*.py"))
    importers = sorted(
        module
        for package in ("adapters", "agent", "auth", "cli", "http", "kernel", "llm", "serve", "tools", "workflow")
        for module, names in _package_imports(f"kavalai.{package}").items()
        if any(name == "kavalai.demo" or name.startswith("kavalai.demo.") for name in names)
    )
    assert importers == ["kavalai.cli._demo_mcp", "kavalai.cli._demo_rest"]
    for module in importers:
        path = SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")
        top = [n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.ImportFrom)]
        assert not [n for n in top if (n.module or "").startswith("kavalai.demo")], module  # imported lazily
