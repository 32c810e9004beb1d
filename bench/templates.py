"""Benchmark: the meter's cost on a template of plain loop steps, against the same template rendered by the code of a
baseline commit (``main`` by default), in the same run, interleaved.

Run: ``.venv/bin/python bench/templates.py [--steps 10000] [--baseline main] [--template plain|filters]``.
The baseline's ``workflow/_templates.py`` and
``workflow/_sandbox.py`` are read with ``git show`` and loaded as a package of their own (their
``kavalai.workflow._templates``/``_sandbox`` imports pointed at it), so both renderings share this interpreter, its
Jinja and its size module. Figures:

- ``baseline``: the baseline's ``render_template`` (no meter);
- ``base-metered``: the baseline's ``render_metered`` (its meter);
- ``metered``: ``render_metered``, what a workflow's model node calls (a meter, the deadline, the slice);
- ``inline``: this tree's ``render_template`` without a meter (its loop counter only).

``--template plain`` is a loop of plain steps (``{{ i }}``); ``--template filters`` a loop of filter-heavy steps
(constant-time filters, string filters, a test), where the filters' metering shows; ``--template compares`` a
loop of small comparisons (``==``, ``in``, ``<`` of numbers), where the metered comparisons' fast path shows.
``--only NAME`` renders one of the four, ``--rounds`` times, for ``valgrind --tool=callgrind`` (instructions per
rendering: the total over rounds).
The issue's bound: ``metered`` at most 1.5x ``baseline`` on the plain template.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
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
TEMPLATES = {
    "plain": "{% for i in range(n) %}{{ i }}{% endfor %}",
    "filters": (
        "{% for i in range(n) %}{{ names|first|default('x')|length }} {{ user.name|default('?')|upper|trim }}"
        " {{ i|abs }} {{ names|last|capitalize }} {{ i|string|replace('1', 'one') }}"
        "{% if i is even and names is sequence %} {{ names|count }}{% endif %}{% endfor %}"
    ),
    "compares": "{% for i in range(n) %}{% if i == 3 or i in names or i < 0 %}{{ i }}{% endif %}{% endfor %}",
}
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
    parser.add_argument("--template", choices=sorted(TEMPLATES), default="plain")
    parser.add_argument("--only", choices=["baseline", "base-metered", "metered", "inline"], default=None)
    options = parser.parse_args()
    source = TEMPLATES[options.template]
    variables = {"n": options.steps, "names": ["ada", "grace", "edsger"], "user": {"name": "Ada"}}
    with tempfile.TemporaryDirectory() as folder:
        baseline = load_baseline(options.baseline, Path(folder))
        loop = asyncio.new_event_loop()

        def base() -> str:
            return str(baseline.render_template(source, variables, node="n", field="prompt"))

        def base_metered() -> str:
            return str(loop.run_until_complete(baseline.render_metered(source, variables, node="n", field="prompt")))

        def metered() -> str:
            return loop.run_until_complete(render_metered(source, variables, node="n", field="prompt"))

        def inline() -> str:
            return render_template(source, variables, node="n", field="prompt")

        assert base() == base_metered() == metered() == inline()
        works = {"baseline": base, "base-metered": base_metered, "metered": metered, "inline": inline}
        if options.only is not None:
            for _ in range(options.rounds):
                works[options.only]()
            loop.close()
            return
        figures: dict[str, list[float]] = {name: [] for name in works}
        for _ in range(options.repeats):  # interleaved: each repeat measures all three
            for name, work in works.items():
                figures[name].append(timed(work, options.rounds))
        loop.close()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    what = f"a template of {options.steps:,} {options.template} loop steps"
    print(f"{what} ({options.repeats} x {options.rounds} renderings each), load {os.getloadavg()[0]:.2f}")
    for name, value in medians.items():
        print(f"  {name:<12} {value * 1e3:8.3f} ms   {value / medians['baseline']:.2f}x baseline ({options.baseline})")
    print(f"metered / baseline: {medians['metered'] / medians['baseline']:.2f}x (bound: 1.50x)")
    print(f"metered / base-metered: {medians['metered'] / medians['base-metered']:.2f}x")


if __name__ == "__main__":
    main()
