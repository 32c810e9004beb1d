"""What an MCP call tells its server of its deadline, under the one rule for limits (issue 36, finding 2)."""

from __future__ import annotations

import math

import pytest
from tests.kernel.test_ownership import deadline_server

from kavalai import FunctionKernel
from kavalai.adapters.mcp import deadline_from_meta
from kavalai.kernel import MAX_SECONDS


async def test_an_infinite_or_huge_timeout_reaches_the_server_clamped_not_as_an_overflow() -> None:
    # timeout=math.inf or 1e308 failed with ToolExecutionError caused by OverflowError; "5" with a bare TypeError.
    kernel = FunctionKernel()
    kernel.register_mcp_server(deadline_server())
    try:
        for huge in (math.inf, 1e308):
            assert (await kernel.call_tool("mcp://d.echo", {"text": "hi"}, timeout=huge)).result == "hi"  # type: ignore[attr-defined]
        for bad in ("5", -1, math.nan):
            with pytest.raises(ValueError, match=f"got {bad!r}"):
                await kernel.call_tool("mcp://d.echo", {"text": "hi"}, timeout=bad)  # type: ignore[arg-type]
        seen = (await kernel.call_tool("mcp://d.seen")).result  # type: ignore[attr-defined]
    finally:
        await kernel.close()
    assert len(seen) == 2
    assert all(MAX_SECONDS * 1000 - 60_000 < left <= MAX_SECONDS * 1000 for left in seen)


@pytest.mark.parametrize(
    ("meta", "seconds"),
    [
        ({"io.kavalai/deadline": 10**400}, MAX_SECONDS),
        ({"io.kavalai/deadline": 1e308}, MAX_SECONDS),
        ({"io.kavalai/deadline": -3}, 0.0),
        ({"io.kavalai/deadline": 2500}, 2.5),
        ({"io.kavalai/deadline": "2500"}, None),
        ({"io.kavalai/deadline": None}, None),
        ({}, None),
        ("not a dict", None),
    ],
)
def test_a_deadline_from_meta_follows_the_one_rule(meta: object, seconds: float | None) -> None:
    assert deadline_from_meta(meta) == seconds
