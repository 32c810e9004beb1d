"""Stress run: does a process that ran a code-mode snippet always exit cleanly on a loaded machine?

Run: ``.venv/bin/python bench/code_mode_exit.py [--runs N] [--busy K]``. Starts K busy loops (default: two per
core), then runs N fresh processes that each let an agent run one code-mode snippet calling two sync tools and then
exit, alternately with the exit settle of ``kavalai.agent.code_mode`` as shipped and with it set to zero. It counts
the processes that did not exit with status 0 (a pydantic-monty thread asking for the GIL while the interpreter
finalizes aborts the process: status -6, SIGABRT). Target: no failed exit with the settle; the runs without it show
that the load reproduces the abort at all.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = """
import asyncio, sys
from kavalai import FunctionKernel, pythontool
from kavalai.agent import Agent
from kavalai.agent import code_mode
from kavalai.testing import ScriptedLLM, tool_call

if sys.argv[1] == "off":
    code_mode._EXIT_SETTLE_SECONDS = 0.0

@pythontool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b

@pythontool
def multiply(a: int, b: int) -> int:
    \"\"\"Multiply two integers.\"\"\"
    return a * b

SNIPPET = "total = await python_math_add(a=2, b=3)\\nawait python_math_multiply(a=total, b=4)"

async def main() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("math.multiply", multiply)
    llm = ScriptedLLM([tool_call("run_python", {"code": SNIPPET}), "It is 20."])
    result = await Agent(llm, kernel=kernel, code_mode=True).run("What is (2 + 3) * 4?")
    assert result.output == "It is 20.", result.output

asyncio.run(main())
"""


def main(runs: int, busy: int) -> None:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    failed = {"on": 0, "off": 0}
    done = {"on": 0, "off": 0}
    try:
        for i in range(runs):
            mode = "on" if i % 2 == 0 else "off"
            child = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, timeout=120)
            done[mode] += 1
            if child.returncode != 0:
                failed[mode] += 1
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"code-mode processes exiting under load ({busy} busy loops on {os.cpu_count()} cores)")
    print(f"  with the exit settle (as shipped)   {failed['on']:3d} failed of {done['on']}")
    print(f"  without it (settle set to 0)        {failed['off']:3d} failed of {done['off']}")
    verdict = "ok" if failed["on"] == 0 else "FAILED EXITS"
    print(f"  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1))
    args = parser.parse_args()
    main(args.runs, args.busy)
