"""The exception tree: one root, fields carried, messages kept."""

from __future__ import annotations

import inspect
import pickle
from typing import Any

import pytest

import kavalai
from kavalai import errors


def test_every_exception_derives_from_the_root() -> None:
    classes = [obj for _, obj in inspect.getmembers(errors, inspect.isclass) if issubclass(obj, Exception)]
    assert len(classes) >= 12
    for cls in classes:
        assert issubclass(cls, errors.FunctionKernelException), cls


def test_every_exception_is_exported_and_drawn_in_the_docstring() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert getattr(kavalai, name) is getattr(errors, name)
        assert name in doc, f"{name} is missing from the tree in errors.py's docstring"


def test_builtin_bases_let_callers_catch_broadly() -> None:
    assert issubclass(errors.InvalidToolURIError, ValueError)
    assert issubclass(errors.ToolInputError, ValueError)
    assert issubclass(errors.ToolNotFoundError, LookupError)
    assert issubclass(errors.ToolTimeoutError, TimeoutError)
    assert issubclass(errors.ServerConnectionError, ConnectionError)
    assert issubclass(errors.HTTPStatusError, errors.ToolExecutionError)
    assert issubclass(errors.ConfigurationError, errors.ToolRegistrationError)


def test_fields_are_carried() -> None:
    http = errors.HTTPStatusError("boom", uri="rest://a.b", method="GET", status_code=500, body="oops")
    assert (http.uri, http.method, http.status_code, http.body, str(http)) == (
        "rest://a.b",
        "GET",
        500,
        "oops",
        "boom",
    )
    conn = errors.ServerConnectionError("gone", server="files", exit_code=3, stderr_tail="Traceback")
    assert (conn.server, conn.exit_code, conn.stderr_tail, conn.uri) == ("files", 3, "Traceback", None)
    timeout = errors.ToolTimeoutError("slow", uri="mcp://a.b", timeout=1.5)
    assert timeout.timeout == 1.5
    missing = errors.ToolNotFoundError("nope", uri="python://x", suggestions=("python://y",))
    assert missing.suggestions == ["python://y"]
    bad = errors.ToolInputError("bad", uri="python://x", errors=[{"loc": ("a",)}])
    assert bad.errors == [{"loc": ("a",)}]


def test_raise_and_catch_at_the_root() -> None:
    with pytest.raises(kavalai.FunctionKernelException) as info:
        raise errors.ToolOutputError("does not fit", uri="python://x")
    assert info.value.message == "does not fit"


def _every_error_class() -> list[type[errors.FunctionKernelException]]:
    found: list[type[errors.FunctionKernelException]] = []
    pending = [errors.FunctionKernelException]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_error_survives_pickling_with_its_fields() -> None:
    fields: dict[str, Any] = {
        "uri": "rest://a.b",
        "method": "GET",
        "status_code": 500,
        "body": "oops",
        "errors": [{"loc": ("a",)}],
        "timeout": 1.5,
        "server": "a",
        "exit_code": 3,
        "stderr_tail": "Traceback",
        "suggestions": ["rest://a.c"],
    }
    classes = _every_error_class()
    assert errors.HTTPStatusError in classes
    for cls in classes:
        original = cls.__new__(cls)
        errors.FunctionKernelException.__init__(original, "went wrong", uri="rest://a.b")
        original.__dict__.update(fields)
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is cls
        assert str(copy) == "went wrong"
        assert copy.__dict__ == original.__dict__
    http = pickle.loads(pickle.dumps(errors.HTTPStatusError("x", method="GET", status_code=404, body="")))
    assert (http.status_code, http.method, http.args) == (404, "GET", ("x",))
