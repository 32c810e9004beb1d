"""The import graph of ``kavalai.workflow``, read from the source (imports inside functions and TYPE_CHECKING blocks
included): no circle, and the Kaval.AI 1.0 wing (``kavalai.workflow.kaval``) points only inward: nothing outside it
imports it but its registration point's importer, the package face, and Kaval.AI's own public paths
(``kavalai.workflow.builder``, ``kavalai.workflow.models``), which no core module imports."""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import SRC, _imports, _module_name

WORKFLOW = SRC / "workflow"
WING = "kavalai.workflow.kaval"
FACE = "kavalai.workflow"
#: Kaval.AI's public paths: they may import the wing; no core module may import them.
KAVAL_PATHS = {FACE, "kavalai.workflow.builder", "kavalai.workflow.models"}


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(root.rglob("*.py"))}


def _target(name: str, modules: set[str]) -> str | None:
    """The module of ``modules`` an imported name lands in (the longest prefix), if any."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _graph() -> dict[str, set[str]]:
    modules = _modules(WORKFLOW)
    names = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {_target(name, names) for name in _imports(path)}
        graph[module] = {target for target in targets if target is not None and target != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_workflow_package_has_no_import_circle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_kaval_ais_public_paths_import_the_wing() -> None:
    importers = sorted(
        f"{module} imports {name}"
        for module, path in _modules(SRC).items()
        if not (module == WING or module.startswith(f"{WING}."))
        for name in _imports(path)
        if (name == WING or name.startswith(f"{WING}.")) and module not in KAVAL_PATHS
    )
    assert importers == []


def test_no_core_workflow_module_imports_kaval_ais_public_paths() -> None:
    graph = _graph()
    core = [module for module in graph if module not in KAVAL_PATHS and not module.startswith(f"{WING}.")]
    offenders = sorted(
        f"{module} imports {target}" for module in core if module != WING for target in graph[module] & KAVAL_PATHS
    )
    assert offenders == []


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_loader_never_reaches_the_engine() -> None:
    """The loader (and our dialect, which it asks) import nothing that imports the engine, even inside functions."""
    graph = _graph()
    for loader in ("kavalai.workflow._load", "kavalai.workflow._document"):
        reached = _reachable(graph, loader)
        assert "kavalai.workflow._engine" not in reached, loader
        assert not {module for module in reached if module == WING or module.startswith(f"{WING}.")}, loader


def test_no_module_outside_the_wing_imports_kaval_ais_builder_or_models_path() -> None:
    """``kavalai.workflow.builder`` and ``kavalai.workflow.models`` are Kaval.AI's paths for Kaval.AI's code: no
    module of kavalai (the CLI, the durable runners, the server...) imports them."""
    paths = KAVAL_PATHS - {FACE}
    offenders = sorted(
        f"{module} imports {name}"
        for module, path in _modules(SRC).items()
        if module not in KAVAL_PATHS and not module.startswith(f"{WING}.")
        for name in _imports(path)
        if any(name == target or name.startswith(f"{target}.") for target in paths)
    )
    assert offenders == []
