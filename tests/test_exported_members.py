"""The public face of the package."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kavalai


def test_all_is_sorted_and_complete() -> None:
    public = sorted(name for name in kavalai.__all__ if not name.startswith("_"))
    assert public == sorted(public)
    assert [n for n in kavalai.__all__ if not n.startswith("_")] == public
    for name in kavalai.__all__:
        assert hasattr(kavalai, name), name


def test_the_seed_api_is_importable_from_the_top() -> None:
    from kavalai import FunctionKernel, FunctionKernelException, McpServer, RestServer, pythontool

    kernel = FunctionKernel()
    for method in (
        "call_tool",
        "register_python_tool",
        "register_rest_server",
        "register_rest_tool",
        "register_mcp_server",
        "connect_mcp_servers",
        "close",
        "get_input_model",
        "get_output_model",
        "get_tool_descriptions",
        "get_tool_definition",
    ):
        assert callable(getattr(kernel, method)), method
    assert issubclass(FunctionKernelException, Exception)
    assert McpServer.__name__ == "McpServer"
    assert RestServer.__name__ == "RestServer"
    assert callable(pythontool)


def test_import_is_light() -> None:
    code = (
        "import sys, kavalai, kavalai.kernel, kavalai.adapters.rest, kavalai.adapters.mcp; "
        "heavy = [m for m in ('mcp', 'aiohttp', 'openai', 'anthropic', 'uvicorn', 'starlette') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == ""


@pytest.mark.parametrize(
    "statement",
    [
        "from kavalai import pythontool",
        "import kavalai.adapters.base",
        "import kavalai.adapters.python",
        "import kavalai.kernel._definition",
        "import kavalai.tools.fs",
        "from kavalai import FunctionKernel",
        "import kavalai.agent",
        "import kavalai.workflow",
    ],
)
def test_any_module_can_be_imported_first(statement: str) -> None:
    result = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
