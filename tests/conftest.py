"""Fixtures shared by the whole suite.

``KAVALAI_TEST_LOOP=uvloop`` runs every asyncio test on uvloop's event loop instead of asyncio's (the loop
``kavalai serve --loop uvloop`` serves on; it needs the ``kavalai[fast]`` extra and pytest-asyncio 1.4 or later).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from kavalai import FunctionKernel


@pytest.fixture
async def kernel() -> AsyncIterator[FunctionKernel]:
    """A fresh kernel, closed after the test."""
    k = FunctionKernel()
    try:
        yield k
    finally:
        await k.close()


if os.environ.get("KAVALAI_TEST_LOOP") == "uvloop":

    def pytest_asyncio_loop_factories(
        config: pytest.Config, item: Any
    ) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
        """Every asyncio test on uvloop's loop (pytest-asyncio's hook; defined only when asked for)."""
        import uvloop

        return {"uvloop": uvloop.new_event_loop}
