"""Benchmark: the meter's cost on a template of plain loop steps, against the same template rendered by the code of a
baseline commit (``main`` by default), in the same run, interleaved.

Run: ``.venv/bin/python bench/templates.py [--steps 10000] [--baseline main]``. The baseline's
``workflow/_templates.py`` and ``workflow/_sandbox.py`` are read with ``git show`` and loaded as a package of their
own (their ``kavalai.workflow._templates``/``_sandbox`` imports pointed at it), so both renderings share this
interpreter, its Jinja and its size module. Figures:

- ``baseline``: the baseline's ``render_template`` (no meter);
- ``metered``: ``render_metered``, what a workflow's model node calls (a meter, the deadline, the slice);
- ``inline``: this tree's ``render_template`` without a meter (its loop counter only).

The issue's bound: ``metered`` at most 1.5x ``baseline``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from kavalai.workflow._templates import render_metered, render_template

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "kavalai_baseline_templates"


def load_baseline(ref: str, folder: Path) -> ModuleType:
    """The baseline's template module, loaded as ``kavalai_baseline_templates._templates``."""
    package = folder / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("_templates", "_sandbox"):
        path = f"src/kavalai/workflow/{name}.py"
        source = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
        text = source.stdout.replace("kavalai.workflow._sandbox", f"{PACKAGE}._sandbox")
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, str(folder))
    spec = importlib.util.find_spec(f"{PACKAGE}._templates")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed(work: Callable[[], Any], rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        work()
    return (time.perf_counter() - started) / rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    source = "{% for i in range(n) %}{{ i }}{% endfor %}"
    variables = {"n": options.steps}
    with tempfile.TemporaryDirectory() as folder:
        baseline = load_baseline(options.baseline, Path(folder))
        loop = asyncio.new_event_loop()

        def base() -> str:
            return str(baseline.render_template(source, variables, node="n", field="prompt"))

        def metered() -> str:
            return loop.run_until_complete(render_metered(source, variables, node="n", field="prompt"))

        def inline() -> str:
            return render_template(source, variables, node="n", field="prompt")

        assert base() == metered() == inline()
        figures: dict[str, list[float]] = {"baseline": [], "metered": [], "inline": []}
        works = {"baseline": base, "metered": metered, "inline": inline}
        for _ in range(options.repeats):  # interleaved: each repeat measures all three
            for name, work in works.items():
                figures[name].append(timed(work, options.rounds))
        loop.close()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"a template of {options.steps:,} plain loop steps ({options.repeats} x {options.rounds} renderings each)")
    for name, value in medians.items():
        print(f"  {name:<9} {value * 1e3:8.3f} ms   {value / medians['baseline']:.2f}x baseline ({options.baseline})")
    print(f"metered / baseline: {medians['metered'] / medians['baseline']:.2f}x (bound: 1.50x)")


if __name__ == "__main__":
    main()
