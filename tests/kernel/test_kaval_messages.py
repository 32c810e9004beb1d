"""Error messages start (or contain) the wording Kaval.AI 1.0's tests match on, so users' pytest.raises(match=...)
keeps passing, while still naming the URI and the fix as ours do."""

from __future__ import annotations

import pytest

from kavalai import (
    FunctionKernel,
    FunctionKernelException,
    InvalidToolURIError,
    ToolInputError,
    ToolNotFoundError,
    ToolRegistrationError,
    pythontool,
)


@pythontool
def add(a: int, b: int) -> int:
    return a + b


@pytest.mark.parametrize(
    ("uri", "wording", "kind"),
    [
        ("invalid_format", "Invalid tool URI format", InvalidToolURIError),
        ("rest://nodot", "Invalid tool path format", InvalidToolURIError),
        ("ftp://some.file", "Unsupported protocol 'ftp'", InvalidToolURIError),
        ("python://non.existent.tool", "not registered", ToolNotFoundError),
    ],
)
async def test_uri_errors_use_kaval_wording(uri: str, wording: str, kind: type[Exception]) -> None:
    kernel = FunctionKernel()
    with pytest.raises(kind, match=wording) as info:
        await kernel.call_tool(uri, {})
    assert isinstance(info.value, FunctionKernelException)
    assert uri in str(info.value)


async def test_argument_errors_say_argument_validation_failed_and_which_field() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("add", add)
    with pytest.raises(ToolInputError, match=r"python://add: b: Field required \(argument validation failed\)"):
        await kernel.call_tool("python://add", {"a": 1})


def test_an_undecorated_function_must_be_decorated_with_pythontool() -> None:
    def undecorated(x: int) -> int:
        return x

    with pytest.raises(ToolRegistrationError, match="must be decorated with @kavalai.pythontool"):
        FunctionKernel().register_python_tool("undecorated", undecorated)
