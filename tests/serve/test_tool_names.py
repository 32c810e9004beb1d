"""The names ``kavalai serve`` gives the kernel's tools (``serve/_tools.py``), looked up at every call: the listing
is redone only when the kernel's tools changed (``Kernel.tools_revision``), and the names still follow every change,
a clash that renames an existing tool included."""

from __future__ import annotations

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.serve._tools import ExposedTools


@pythontool
def echo(a: int) -> int:
    """Return ``a``."""
    return a


def _kernel(count: int) -> FunctionKernel:
    kernel = FunctionKernel()
    for index in range(count):
        kernel.register_python_tool(f"tool{index}", echo)
    return kernel


def test_a_calls_name_is_looked_up_without_listing_the_kernels_tools_again(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(50)
    listings = [0]
    listing = kernel.list_tools

    def counted(pattern: str | None = None) -> list[str]:
        listings[0] += 1
        return listing(pattern)

    monkeypatch.setattr(kernel, "list_tools", counted)
    tools = ExposedTools(kernel, deny=["python://secret.*"])
    found = [tools.uri_of(f"python_tool{index % 50}") for index in range(200)]
    assert found == [f"python://tool{index % 50}" for index in range(200)]
    assert listings == [1]  # was one listing (50 tools sorted and globbed) a call
    kernel.register_python_tool("late", echo)
    assert [tools.uri_of("python_late") for _ in range(10)] == ["python://late"] * 10
    assert listings == [2]


def test_the_names_follow_every_change_of_the_kernels_tools() -> None:
    kernel = _kernel(2)
    tools = ExposedTools(kernel)
    assert tools.uri_of("python_tool0") == "python://tool0"
    kernel.register_python_tool("tool0", echo, replace=True)  # the same URI again: the same name
    assert tools.uri_of("python_tool0") == "python://tool0"
    kernel.register_python_tool("a.b", echo)
    assert tools.uri_of("python_a_b") == "python://a.b"
    kernel.register_python_tool("a_b", echo)  # a clash: both get hashed names, the readable one is no one's
    assert tools.uri_of("python_a_b") is None
    assert sorted(uri for name, uri in tools.names().items() if name.startswith("python_a_b")) == [
        "python://a.b",
        "python://a_b",
    ]
    assert kernel.remove_tool("python://a_b")
    assert tools.uri_of("python_a_b") == "python://a.b"
    assert kernel.remove_tool("python://tool1")
    assert tools.uri_of("python_tool1") is None


def test_the_tools_revision_changes_with_each_tool_registered_replaced_or_removed() -> None:
    kernel = _kernel(1)
    seen = [kernel.tools_revision]
    kernel.register_python_tool("more", echo)
    seen.append(kernel.tools_revision)
    kernel.register_python_tool("more", echo, replace=True)
    seen.append(kernel.tools_revision)
    assert kernel.remove_tool("python://more")
    seen.append(kernel.tools_revision)
    assert not kernel.remove_tool("python://more")  # nothing removed: no change
    kernel.list_tools()
    seen.append(kernel.tools_revision)
    assert len(set(seen[:4])) == 4
    assert seen[4] == seen[3]
