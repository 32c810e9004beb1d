"""Benchmark: ``import kavalai`` against ``import pydantic``, each in fresh interpreter processes.

Run: ``.venv/bin/python bench/import_time.py [--runs N]``. Each figure is the median wall time of N fresh
``python -c "import X"`` processes, minus the median of a bare ``python -c "pass"`` start (so only the import is
counted). Target: ``import kavalai`` at most 2x ``import pydantic``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def median_seconds(code: str, runs: int) -> float:
    """Median wall time of ``runs`` fresh interpreters running ``code``."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(runs: int) -> None:
    median_seconds("import kavalai", 2)  # warm the file cache and bytecode
    bare = median_seconds("pass", runs)
    pydantic = median_seconds("import pydantic", runs) - bare
    pydantic_model = median_seconds("from pydantic import BaseModel", runs) - bare
    kavalai = median_seconds("import kavalai", runs) - bare
    kernel = median_seconds("from kavalai import FunctionKernel, pythontool", runs) - bare
    engine = median_seconds("from kavalai import WorkflowEngine", runs) - bare
    ratio = kavalai / pydantic
    print(f"import time, median of {runs} fresh processes, interpreter start ({bare * 1e3:.1f} ms) subtracted")
    print(f"  import pydantic                    {pydantic * 1e3:7.1f} ms")
    print(f"  from pydantic import BaseModel     {pydantic_model * 1e3:7.1f} ms")
    verdict = "ok" if ratio <= 2.0 else "OVER TARGET"
    print(
        f"  import kavalai                     {kavalai * 1e3:7.1f} ms   {ratio:.2f}x import pydantic "
        f"(target <= 2.0x: {verdict})"
    )
    print(
        f"  from kavalai import FunctionKernel {kernel * 1e3:7.1f} ms   {kernel / pydantic_model:.2f}x "
        "from pydantic import BaseModel (the kernel needs pydantic models; shown for honesty)"
    )
    print(f"  from kavalai import WorkflowEngine {engine * 1e3:7.1f} ms   (the workflow engine and its loader)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per case (default 10)")
    main(parser.parse_args().runs)
