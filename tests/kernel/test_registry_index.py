"""The registry's server index: ``names_of(scheme, server)`` answers from the URIs under that server's prefix, kept
as tools come and go, and always says what a scan of every URI says (hostile round 9, case 31: building a
configuration asked once per server and scanned every URI each time, quadratic: 4,000 REST servers took 260 s)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kavalai.kernel import LazyTool, ToolRegistry, ToolURI

SERVERS = ("shop", "shop.eu", "a", "a.b", "api")
TOOLS = ("charge", "get.item", "list", "x")


def _lazy(scheme: str, server: str, tool: str) -> LazyTool:
    def build() -> Any:
        raise AssertionError("never built here")

    return LazyTool(ToolURI.build(scheme, server, tool), "a tool", {"type": "object"}, None, build)


def _scanned(registry: ToolRegistry, scheme: str, server: str) -> list[str]:
    prefix = f"{scheme}://{server}."
    return [name for name in registry.names() if name.startswith(prefix)]


OPERATIONS = st.lists(
    st.tuples(st.booleans(), st.sampled_from(("rest", "mcp")), st.sampled_from(SERVERS), st.sampled_from(TOOLS)),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_names_of_a_server_is_what_a_scan_of_every_uri_finds(operations: list[tuple[bool, str, str, str]]) -> None:
    registry = ToolRegistry()
    for add, scheme, server, tool in operations:
        if add:
            registry.add_lazy(_lazy(scheme, server, tool), replace=True)
        else:
            registry.remove_tool(str(ToolURI.build(scheme, server, tool)))
        for asked_scheme in ("rest", "mcp"):
            for asked in (*SERVERS, "shop.eu.x", "nosuch"):
                assert sorted(registry.names_of(asked_scheme, asked)) == sorted(_scanned(registry, asked_scheme, asked))
            prefix = f"{asked_scheme}://"
            assert registry.names_of(asked_scheme) == [n for n in registry.names() if n.startswith(prefix)]


def test_a_servers_names_come_in_registration_order() -> None:
    registry = ToolRegistry()
    for tool in ("b", "a", "c"):
        registry.add_lazy(_lazy("rest", "shop", tool))
    registry.add_lazy(_lazy("rest", "other", "z"))
    assert registry.names_of("rest", "shop") == ["rest://shop.b", "rest://shop.a", "rest://shop.c"]
    registry.remove_tool("rest://shop.a")
    assert registry.names_of("rest", "shop") == ["rest://shop.b", "rest://shop.c"]
    assert registry.names_of("rest", "nosuch") == []


class _Unscannable(ToolRegistry):
    """A registry whose every-URI listing fails: what asks it, scans."""

    __slots__ = ()

    def names(self) -> list[str]:
        raise AssertionError("scanned every URI")


def test_a_servers_names_are_found_without_a_scan_of_every_uri() -> None:
    """Case 31 itself: a configuration of N servers asks N times; each answer may cost that server's tools, not
    every tool registered (the cost of a scan is not timed here: whether one happens is what is asserted)."""
    registry = _Unscannable()
    for server in range(50):
        registry.add_lazy(_lazy("rest", f"s{server}", "op"))
        assert registry.names_of("rest", f"s{server}") == [f"rest://s{server}.op"]
