"""``kavalai demo``: the kernel at work, offline and without an API key."""

from __future__ import annotations

from kavalai.cli._console import DemoConsole
from kavalai.cli._demo_python import python_section
from kavalai.kernel import FunctionKernel

__all__ = ["run_demo"]


async def run_demo(*, model: str | None = None, out: DemoConsole | None = None) -> int:
    """Run every section of the demo on one kernel and return the exit status."""
    console = out if out is not None else DemoConsole()
    kernel = FunctionKernel()
    try:
        await python_section(kernel, console)
    finally:
        await kernel.close()
    console.line()
    console.line("Demo finished: every call above went through one typed FunctionKernel.")
    return 0
