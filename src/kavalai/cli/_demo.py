"""``kavalai demo``: the kernel at work, offline and without an API key.

Sections run in order on one kernel: Python tools, a local REST app, a stdio MCP server, then an agent (scripted,
or a real model with ``--model``) that uses tools of all three kinds. The REST app and the MCP server stay up until
the agent section is done, and everything is closed at the end.
"""

from __future__ import annotations

import contextlib
import sys

from kavalai import FunctionKernel
from kavalai.cli._console import DemoConsole
from kavalai.cli._demo_agent import agent_section
from kavalai.cli._demo_mcp import mcp_section
from kavalai.cli._demo_python import python_section
from kavalai.cli._demo_rest import rest_section

__all__ = ["run_demo"]


async def run_demo(*, model: str | None = None, out: DemoConsole | None = None) -> int:
    """Run every section of the demo on one kernel and return the exit status (2 when ``model`` cannot be used:
    an unknown provider or a missing API key is said before any section runs, not after all of them)."""
    console = out if out is not None else DemoConsole()
    if model is not None and (problem := await _model_problem(model)) is not None:
        print(f"kavalai demo: cannot use the model {model!r}: {problem}", file=sys.stderr)
        return 2
    kernel = FunctionKernel()
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(kernel.close)
        await python_section(kernel, console)
        await stack.enter_async_context(rest_section(kernel, console))
        await stack.enter_async_context(mcp_section(kernel, console))
        agents_ok = await agent_section(kernel, console, model=model)
    console.line()
    if not agents_ok:
        console.line("Demo finished, but the agent could not run on the model (see above).")
        return 1
    console.line("Demo finished: every call above went through one typed FunctionKernel.")
    return 0


async def _model_problem(model: str) -> str | None:
    """Why a client for ``model`` cannot be built (``None`` when it can): checked before the demo starts."""
    from kavalai.llm import make_client
    from kavalai.llm.errors import LLMConfigurationError

    try:
        client = make_client(model)
    except LLMConfigurationError as exc:
        return str(exc)
    await client.aclose()
    return None
